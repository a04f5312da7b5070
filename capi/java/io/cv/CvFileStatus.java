package io.cv;

/** Metadata of a path; getters named as Hadoop's FileStatus. */
public final class CvFileStatus {
    private final String path;
    private final long length;
    private final boolean directory;
    private final long modificationTime;
    private final long version;
    private final long blockSize;
    private final int permission;
    private final boolean complete;
    private final long id;

    /** Built by the native library. */
    CvFileStatus(String path, long length, boolean directory, long modificationTime, long version,
            long blockSize, int permission, boolean complete, long id) {
        this.path = path;
        this.length = length;
        this.directory = directory;
        this.modificationTime = modificationTime;
        this.version = version;
        this.blockSize = blockSize;
        this.permission = permission;
        this.complete = complete;
        this.id = id;
    }

    /** Absolute cv path, e.g. "/warehouse/t/part-0.parquet". */
    public String getPath() {
        return path;
    }

    public long getLen() {
        return length;
    }

    public boolean isDirectory() {
        return directory;
    }

    public boolean isFile() {
        return !directory;
    }

    /** Milliseconds since the Unix epoch. */
    public long getModificationTime() {
        return modificationTime;
    }

    /** Changes whenever the content does. */
    public long getVersion() {
        return version;
    }

    public long getBlockSize() {
        return blockSize;
    }

    /** POSIX permission bits. */
    public int getPermission() {
        return permission;
    }

    /** False while the file is being written. */
    public boolean isComplete() {
        return complete;
    }

    /** Inode id, stable across renames. */
    public long getFileId() {
        return id;
    }

    @Override
    public String toString() {
        return "CvFileStatus{" + path + (directory ? " dir" : " len=" + length) + " version=" + version + "}";
    }
}
