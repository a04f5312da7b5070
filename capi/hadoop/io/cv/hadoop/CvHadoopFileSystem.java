package io.cv.hadoop;

import io.cv.CvBlock;
import io.cv.CvErrorKind;
import io.cv.CvException;
import io.cv.CvFileAlreadyExistsException;
import io.cv.CvFileStatus;
import io.cv.CvInputStream;
import io.cv.CvFileSystem;
import io.cv.CvNotADirectoryException;
import io.cv.CvOutputStream;
import io.cv.CvUsage;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.FsStatus;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.ParentNotDirectoryException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathIOException;
import org.apache.hadoop.fs.impl.AbstractFSBuilderImpl;
import org.apache.hadoop.fs.impl.OpenFileParameters;
import org.apache.hadoop.fs.statistics.IOStatistics;
import org.apache.hadoop.fs.statistics.IOStatisticsSource;
import org.apache.hadoop.fs.statistics.StoreStatisticNames;
import org.apache.hadoop.fs.statistics.StreamStatisticNames;
import org.apache.hadoop.fs.statistics.impl.IOStatisticsBinding;
import org.apache.hadoop.fs.statistics.impl.IOStatisticsStore;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;
import org.apache.hadoop.util.functional.CallableRaisingIOE;

/**
 * Hadoop's FileSystem for {@code cv://} URIs over the JNI binding ({@link CvFileSystem}).
 * Registered through META-INF/services, or with {@code fs.cv.impl=io.cv.hadoop.CvHadoopFileSystem};
 * {@link CvAbstractFileSystem} is the same for FileContext. {@code fs.cv.config} (else the
 * environment's CV_CONFIG) names the cv client config file; the other {@code fs.cv.*} keys
 * ({@link CvHadoopConfig}) are laid over it.
 *
 * <p>{@code openFile()} takes the standard options: the read policy sets how far small
 * sequential reads read ahead; a given status or length is accepted and saves nothing, since
 * cv's open is one round trip that brings the length, the block map and the tail anyway.
 *
 * <p>Semantics are Hadoop's: create makes missing parents; rename into an existing directory
 * moves the source under it, and answers false (nothing changed) when the source is missing,
 * the destination's parent is missing, or the destination is an existing file; delete of a
 * missing path answers false. A path below a file ({@code file/child}) does not exist: reads say so
 * (FileNotFoundException; exists and isFile false, delete and rename false) and writes under it
 * are a ParentNotDirectoryException ({@link #belowAFile}).
 *
 * <p>cv keeps no access times, owners or settable permissions yet (tenants come later):
 * setTimes, setOwner and setPermission change nothing and succeed on an existing path, as S3A's
 * do, so that {@code distcp -p} and committers that set permissions still run; a missing path is
 * a FileNotFoundException.
 */
public class CvHadoopFileSystem extends FileSystem implements IOStatisticsSource {
    /** The configuration key naming the cv client config file. */
    public static final String CONFIG_KEY = CvHadoopConfig.CONFIG;

    /** The openFile() options this file system reads (the rest of the standard ones are accepted). */
    private static final Set<String> OPEN_OPTIONS = new HashSet<>(Options.OpenFileOptions.FS_OPTION_OPENFILE_STANDARD_OPTIONS);

    /** Hadoop names no statistic for it. */
    static final String OP_GET_FILE_BLOCK_LOCATIONS = "op_get_file_block_locations";

    private static final String[] OPS = {StoreStatisticNames.OP_OPEN, StoreStatisticNames.OP_OPENFILE,
        StoreStatisticNames.OP_CREATE, StoreStatisticNames.OP_DELETE, StoreStatisticNames.OP_RENAME,
        StoreStatisticNames.OP_MKDIRS, StoreStatisticNames.OP_LIST_STATUS, StoreStatisticNames.OP_GET_FILE_STATUS,
        OP_GET_FILE_BLOCK_LOCATIONS};

    /** The block size of a cv master that is not told otherwise (cv-master's {@code block_size}). */
    static final long MASTER_DEFAULT_BLOCK_SIZE = 4 << 20;

    /** Whether the native client is shared with others of the same settings (FileContext's). */
    private final boolean shared;
    private URI uri;
    private Path workingDir;
    private CvFileSystem cv;
    private CvHadoopConfig settings;
    /** The block size the cluster gave the last file created here; 0 before the first. */
    private volatile long clusterBlockSize;
    /** Operation counts and durations, plus every closed stream's counters. */
    private final IOStatisticsStore io = IOStatisticsBinding.iostatisticsStore()
            .withDurationTracking(OPS)
            .withCounters(StreamStatisticNames.STREAM_READ_BYTES, StreamStatisticNames.STREAM_READ_OPERATIONS,
                    StreamStatisticNames.STREAM_READ_FULLY_OPERATIONS, StreamStatisticNames.STREAM_READ_SEEK_OPERATIONS,
                    StreamStatisticNames.STREAM_READ_VECTORED_OPERATIONS,
                    StreamStatisticNames.STREAM_READ_VECTORED_INCOMING_RANGES,
                    StreamStatisticNames.STREAM_READ_CLOSE_OPERATIONS, StreamStatisticNames.STREAM_READ_EXCEPTIONS,
                    CvHadoopInputStream.READAHEAD_FILLS)
            .build();

