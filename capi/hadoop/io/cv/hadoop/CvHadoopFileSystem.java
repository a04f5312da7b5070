package io.cv.hadoop;

import io.cv.CvBlock;
import io.cv.CvErrorKind;
import io.cv.CvException;
import io.cv.CvFileAlreadyExistsException;
import io.cv.CvFileStatus;
import io.cv.CvInputStream;
import io.cv.CvFileSystem;
import io.cv.CvOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

/**
 * Hadoop's FileSystem for {@code cv://} URIs over the JNI binding ({@link CvFileSystem}).
 * Registered through META-INF/services, or with {@code fs.cv.impl=io.cv.hadoop.CvHadoopFileSystem}.
 * {@code fs.cv.config} (else the environment's CV_CONFIG) names the cv client config file.
 *
 * <p>Semantics are Hadoop's: create makes missing parents; rename into an existing directory
 * moves the source under it, and answers false (nothing changed) when the source is missing,
 * the destination's parent is missing, or the destination is an existing file; delete of a
 * missing path answers false.
 */
public class CvHadoopFileSystem extends FileSystem {
    /** The configuration key naming the cv client config file. */
    public static final String CONFIG_KEY = "fs.cv.config";

    private URI uri;
    private Path workingDir;
    private CvFileSystem cv;

    /** Hadoop instantiates file systems reflectively, then calls {@link #initialize}. */
    public CvHadoopFileSystem() {}

    @Override
    public String getScheme() {
        return CvFileSystem.SCHEME;
    }

    @Override
    public void initialize(URI name, Configuration conf) throws IOException {
        super.initialize(name, conf);
        String config = conf.get(CONFIG_KEY, System.getenv("CV_CONFIG"));
        if (config == null || config.isEmpty()) {
            throw new IOException("cv: set " + CONFIG_KEY + " (or CV_CONFIG) to the cv client config file");
        }
        String authority = name.getAuthority() == null ? "" : name.getAuthority();
        this.uri = URI.create(CvFileSystem.SCHEME + "://" + authority + "/");
        this.workingDir = new Path(uri.toString());
        this.cv = CvFileSystem.fromConfigFile(config);
        setConf(conf);
    }

    @Override
    public URI getUri() {
        return uri;
    }

    /** The cv path of a Hadoop path (relative ones against the working directory). */
    private String cvPath(Path p) {
        Path q = p.isAbsolute() ? p : new Path(workingDir, p);
        return CvFileSystem.pathOf(q.toUri());
    }

    private Path qualified(String cvPath) {
        return new Path(uri.getScheme(), uri.getAuthority(), cvPath);
    }

    private FileStatus toHadoop(CvFileStatus s) {
        FsPermission perm = new FsPermission((short) (s.getPermission() & 0x1ff));
        String user = System.getProperty("user.name", "cv");
        return new FileStatus(s.getLen(), s.isDirectory(), 1, s.isDirectory() ? 0 : s.getBlockSize(),
                s.getModificationTime(), s.getModificationTime(), perm, user, user, qualified(s.getPath()));
    }

    @Override
    public FSDataInputStream open(Path f, int bufferSize) throws IOException {
        statistics.incrementReadOps(1);
        return new FSDataInputStream(new CvHadoopInputStream(cv.open(cvPath(f)), statistics));
    }

