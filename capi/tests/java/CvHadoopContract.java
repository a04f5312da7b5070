import java.io.EOFException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.ExecutionException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.fs.statistics.IOStatistics;
import org.apache.hadoop.fs.statistics.IOStatisticsSource;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileRange;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StreamCapabilities;

/**
 * Hadoop FileSystem contract checks on cv://, modelled on Hadoop's contract tests: loading by
 * scheme, open/seek/read past EOF, positioned and ByteBuffer reads, create/overwrite, rename
 * into a directory and onto a file, delete (recursive), mkdirs, listing. Args: the cv client
 * config file. Prints "hadoop contract ok" when every check held.
 */
public final class CvHadoopContract {
    static byte pattern(long i) {
        return (byte) ((i * 2654435761L) >>> 11);
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError("check failed: " + what);
        }
    }

    interface Body {
        void run() throws Exception;
    }

    static void fails(Class<? extends Throwable> want, Body body, String what) throws Exception {
        try {
            body.run();
        } catch (Throwable t) {
            check(want.isInstance(t), what + ": threw " + t + ", wanted " + want.getSimpleName());
            return;
        }
        throw new AssertionError(what + ": did not throw " + want.getSimpleName());
    }

    /** FileSystem.Statistics of the cv scheme (the per-scheme counters engines report). */
    @SuppressWarnings("deprecation")
    static long bytesRead() {
        for (FileSystem.Statistics s : FileSystem.getAllStatistics()) {
            if (s.getScheme().equals("cv")) {
                return s.getBytesRead();
            }
        }
        return -1;
    }

    static long counter(FSDataInputStream in, String name) {
        Long n = in.getIOStatistics().counters().get(name);
        return n == null ? -1 : n;
    }

    /** openFile() and its options; the read-ahead of small sequential reads; IOStatistics. */
    static void openFileChecks(FileSystem fs, Path file, byte[] data) throws Exception {
        int len = data.length;
        String policy = "fs.option.openfile.read.policy";
        // 1 KiB reads over 3 MiB: the sequential policy reads ahead 1 MiB at a time, the random one 64 KiB.
        for (String[] p : new String[][] {{"sequential", "3"}, {"unknown-policy, parquet", "48"}}) {
            try (FSDataInputStream in = fs.openFile(file).opt(policy, p[0]).build().get()) {
                byte[] small = new byte[1024];
                for (int at = 0; at < 3 << 20; at += small.length) {
                    in.readFully(small);
                    check(Arrays.equals(small, Arrays.copyOfRange(data, at, at + small.length)), "small read at " + at);
                }
                check(counter(in, "stream_read_readahead_fills") == Long.parseLong(p[1]),
                        p[0] + ": fills " + counter(in, "stream_read_readahead_fills"));
                in.seek((3 << 20) - 100); // inside the buffer: no new fill
                in.readFully(small, 0, 100);
                check(Arrays.equals(Arrays.copyOf(small, 100), Arrays.copyOfRange(data, (3 << 20) - 100, 3 << 20)),
                        "read after a seek back");
                check(counter(in, "stream_read_readahead_fills") == Long.parseLong(p[1]), "a seek inside the buffer");
                in.seek(len - 10); // the last bytes: a short fill, then EOF
                check(in.read(small) == 10 && in.read() == -1, "reads at the end of the file");
                check(counter(in, "stream_read_bytes") == (3 << 20) + 110, "stream bytes " + counter(in, "stream_read_bytes"));
                check(in.hasCapability(StreamCapabilities.VECTOREDIO) && in.hasCapability(StreamCapabilities.IOSTATISTICS),
                        "capabilities");
            }
        }
        FileStatus st = fs.getFileStatus(file);
        try (FSDataInputStream in = fs.openFile(file).withFileStatus(st).mustLong("fs.option.openfile.length", len)
                .build().get()) {
            byte[] b = new byte[4096];
            in.readFully(len - 4096, b);
            check(Arrays.equals(b, Arrays.copyOfRange(data, len - 4096, len)), "openFile with a status");
        }
        fails(IllegalArgumentException.class, () -> fs.openFile(file).must("fs.cv.no.such.option", "x").build(),
                "an unknown mandatory option");
        FileStatus other = fs.getFileStatus(new Path("/hc/d"));
        fails(IllegalArgumentException.class, () -> fs.openFile(file).withFileStatus(other).build().get(),
                "a status of another file");
        try {
            fs.openFile(new Path("/hc/missing")).build().get();
            throw new AssertionError("openFile of a missing file succeeded");
        } catch (ExecutionException e) {
            check(e.getCause() instanceof FileNotFoundException, "openFile of a missing file: " + e.getCause());
        }
    }

    /** fs.cv.* keys over the file, and instead of it. Args: config file, master, ca, cert, key. */
    static void keysChecks(String[] args) throws Exception {
        Configuration conf = new Configuration(false);
        conf.set("fs.cv.config", args[0]);
        conf.set("fs.cv.deadline", "7s");
        conf.set("fs.cv.retries", "2");
        try (FileSystem fs = FileSystem.newInstance(URI.create("cv://keys/"), conf)) {
            check(fs.exists(new Path("/hc/other")), "the file with keys laid over it");
        }
        conf.set("fs.cv.retries", "many");
        fails(IOException.class, () -> FileSystem.newInstance(URI.create("cv://keys/"), conf), "a bad fs.cv.retries");
        conf.set("fs.cv.retries", "2");
        conf.set("fs.cv.short-circuit", "false");
        try (FileSystem fs = FileSystem.newInstance(URI.create("cv://keys/"), conf)) {
            check(fs.exists(new Path("/hc/other")), "short-circuit reads turned off");
        }
        conf.set("fs.cv.short-circuit", "sometimes");
        fails(IOException.class, () -> FileSystem.newInstance(URI.create("cv://keys/"), conf), "a bad fs.cv.short-circuit");
        conf.unset("fs.cv.short-circuit");
        conf.set("fs.cv.deadline", "soon");
        try {
            FileSystem.newInstance(URI.create("cv://keys/"), conf).close();
            throw new AssertionError("a bad fs.cv.deadline was taken");
        } catch (IOException e) {
            check(e.getMessage().contains("client.deadline"), "the error names the setting: " + e.getMessage());
        }
        Configuration bare = new Configuration(false);
        bare.set("fs.cv.master", args[1]);
        bare.set("fs.cv.tls.ca", args[2]);
        bare.set("fs.cv.tls.cert", args[3]);
        bare.set("fs.cv.tls.key", args[4]);
        try (FileSystem fs = FileSystem.newInstance(URI.create("cv://keys/"), bare)) {
            check(fs.exists(new Path("/hc/other")), "keys alone, no file");
        }
        fails(IOException.class, () -> FileSystem.newInstance(URI.create("cv://keys/"), new Configuration(false)),
                "neither a file nor keys");
    }

    /** FileContext through CvAbstractFileSystem. */
    static void fileContextChecks(String config) throws Exception {
        Configuration conf = new Configuration(false);
        conf.set("fs.cv.config", config);
        conf.set("fs.AbstractFileSystem.cv.impl", "io.cv.hadoop.CvAbstractFileSystem");
        FileContext fc = FileContext.getFileContext(URI.create("cv://cluster/"), conf);
        Path dir = new Path("/hc/fc");
        fc.mkdir(dir, FsPermission.getDirDefault(), true);
        Path f = new Path(dir, "a");
        try (FSDataOutputStream out = fc.create(f, EnumSet.of(CreateFlag.CREATE), Options.CreateOpts.createParent())) {
            out.write(new byte[] {1, 2, 3});
        }
        check(fc.getFileStatus(f).getLen() == 3, "FileContext status");
        try (FSDataInputStream in = fc.open(f)) {
            check(in.read() == 1 && in.read() == 2 && in.read() == 3 && in.read() == -1, "FileContext read");
        }
        check(fc.util().listStatus(dir).length == 1, "FileContext listing");
        fc.rename(f, new Path(dir, "b"));
        check(fc.util().exists(new Path(dir, "b")) && !fc.util().exists(f), "FileContext rename");
        check(fc.delete(dir, true) && !fc.util().exists(dir), "FileContext delete");
    }

    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration(false);
        conf.set("fs.cv.config", args[0]);
        // Found by scheme through META-INF/services: no fs.cv.impl set.
        FileSystem fs = FileSystem.newInstance(URI.create("cv://cluster/"), conf);
        check(fs.getClass().getName().equals("io.cv.hadoop.CvHadoopFileSystem"), "loaded " + fs.getClass());
        check(fs.getScheme().equals("cv") && fs.getUri().toString().equals("cv://cluster/"), "uri " + fs.getUri());

        Path root = new Path("/hc");
        check(fs.mkdirs(new Path(root, "d")), "mkdirs");
        check(fs.getFileStatus(new Path(root, "d")).isDirectory(), "a directory");

        int len = (5 << 20) + 123;
        byte[] data = new byte[len];
        for (int i = 0; i < len; i++) {
            data[i] = pattern(i);
        }
        Path file = new Path(root, "e/x/f.bin"); // parents made by create
        try (FSDataOutputStream out = fs.create(file, false)) {
            out.write(data, 0, 1000);
            out.write(data, 1000, len - 1000);
        }
        FileStatus st = fs.getFileStatus(file);
        check(st.isFile() && st.getLen() == len, "status " + st);
        check(st.getPath().toString().equals("cv://cluster/hc/e/x/f.bin"), "qualified " + st.getPath());
        fails(FileAlreadyExistsException.class, () -> fs.create(file, false).close(), "create over a file");
        fails(FileAlreadyExistsException.class, () -> fs.create(new Path(root, "d"), true).close(), "create over a dir");

        try (FSDataInputStream in = fs.open(file)) {
            byte[] all = new byte[len];
            in.readFully(all);
            check(Arrays.equals(all, data), "sequential bytes");
            check(in.read() == -1, "read at EOF is -1");
            in.seek(len / 2);
            check(in.getPos() == len / 2, "pos after seek");
            byte[] b = new byte[4096];
            in.readFully(b);
            check(Arrays.equals(b, Arrays.copyOfRange(data, len / 2, len / 2 + 4096)), "bytes after seek");
            fails(EOFException.class, () -> in.seek(len + 1), "seek past EOF");
            fails(EOFException.class, () -> in.seek(-1), "negative seek");
            long pos = in.getPos();
            byte[] p = new byte[777];
            check(in.read(100, p, 0, p.length) == p.length, "positioned read");
            check(in.getPos() == pos, "a positioned read leaves the position");
            check(Arrays.equals(p, Arrays.copyOfRange(data, 100, 877)), "positioned bytes");
            check(in.read(len, p, 0, 1) == -1, "positioned read at EOF is -1");
            fails(EOFException.class, () -> in.readFully(len - 10, new byte[20]), "readFully past EOF");
            check(in.hasCapability(StreamCapabilities.PREADBYTEBUFFER), "pread bytebuffer capability");
            ByteBuffer bb = ByteBuffer.allocateDirect(8192);
            in.readFully(len - 8192, bb);
            bb.flip();
            byte[] tail = new byte[8192];
            bb.get(tail);
            check(Arrays.equals(tail, Arrays.copyOfRange(data, len - 8192, len)), "footer into a direct buffer");

            // Vectored: across the 4 MiB block boundary, the tail, the start, and one past EOF.
            List<FileRange> ranges = new ArrayList<>();
            long[][] want = {{(4L << 20) - 1000, 5000}, {len - 300, 300}, {0, 64}};
            for (long[] w : want) {
                ranges.add(FileRange.createFileRange(w[0], (int) w[1]));
            }
            FileRange past = FileRange.createFileRange(len - 10, 20);
            ranges.add(past);
            for (boolean heap : new boolean[] {true, false}) {
                in.readVectored(ranges, n -> heap ? ByteBuffer.allocate(n) : ByteBuffer.allocateDirect(n));
                for (int i = 0; i < want.length; i++) {
                    ByteBuffer got = ranges.get(i).getData().get();
                    byte[] g = new byte[got.remaining()];
                    got.get(g);
                    int from = (int) want[i][0];
                    check(Arrays.equals(g, Arrays.copyOfRange(data, from, from + (int) want[i][1])), "vectored range " + i);
                }
                try {
                    past.getData().get();
                    throw new AssertionError("a vectored range past EOF succeeded");
                } catch (ExecutionException e) {
                    check(e.getCause() instanceof EOFException, "past EOF: " + e.getCause());
                }
            }
        }
        // Every byte handed to the caller, counted once: the whole file, then 4096 + 777 + 8192,
        // then twice the vectored ranges.
        check(bytesRead() == len + 4096L + 777 + 8192 + 2 * (5000 + 300 + 64), "bytes read counted: " + bytesRead());

        // Block locations: the 4 MiB blocks of the file, covering it, each on the local worker.
        BlockLocation[] locs = fs.getFileBlockLocations(fs.getFileStatus(file), 0, len);
        check(locs.length == 2, "blocks " + Arrays.toString(locs));
        check(locs[0].getOffset() == 0 && locs[0].getLength() + locs[1].getLength() == len
                && locs[1].getOffset() == locs[0].getLength(), "block ranges " + Arrays.toString(locs));
        check(Arrays.asList(locs[1].getHosts()).contains("127.0.0.1"), "block hosts " + Arrays.toString(locs[1].getHosts()));
        check(fs.getFileBlockLocations(fs.getFileStatus(file), (4L << 20) + 1, 10).length == 1, "locations of a range");

        // Located listing: the file with its blocks' hosts, from the default listLocatedStatus.
        RemoteIterator<LocatedFileStatus> located = fs.listLocatedStatus(new Path(root, "e/x"));
        LocatedFileStatus lf = located.next();
        check(!located.hasNext() && lf.getLen() == len && lf.getBlockLocations().length == 2
                && lf.getBlockLocations()[0].getHosts().length > 0, "located listing " + lf);

        openFileChecks(fs, file, data);

        FileStatus[] listed = fs.listStatus(root);
        check(listed.length == 2 && listed[0].getPath().getName().equals("d")
                && listed[1].getPath().getName().equals("e"), "listing " + Arrays.toString(listed));
        check(fs.listStatus(file).length == 1, "listing a file gives the file");

        // rename: into an existing directory, onto an existing file, missing source or parent.
        check(fs.rename(file, new Path(root, "d")), "rename into a directory");
        Path moved = new Path(root, "d/f.bin");
        check(fs.getFileStatus(moved).getLen() == len, "moved under the directory");
        try (FSDataOutputStream out = fs.create(new Path(root, "other"), false)) {
            out.write(1);
        }
        check(!fs.rename(new Path(root, "other"), moved), "rename onto an existing file is refused");
        check(!fs.rename(new Path(root, "missing"), new Path(root, "x")), "rename of a missing source");
        check(!fs.rename(new Path(root, "other"), new Path(root, "no/such/dir/x")), "rename to a missing parent");
        check(fs.exists(new Path(root, "other")), "a refused rename changes nothing");

        // delete: a non-empty directory needs recursive; a missing path is false.
        fails(IOException.class, () -> fs.delete(new Path(root, "d"), false), "non-recursive delete of a full dir");
        check(fs.delete(new Path(root, "d"), true), "recursive delete");
        check(!fs.exists(moved), "deleted");
        check(!fs.delete(new Path(root, "missing"), false), "delete of a missing path");
        fails(FileNotFoundException.class, () -> fs.getFileStatus(new Path(root, "missing")), "status of a missing path");
        fails(FileNotFoundException.class, () -> fs.open(new Path(root, "missing")), "open of a missing path");
        // append: Issue40.append.

        fs.setWorkingDirectory(root);
        check(fs.exists(new Path("other")), "relative paths resolve against the working directory");
        IOStatistics io = ((IOStatisticsSource) fs).getIOStatistics();
        check(io.counters().get("op_rename") >= 4 && io.counters().get("op_open") >= 1
                && io.counters().get("stream_read_bytes") > len, "file system statistics " + io);
        fs.close();

        keysChecks(args);
        fileContextChecks(args[0]);
        Issue40.run(args[0]);
        System.out.println("hadoop contract ok");
    }
}
