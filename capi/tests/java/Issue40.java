import io.cv.CvError;
import io.cv.CvErrorKind;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.FsShell;
import org.apache.hadoop.fs.FsStatus;
import org.apache.hadoop.fs.ParentNotDirectoryException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathIOException;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.ToolRunner;

/**
 * What an outside check found in cv's Hadoop FileSystem (issue 40), each as its own check so that
 * one run shows every one that fails: paths below a file; setTimes/setPermission/setOwner;
 * append and `-appendToFile`; the default block size; getStatus and `-df`; native clients of
 * FileContexts. Run by CvHadoopContract with the cv client config file.
 */
final class Issue40 {
    interface Body {
        void run() throws Exception;
    }

    private final List<String> failed = new ArrayList<>();

    private void attempt(String what, Body body) {
        try {
            body.run();
            System.out.println("issue 40 ok: " + what);
        } catch (Throwable t) {
            failed.add(what + ": " + t);
            System.out.println("issue 40 FAILED: " + what + ": " + t);
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
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

    static Configuration conf(String config) {
        Configuration conf = new Configuration(false);
        conf.set("fs.cv.config", config);
        conf.set("fs.AbstractFileSystem.cv.impl", "io.cv.hadoop.CvAbstractFileSystem");
        return conf;
    }

    static void run(String config) throws Exception {
        Issue40 t = new Issue40();
        try (FileSystem fs = FileSystem.newInstance(URI.create("cv://cluster/"), conf(config))) {
            Path file = new Path("/i40/file");
            try (FSDataOutputStream out = fs.create(file, true)) {
                out.write(new byte[] {7});
            }
            t.attempt("a path below a file", () -> belowAFile(fs, file));
            t.attempt("setTimes, setPermission, setOwner", () -> attributes(fs, file));
            t.attempt("the default block size", () -> blockSize(fs, file, config));
            t.attempt("getStatus", () -> status(fs));
            t.attempt("append", () -> append(fs, file));
            t.attempt("open of a file being written", () -> beingWritten(fs));
        }
        t.attempt("hadoop fs -df and -appendToFile", () -> shell(config));
        t.attempt("FileContexts share and release native clients", () -> fileContexts(config));
        if (!t.failed.isEmpty()) {
            throw new AssertionError("issue 40: " + t.failed.size() + " checks failed: " + t.failed);
        }
    }

    /** Hadoop's contract and file://: what is below a file does not exist, and cannot be made. */
    @SuppressWarnings("deprecation")
    static void belowAFile(FileSystem fs, Path file) throws Exception {
        Path below = new Path(file, "child");
        check(!fs.exists(below), "exists below a file");
        check(!fs.isFile(below) && !fs.isDirectory(below), "isFile/isDirectory below a file");
        fails(FileNotFoundException.class, () -> fs.getFileStatus(below), "getFileStatus below a file");
        fails(FileNotFoundException.class, () -> fs.listStatus(below), "listStatus below a file");
        fails(FileNotFoundException.class, () -> fs.open(below).close(), "open below a file");
        check(!fs.delete(below, true), "delete below a file");
        check(!fs.rename(below, new Path("/i40/moved")), "rename from below a file");
        check(!fs.rename(file, new Path(below, "x")), "rename to below a file");
        fails(ParentNotDirectoryException.class, () -> fs.mkdirs(below), "mkdirs below a file");
        fails(ParentNotDirectoryException.class, () -> fs.mkdirs(new Path(below, "deeper")), "mkdirs deeper");
        fails(ParentNotDirectoryException.class, () -> fs.create(below, true).close(), "create below a file");
        fails(ParentNotDirectoryException.class, () -> fs.create(new Path(below, "deeper"), false).close(),
                "create deeper below a file");
        check(fs.getFileStatus(file).getLen() == 1, "the file is untouched");
    }

    /** As S3A: the calls succeed on an existing path and change nothing; a missing path fails. */
    static void attributes(FileSystem fs, Path file) throws Exception {
        long mtime = fs.getFileStatus(file).getModificationTime();
        fs.setTimes(file, 1000, 1000);
        fs.setPermission(file, new FsPermission((short) 0600));
        fs.setOwner(file, "someone", "somegroup");
        check(fs.getFileStatus(file).getModificationTime() == mtime, "setTimes changed the time");
        Path missing = new Path("/i40/missing");
        fails(FileNotFoundException.class, () -> fs.setTimes(missing, 1, 1), "setTimes of a missing path");
        fails(FileNotFoundException.class, () -> fs.setPermission(missing, new FsPermission((short) 0600)),
                "setPermission of a missing path");
        fails(FileNotFoundException.class, () -> fs.setOwner(missing, "a", "b"), "setOwner of a missing path");
    }

    /**
     * A file whose writer has not closed it exists (as in HDFS) but cannot be opened until it is
     * closed: a PathIOException naming it, not retryable, not a FileNotFoundException.
     */
    static void beingWritten(FileSystem fs) throws Exception {
        Path busy = new Path("/i40/busy");
        try (FSDataOutputStream out = fs.create(busy, true)) {
            out.write(new byte[] {1, 2, 3});
            check(fs.getFileStatus(busy).isFile(), "a file being written is visible");
            try {
                fs.open(busy).close();
                throw new AssertionError("opened a file being written");
            } catch (PathIOException e) {
                check(e.getMessage().contains("/i40/busy") && e.getMessage().contains("being written"),
                        "message: " + e.getMessage());
                check(e instanceof CvError && ((CvError) e).kind() == CvErrorKind.FILE_INCOMPLETE
                        && !((CvError) e).retryable(), "kind and retry flag of " + e);
            }
        }
        try (FSDataInputStream in = fs.open(busy)) {
            check(in.read() == 1, "opens once its writer closed it");
        }
    }

    /** An IOException with a clear message, not an UnsupportedOperationException. */
    static void append(FileSystem fs, Path file) throws Exception {
        try {
            fs.append(file).close();
            throw new AssertionError("append succeeded");
        } catch (IOException e) {
            check(e.getMessage().contains("written once"), "append's message: " + e.getMessage());
        }
        check(fs.getFileStatus(file).getLen() == 1, "the file is untouched");
    }

    /** The cluster's block size (the local cluster's master: 4 MiB), not Hadoop's 32 MiB default. */
    @SuppressWarnings("deprecation")
    static void blockSize(FileSystem fs, Path file, String config) throws Exception {
        long bs = fs.getFileStatus(file).getBlockSize();
        check(bs == 4 << 20, "the file's block size " + bs);
        check(fs.getDefaultBlockSize(file) == bs && fs.getDefaultBlockSize() == bs,
                "default block size " + fs.getDefaultBlockSize(file) + " vs the file's " + bs);
        // A file system that has created nothing yet reports the same; fs.cv.block.size wins.
        try (FileSystem fresh = FileSystem.newInstance(URI.create("cv://cluster/"), conf(config))) {
            check(fresh.getDefaultBlockSize(file) == bs, "default block size before a create: "
                    + fresh.getDefaultBlockSize(file));
        }
        Configuration set = conf(config);
        set.set("fs.cv.block.size", "8m");
        try (FileSystem fixed = FileSystem.newInstance(URI.create("cv://cluster/"), set)) {
            check(fixed.getDefaultBlockSize(file) == 8 << 20, "fs.cv.block.size: " + fixed.getDefaultBlockSize(file));
        }
    }

    static void status(FileSystem fs) throws Exception {
        FsStatus st = fs.getStatus();
        check(st.getCapacity() > 0 && st.getCapacity() != Long.MAX_VALUE, "capacity " + st.getCapacity());
        check(st.getUsed() >= 0 && st.getUsed() <= st.getCapacity(), "used " + st.getUsed());
        check(st.getRemaining() >= 0 && st.getRemaining() <= st.getCapacity() - st.getUsed(),
                "remaining " + st.getRemaining());
    }

    /** Runs FsShell in this process; returns {exit code, stdout, stderr}. */
    static String[] fsShell(Configuration conf, String... argv) throws Exception {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        ByteArrayOutputStream e = new ByteArrayOutputStream();
        int rc;
        try (PrintStream po = new PrintStream(o, true, "UTF-8"); PrintStream pe = new PrintStream(e, true, "UTF-8")) {
            System.setOut(po);
            System.setErr(pe);
            rc = ToolRunner.run(conf, new FsShell(), argv);
        } finally {
            System.setOut(out);
            System.setErr(err);
        }
        return new String[] {Integer.toString(rc), o.toString("UTF-8"), e.toString("UTF-8")};
    }

    static void shell(String config) throws Exception {
        Configuration conf = new Configuration();
        conf.set("fs.cv.config", config);
        String[] df = fsShell(conf, "-df", "cv://cluster/");
        check(df[0].equals("0"), "-df failed: " + df[2]);
        check(!df[1].contains(Long.toString(Long.MAX_VALUE)), "-df prints Long.MAX_VALUE:\n" + df[1]);
        long capacity;
        try (FileSystem fs = FileSystem.newInstance(URI.create("cv://cluster/"), conf)) {
            capacity = fs.getStatus().getCapacity();
        }
        check(df[1].contains(Long.toString(capacity)), "-df does not show the capacity " + capacity + ":\n" + df[1]);
        System.out.print("hadoop fs -df:\n" + df[1]);

        File local = File.createTempFile("cv-append", ".txt");
        try {
            Files.write(local.toPath(), "more".getBytes(StandardCharsets.UTF_8));
            String[] ap = fsShell(conf, "-appendToFile", local.getPath(), "cv://cluster/i40/file");
            check(ap[0].equals("1"), "-appendToFile exit code " + ap[0]);
            check(ap[2].contains("written once") && !ap[2].contains("\tat "),
                    "-appendToFile should print a message, not a stack trace:\n" + ap[2]);
            System.out.println("hadoop fs -appendToFile: " + ap[2].trim());
        } finally {
            Files.delete(local.toPath());
        }
    }

    /** Descriptors this process holds. */
    static int fds() {
        String[] names = new File("/proc/self/fd").list();
        return names == null ? -1 : names.length;
    }

    /**
     * FileContext never closes its file systems: 40 FileContexts of one settings must not hold 40
     * native clients, and those of settings no longer reachable are closed.
     */
    static void fileContexts(String config) throws Exception {
        Path root = new Path("/i40");
        List<FileContext> kept = new ArrayList<>();
        kept.add(FileContext.getFileContext(URI.create("cv://cluster/"), conf(config)));
        check(kept.get(0).util().exists(root), "FileContext sees /i40");
        int before = fds();
        for (int i = 0; i < 40; i++) {
            FileContext fc = FileContext.getFileContext(URI.create("cv://cluster/"), conf(config));
            check(fc.util().exists(root), "FileContext " + i);
            kept.add(fc);
        }
        int grown = fds() - before;
        check(grown < 10, "40 FileContexts of one settings opened " + grown + " descriptors");

        // Settings of their own each (a deadline apiece), then dropped: closed once collected.
        for (int i = 0; i < 20; i++) {
            Configuration c = conf(config);
            c.set("fs.cv.deadline", (10 + i) + "s");
            check(FileContext.getFileContext(URI.create("cv://cluster/"), c).util().exists(root), "settings " + i);
        }
        kept.clear();
        long start = System.nanoTime();
        long until = start + 30_000_000_000L;
        // A little slack for descriptors the JVM opens on its own meanwhile; one client is more.
        int slack = 3;
        int now = fds();
        while (now > before + slack && System.nanoTime() < until) {
            System.gc();
            Thread.sleep(200);
            now = fds();
        }
        check(now <= before + slack, "unreachable FileContexts still hold " + (now - before) + " descriptors");
        System.out.println("FileContexts: +" + grown + " descriptors for 41 of one settings; released "
                + (System.nanoTime() - start) / 1_000_000 + " ms after the last was dropped");
    }
}
