package io.cv;

import java.nio.ByteBuffer;

/**
 * The native methods of libcv_capi. Handles are ids (never pointers): a
 * closed or unknown one gives a {@link CvException} of kind BAD_HANDLE.
 * The library is loaded from the system property {@code cv.native.library}
 * (a full path) if set, else from {@code java.library.path} as "cv_capi".
 */
final class Native {
    static {
        String path = System.getProperty("cv.native.library");
        if (path != null && !path.isEmpty()) {
            System.load(path);
        } else {
            System.loadLibrary("cv_capi");
        }
    }

    private Native() {}

    static native String version();

    static native long clientOpenFile(String configPath) throws CvException;

    static native long clientOpenToml(String configToml) throws CvException;

    /** The file at configPath (none if null) with the TOML text overrides laid over it. */
    static native long clientOpenLayers(String configPath, String overridesToml) throws CvException;

    static native void clientClose(long client) throws CvException;

    static native CvFileStatus stat(long client, String path) throws java.io.IOException;

    static native CvFileStatus[] list(long client, String path) throws java.io.IOException;

    static native void mkdir(long client, String path, boolean parents) throws java.io.IOException;

    static native void rename(long client, String src, String dst) throws java.io.IOException;

    static native void delete(long client, String path, boolean recursive) throws java.io.IOException;

    static native long open(long client, String path) throws java.io.IOException;

    /** {length, version, tailOffset}. */
    static native long[] fileInfo(long file) throws CvException;

    /** Direct buffer [off, off+len); returns bytes read (0 at the end). */
    static native int pread(long file, long position, ByteBuffer buf, int off, int len, boolean fully)
            throws java.io.IOException;

    static native int preadArray(long file, long position, byte[] b, int off, int len, boolean fully)
            throws java.io.IOException;

    static native int[] preadv(long file, long[] positions, ByteBuffer[] bufs, int[] offsets, int[] lengths)
            throws java.io.IOException;

    static native void fileClose(long file) throws CvException;

    /** One string per block: "offset length host1,host2" (no hosts: every copy lost). */
    static native String[] fileBlocks(long file) throws CvException;

    static native long create(long client, String path, boolean overwrite) throws java.io.IOException;

    static native void write(long writer, ByteBuffer buf, int off, int len) throws java.io.IOException;

    static native void writeArray(long writer, byte[] b, int off, int len) throws java.io.IOException;

    static native CvFileStatus writerClose(long writer) throws java.io.IOException;

    static native void writerAbort(long writer) throws CvException;

    /** The block size the master's create reply gave the file. */
    static native long writerBlockSize(long writer) throws CvException;

    /** {capacity, used, remaining} of the cluster's live workers, in bytes (one round trip). */
    static native long[] usage(long client) throws java.io.IOException;
}