    @Override
    public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
            short replication, long blockSize, Progressable progress) throws IOException {
        String p = cvPath(f);
        statistics.incrementWriteOps(1);
        // One round trip when the parent exists (the common case): the master itself refuses
        // an existing file (unless overwrite) or a directory; a missing parent is made only then.
        CvOutputStream out;
        try {
            out = createOrRefuse(p, overwrite);
        } catch (FileNotFoundException e) {
            Path parent = new Path(p).getParent();
            if (parent == null) {
                throw e;
            }
            cv.mkdirs(parent.toUri().getPath());
            out = createOrRefuse(p, overwrite);
        }
        return new FSDataOutputStream(out, statistics);
    }

    /** cv's create, with Hadoop's exception for a path that is taken. */
    private CvOutputStream createOrRefuse(String p, boolean overwrite) throws IOException {
        try {
            return cv.create(p, overwrite);
        } catch (CvFileAlreadyExistsException e) {
            throw new FileAlreadyExistsException("cv: " + p + " already exists");
        } catch (CvException e) {
            if (e.kind() == CvErrorKind.IS_A_DIRECTORY) {
                throw new FileAlreadyExistsException("cv: " + p + " is a directory");
            }
            throw e;
        }
    }

    @Override
    public FSDataOutputStream append(Path f, int bufferSize, Progressable progress) throws IOException {
        throw new UnsupportedOperationException("cv files are written once: append is not supported (" + f + ")");
    }

    private CvFileStatus statusOrNull(String p) throws IOException {
        try {
            return cv.getFileStatus(p);
        } catch (FileNotFoundException e) {
            return null;
        }
    }

    @Override
    public boolean rename(Path src, Path dst) throws IOException {
        statistics.incrementWriteOps(1);
        String s = cvPath(src);
        String d = cvPath(dst);
        if (s.equals("/") || statusOrNull(s) == null) {
            return false;
        }
        CvFileStatus target = statusOrNull(d);
        if (target != null && target.isDirectory()) {
            d = (d.endsWith("/") ? d : d + "/") + new Path(s).getName();
            target = statusOrNull(d);
        }
        if (target != null) {
            return s.equals(d) && !target.isDirectory();
        }
        Path parent = new Path(d).getParent();
        if (parent != null) {
            CvFileStatus ps = statusOrNull(parent.toUri().getPath());
            if (ps == null || !ps.isDirectory()) {
                return false;
            }
        }
        if ((d + "/").startsWith(s + "/")) {
            return false; // into itself
        }
        return cv.rename(s, d);
    }

    @Override
    public boolean delete(Path f, boolean recursive) throws IOException {
        statistics.incrementWriteOps(1);
        String p = cvPath(f);
        if (p.equals("/")) {
            // Hadoop: deleting the root deletes nothing, and says so.
            return false;
        }
        return cv.delete(p, recursive);
    }

    @Override
    public FileStatus[] listStatus(Path f) throws IOException {
        statistics.incrementReadOps(1);
        String p = cvPath(f);
        CvFileStatus s = cv.getFileStatus(p);
        if (!s.isDirectory()) {
            return new FileStatus[] {toHadoop(s)};
        }
        CvFileStatus[] entries = cv.listStatus(p);
        FileStatus[] out = new FileStatus[entries.length];
        for (int i = 0; i < entries.length; i++) {
            out[i] = toHadoop(entries[i]);
        }
        return out;
    }

    /**
     * The blocks overlapping {@code [start, start + len)}, with the hosts of the workers that
     * hold each (the owner first), so engines can schedule near the data. One open: the block
     * map comes with it.
     */
    @Override
    public BlockLocation[] getFileBlockLocations(FileStatus file, long start, long len) throws IOException {
        if (file == null) {
            return null;
        }
        if (start < 0 || len < 0) {
            throw new IllegalArgumentException("cv: negative start or length");
        }
        if (file.isDirectory() || file.getLen() <= start) {
            return new BlockLocation[0];
        }
        List<BlockLocation> out = new ArrayList<>();
        try (CvInputStream in = cv.open(cvPath(file.getPath()))) {
            for (CvBlock b : in.getBlocks()) {
                if (b.getOffset() + b.getLength() <= start || b.getOffset() >= start + len) {
                    continue;
                }
                String[] hosts = b.getHosts();
                out.add(new BlockLocation(hosts, hosts, b.getOffset(), b.getLength()));
            }
        }
        return out.toArray(new BlockLocation[0]);
    }

    @Override
    public void setWorkingDirectory(Path newDir) {
        workingDir = newDir.isAbsolute() ? newDir : new Path(workingDir, newDir);
    }

    @Override
    public Path getWorkingDirectory() {
        return workingDir;
    }

    @Override
    public boolean mkdirs(Path f, FsPermission permission) throws IOException {
        statistics.incrementWriteOps(1);
        String p = cvPath(f);
        CvFileStatus s = statusOrNull(p);
        if (s != null && !s.isDirectory()) {
            throw new FileAlreadyExistsException("cv: " + p + " is a file");
        }
        return cv.mkdirs(p);
    }

    @Override
    public FileStatus getFileStatus(Path f) throws IOException {
        statistics.incrementReadOps(1);
        return toHadoop(cv.getFileStatus(cvPath(f)));
    }

    @Override
    public void close() throws IOException {
        try {
            super.close();
        } finally {
            if (cv != null) {
                cv.close();
            }
        }
    }
}