    /** Hadoop instantiates file systems reflectively, then calls {@link #initialize}. */
    public CvHadoopFileSystem() {
        this(false);
    }

    /**
     * {@code shared}: the native client is one of {@link CvSharedClients}, for callers that never
     * close their file system (FileContext); {@link #close} then leaves it to the others.
     */
    CvHadoopFileSystem(boolean shared) {
        this.shared = shared;
    }

    @Override
    public String getScheme() {
        return CvFileSystem.SCHEME;
    }

    @Override
    public void initialize(URI name, Configuration conf) throws IOException {
        super.initialize(name, conf);
        try {
            settings = CvHadoopConfig.from(conf);
        } catch (IllegalArgumentException e) {
            throw new IOException(e.getMessage(), e);
        }
        String authority = name.getAuthority() == null ? "" : name.getAuthority();
        this.uri = URI.create(CvFileSystem.SCHEME + "://" + authority + "/");
        this.workingDir = new Path(uri.toString());
        CvHadoopConfig s = settings;
        CvSharedClients.Connect connect = () -> CvFileSystem.fromConfigLayers(s.configFile, s.overridesToml);
        this.cv = shared ? CvSharedClients.get(authority, s, connect) : connect.connect();
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
        long blockSize = s.isDirectory() ? 0 : s.getBlockSize() > 0 ? s.getBlockSize() : getDefaultBlockSize(null);
        return new FileStatus(s.getLen(), s.isDirectory(), 1, blockSize,
                s.getModificationTime(), s.getModificationTime(), perm, user, user, qualified(s.getPath()));
    }

    /** Runs one operation, counting it and its duration under {@code op}. */
    private <T> T timed(String op, CallableRaisingIOE<T> call) throws IOException {
        try {
            return IOStatisticsBinding.trackDuration(io, op, call);
        } catch (CvNotADirectoryException e) {
            throw belowAFile(op, e);
        }
    }

    /**
     * The one place a path below a file ({@code file/child}: cv's NOT_A_DIRECTORY) gets its Hadoop
     * meaning. It is a FileNotFoundException already (io.cv), so getFileStatus, listStatus and
     * open throw that, exists and isFile answer false, and delete and rename answer false, as
     * for a missing path (file:// does the same). Making something under a file (mkdirs, create)
     * is a ParentNotDirectoryException, as HDFS throws and the FileSystem specification allows
     * ("no ancestor may be a file").
     */
    private static IOException belowAFile(String op, CvNotADirectoryException e) {
        if (op.equals(StoreStatisticNames.OP_MKDIRS) || op.equals(StoreStatisticNames.OP_CREATE)) {
            IOException p = new ParentNotDirectoryException(e.getMessage());
            p.initCause(e);
            return p;
        }
        return e;
    }

    @Override
    public IOStatistics getIOStatistics() {
        return io;
    }

    @Override
    public FSDataInputStream open(Path f, int bufferSize) throws IOException {
        return timed(StoreStatisticNames.OP_OPEN, () -> openWith(f, settings.readahead));
    }

    private FSDataInputStream openWith(Path f, long readahead) throws IOException {
        statistics.incrementReadOps(1);
        CvInputStream in;
        try {
            in = cv.open(cvPath(f));
        } catch (CvException e) {
            if (e.kind() == CvErrorKind.FILE_INCOMPLETE) {
                throw new CvFileBeingWrittenException(f.toString(), e);
            }
            throw e;
        }
        return new FSDataInputStream(new CvHadoopInputStream(in, statistics, readahead, io));
    }

    /**
     * openFile(): unknown mandatory options are refused, as Hadoop's contract asks; the read
     * policy (the first of its list cv knows) picks the read-ahead; a given status must name the
     * same file. The open itself runs at once, on the caller's thread: it is one round trip.
     */
    @Override
    protected CompletableFuture<FSDataInputStream> openFileWithOptions(Path path, OpenFileParameters p)
            throws IOException {
        AbstractFSBuilderImpl.rejectUnknownMandatoryKeys(p.getMandatoryKeys(), OPEN_OPTIONS, "for " + path);
        FileStatus st = p.getStatus();
        if (st != null && !st.getPath().getName().equals(path.getName())) {
            throw new IllegalArgumentException("cv: openFile(" + path + ") with the status of another file: " + st.getPath());
        }
        long readahead = readaheadFor(p.getOptions().getTrimmedStrings(Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY));
        CompletableFuture<FSDataInputStream> f = new CompletableFuture<>();
        try {
            f.complete(timed(StoreStatisticNames.OP_OPENFILE, () -> openWith(path, readahead)));
        } catch (IOException | RuntimeException e) {
            f.completeExceptionally(e);
        }
        return f;
    }

    /** The read-ahead of a read-policy list: the first policy named there that cv knows. */
    long readaheadFor(String[] policies) {
        for (String policy : policies) {
            switch (policy.toLowerCase(Locale.ROOT)) {
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_SEQUENTIAL:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_WHOLE_FILE:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_CSV:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_JSON:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_AVRO:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_DEFAULT:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_ADAPTIVE:
                    return settings.readahead;
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_RANDOM:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_VECTOR:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_COLUMNAR:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_PARQUET:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_ORC:
                case Options.OpenFileOptions.FS_OPTION_OPENFILE_READ_POLICY_HBASE:
                    return settings.readaheadRandom;
                default:
                    // Unknown policies are skipped, as the openFile() specification asks.
            }
        }
        return settings.readahead;
    }

    @Override
    public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
            short replication, long blockSize, Progressable progress) throws IOException {
        return timed(StoreStatisticNames.OP_CREATE, () -> createFile(f, overwrite));
    }

    private FSDataOutputStream createFile(Path f, boolean overwrite) throws IOException {
        String p = cvPath(f);
        statistics.incrementWriteOps(1);
        // One round trip when the parent exists (the common case): the master itself refuses
        // an existing file (unless overwrite) or a directory; a missing parent is made only then.
        CvOutputStream out;
        try {
            out = createOrRefuse(p, overwrite);
        } catch (CvNotADirectoryException e) {
            throw e; // an ancestor is a file: no parent to make
        } catch (FileNotFoundException e) {
            Path parent = new Path(p).getParent();
            if (parent == null) {
                throw e;
            }
            cv.mkdirs(parent.toUri().getPath());
            out = createOrRefuse(p, overwrite);
        }
        clusterBlockSize = out.getBlockSize();
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

    /** Refused with an IOException (which the shell reports as a message, not a stack trace). */
    @Override
    public FSDataOutputStream append(Path f, int bufferSize, Progressable progress) throws IOException {
        throw new PathIOException(f.toString(), "append is not supported: cv files are written once");
    }

    /**
     * The block size files are written with: {@code fs.cv.block.size} if set, else what the
     * cluster's master gave the last file created here, else cv-master's default (4 MiB). The
     * master tells its block size only in create replies; no other call brings it.
     */
    @Override
    public long getDefaultBlockSize(Path f) {
        if (settings.blockSize > 0) {
            return settings.blockSize;
        }
        long learned = clusterBlockSize;
        return learned > 0 ? learned : MASTER_DEFAULT_BLOCK_SIZE;
    }

    @Override
    @Deprecated
    public long getDefaultBlockSize() {
        return getDefaultBlockSize(null);
    }

    /** Capacity, use and free space of the cluster's live workers ({@code hadoop fs -df}). */
    @Override
    public FsStatus getStatus(Path p) throws IOException {
        statistics.incrementReadOps(1);
        CvUsage u = cv.getUsage();
        return new FsStatus(u.getCapacity(), u.getUsed(), u.getRemaining());
    }

    /** cv keeps no settable times: nothing changes (see the class comment); a missing path fails. */
    @Override
    public void setTimes(Path p, long mtime, long atime) throws IOException {
        getFileStatus(p);
    }

    /** cv keeps no settable permissions yet: nothing changes; a missing path fails. */
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
        getFileStatus(p);
    }

    /** cv keeps no owners yet: nothing changes; a missing path fails. */
    @Override
    public void setOwner(Path p, String username, String groupname) throws IOException {
        getFileStatus(p);
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
        return timed(StoreStatisticNames.OP_RENAME, () -> renamePath(src, dst));
    }

    private boolean renamePath(Path src, Path dst) throws IOException {
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
        return timed(StoreStatisticNames.OP_DELETE, () -> deletePath(f, recursive));
    }

    private boolean deletePath(Path f, boolean recursive) throws IOException {
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
        return timed(StoreStatisticNames.OP_LIST_STATUS, () -> list(f));
    }

    private FileStatus[] list(Path f) throws IOException {
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
        return timed(OP_GET_FILE_BLOCK_LOCATIONS, () -> blocks(file, start, len));
    }

    private BlockLocation[] blocks(FileStatus file, long start, long len) throws IOException {
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
        return timed(StoreStatisticNames.OP_MKDIRS, () -> makeDirs(f));
    }

    private boolean makeDirs(Path f) throws IOException {
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
        return timed(StoreStatisticNames.OP_GET_FILE_STATUS, () -> {
            statistics.incrementReadOps(1);
            return toHadoop(cv.getFileStatus(cvPath(f)));
        });
    }

    @Override
    public void close() throws IOException {
        try {
            super.close();
        } finally {
            // A shared client is left to the others using it; the last one's Cleaner closes it.
            if (cv != null && !shared) {
                cv.close();
            }
        }
    }
}
