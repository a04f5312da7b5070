import io.cv.CvEOFException;
import io.cv.CvError;
import io.cv.CvErrorKind;
import io.cv.CvException;
import io.cv.CvFileAlreadyExistsException;
import io.cv.CvFileStatus;
import io.cv.CvFileSystem;
import io.cv.CvInputStream;
import io.cv.CvNotADirectoryException;
import io.cv.CvOutputStream;
import io.cv.CvPathIsNotEmptyDirectoryException;
import io.cv.CvUsage;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Exercises the JNI binding against a real cluster started by
 * capi/tests/jni.rs. Usage: CvJavaTest <client config> <local parquet file>.
 */
public final class CvJavaTest {
    static final int MIB = 1 << 20;
    static final int BLOCK = 4 * MIB;
    static final int DATA_LEN = 9 * MIB + 12345;
    static int checks;

    /** The same pattern as pattern() in capi/tests/common/mod.rs. */
    static byte pat(long i) {
        return (byte) ((i * 2654435761L) >>> 11);
    }

    static void check(boolean cond, String what) {
        if (!cond) {
            throw new AssertionError("FAIL: " + what);
        }
        checks++;
    }

    static boolean matches(ByteBuffer b, int from, long fileOffset, int len) {
        for (int i = 0; i < len; i++) {
            if (b.get(from + i) != pat(fileOffset + i)) {
                return false;
            }
        }
        return true;
    }

    interface Call {
        void run() throws Exception;
    }

    /** Runs call, which must throw type with the given kind. */
    static <T extends Throwable> T expect(Class<T> type, CvErrorKind kind, Call call, String what) {
        try {
            call.run();
        } catch (Throwable t) {
            check(type.isInstance(t), what + ": threw " + t);
            if (kind != null) {
                check(t instanceof CvError && ((CvError) t).kind() == kind, what + ": kind of " + t);
            }
            return type.cast(t);
        }
        throw new AssertionError("FAIL: " + what + ": no exception");
    }

    public static void main(String[] args) throws Exception {
        check(args.length == 2, "usage: CvJavaTest <config> <parquet>");
        check(!CvFileSystem.nativeVersion().isEmpty(), "version");
        expect(CvException.class, CvErrorKind.CONFIG,
                () -> CvFileSystem.fromConfigFile("/nonexistent/cv.toml"), "missing config");
        expect(IllegalArgumentException.class, null, () -> CvFileSystem.pathOf(new java.net.URI("s3://b/k")), "scheme");
        check(CvFileSystem.pathOf(new java.net.URI("cv://cluster/a/b")).equals("/a/b"), "pathOf");

        CvFileSystem fs = CvFileSystem.fromConfigFile(args[0]);
        {
            check(fs.mkdirs("/j/sub"), "mkdirs");

            // Write from a direct buffer (no heap copy) and from arrays, in uneven pieces.
            ByteBuffer data = ByteBuffer.allocateDirect(DATA_LEN);
            for (int i = 0; i < DATA_LEN; i++) {
                data.put(i, pat(i));
            }
            CvOutputStream out = fs.create("/j/data");
            ByteBuffer first = data.duplicate();
            first.limit(3 * MIB + 7);
            out.write(first);
            check(first.remaining() == 0, "write advances the buffer");
            byte[] rest = new byte[DATA_LEN - (3 * MIB + 7)];
            data.duplicate().position(3 * MIB + 7).get(rest);
            out.write(rest, 0, 1000);
            out.write(rest[1000]);
            out.write(rest, 1001, rest.length - 1001);
            check(out.getPos() == DATA_LEN, "getPos");
            out.close();
            out.close(); // idempotent, as Closeable says
            CvFileStatus written = out.getFileStatus();
            check(written.getLen() == DATA_LEN && written.isFile() && written.isComplete(), "written " + written);
            expect(CvException.class, CvErrorKind.BAD_HANDLE, () -> out.write(1), "write after close");
            expect(CvFileAlreadyExistsException.class, CvErrorKind.ALREADY_EXISTS, () -> fs.create("/j/data"),
                    "create existing");

            CvInputStream in = fs.open("/j/data");
            check(in.length() == DATA_LEN && in.getVersion() == written.getVersion(), "length and version");

            // Positioned reads into a direct buffer: whole file, then block-crossing ranges.
            ByteBuffer all = ByteBuffer.allocateDirect(DATA_LEN + 100);
            int total = 0;
            while (true) {
                int n = in.read(total, all);
                if (n < 0) {
                    break;
                }
                total += n;
            }
            check(total == DATA_LEN && all.position() == DATA_LEN, "whole file " + total);
            all.flip();
            check(all.equals(data.duplicate().clear()), "whole file bytes");
            long[] offs = {0, 1, BLOCK - 7, BLOCK, 2L * BLOCK - 1, DATA_LEN - 3};
            for (long off : offs) {
                ByteBuffer b = ByteBuffer.allocateDirect(70000);
                int n = in.read(off, b);
                int want = (int) Math.min(70000, DATA_LEN - off);
                check(n == want && matches(b, 0, off, n), "read at " + off);
            }
            ByteBuffer mid = ByteBuffer.allocateDirect(300);
            mid.position(50);
            in.readFully(BLOCK - 100, mid);
            check(mid.position() == 300 && matches(mid, 50, BLOCK - 100, 250), "readFully into a buffer slice");

            // Heap arrays and heap buffers work too (through a copy).
            byte[] arr = new byte[5000];
            in.readFully(BLOCK - 2500, arr, 0, 5000);
            check(matches(ByteBuffer.wrap(arr), 0, BLOCK - 2500, 5000), "readFully array");
            ByteBuffer heap = ByteBuffer.allocate(4096);
            check(in.read(7, heap) == 4096 && matches(heap, 0, 7, 4096), "heap buffer");

            // Past the end: -1 from read, EOFException from readFully, nothing written.
            ByteBuffer small = ByteBuffer.allocateDirect(16);
            check(in.read(DATA_LEN, small) == -1 && small.position() == 0, "read at the end");
            check(in.read(DATA_LEN + 1000L, small) == -1, "read past the end");
            check(in.read(DATA_LEN, arr, 0, 10) == -1, "array read past the end");
            small.put(0, (byte) 0x5A);
            expect(CvEOFException.class, CvErrorKind.EOF, () -> in.readFully(DATA_LEN - 5, small), "readFully past end");
            check(small.get(0) == 0x5A && small.position() == 0, "failed readFully wrote nothing");
            expect(java.io.EOFException.class, CvErrorKind.EOF, () -> in.readFully(DATA_LEN - 1, arr), "array EOF");
            expect(java.io.EOFException.class, null, () -> in.seek(DATA_LEN + 1L), "seek past end");

            // Sequential reads.
            in.seek(BLOCK - 1);
            check(in.read() == (pat(BLOCK - 1) & 0xff), "read()");
            ByteBuffer seq = ByteBuffer.allocateDirect(10);
            check(in.read(seq) == 10 && in.getPos() == BLOCK + 10 && matches(seq, 0, BLOCK, 10), "sequential");

            // Vectored read into direct buffers.
            long[] vpos = {0, 5, BLOCK - 35000, DATA_LEN - 5, DATA_LEN + 7L, 2L * BLOCK};
            int[] vlen = {10, 10, 70000, 20, 4, 1};
            ByteBuffer[] vbuf = new ByteBuffer[vpos.length];
            for (int i = 0; i < vbuf.length; i++) {
                vbuf[i] = ByteBuffer.allocateDirect(vlen[i] + 3);
                vbuf[i].position(3);
            }
            in.readVectored(vpos, vbuf);
            int[] vwant = {10, 10, 70000, 5, 0, 1};
            for (int i = 0; i < vbuf.length; i++) {
                check(vbuf[i].position() == 3 + vwant[i] && matches(vbuf[i], 3, vpos[i], vwant[i]), "vectored " + i);
            }
            expect(IllegalArgumentException.class, null,
                    () -> in.readVectored(new long[] {0}, new ByteBuffer[] {ByteBuffer.allocate(4)}), "heap vectored");

            // Threads share the stream for positioned reads.
            ExecutorService pool = Executors.newFixedThreadPool(4);
            Future<?>[] fut = new Future<?>[4];
            for (int t = 0; t < 4; t++) {
                final long seed = t * 7919L + 1;
                fut[t] = pool.submit(() -> {
                    ByteBuffer b = ByteBuffer.allocateDirect(64 * 1024);
                    long s = seed;
                    for (int i = 0; i < 40; i++) {
                        s = s * 6364136223846793005L + 1442695040888963407L;
                        long off = Math.floorMod(s >>> 20, (long) DATA_LEN - 64 * 1024);
                        b.clear();
                        in.readFully(off, b);
                        if (!matches(b, 0, off, 64 * 1024)) {
                            throw new AssertionError("thread read at " + off);
                        }
                    }
                    return null;
                });
            }
            for (Future<?> f : fut) {
                f.get();
            }
            pool.shutdown();
            checks++;

            in.close();
            in.close();
            expect(CvException.class, CvErrorKind.BAD_HANDLE, () -> in.read(0, small), "read after close");

            // Missing files and directories.
            FileNotFoundException nf = expect(FileNotFoundException.class, CvErrorKind.NOT_FOUND,
                    () -> fs.open("/j/missing"), "open missing");
            check(nf.getMessage().contains("/j/missing") && !((CvError) nf).retryable(), nf.getMessage());
            expect(FileNotFoundException.class, CvErrorKind.NOT_FOUND, () -> fs.getFileStatus("/j/missing"), "stat");
            expect(CvException.class, CvErrorKind.IS_A_DIRECTORY, () -> fs.open("/j/sub"), "open a directory");
            // A file whose writer has not closed it: its own kind, not retryable (issue 40).
            try (CvOutputStream busy = fs.create("/j/busy")) {
                busy.write(1);
                CvException e = expect(CvException.class, CvErrorKind.FILE_INCOMPLETE, () -> fs.open("/j/busy"),
                        "open a file being written");
                check(e.getMessage().contains("/j/busy") && !e.retryable(), e.getMessage());
                busy.abort();
            }
            check(!fs.exists("/j/missing") && fs.exists("/j/data"), "exists");
            // Below a file: a FileNotFoundException of its own kind (issue 40), so exists and
            // delete answer false as for a missing path.
            expect(CvNotADirectoryException.class, CvErrorKind.NOT_A_DIRECTORY, () -> fs.getFileStatus("/j/data/x"),
                    "stat below a file");
            check(!fs.exists("/j/data/x") && !fs.delete("/j/data/x", true), "exists/delete below a file");
            // The block size the master gave a new file: the cluster's 4 MiB.
            try (CvOutputStream bs = fs.create("/j/bs")) {
                check(bs.getBlockSize() == 4 << 20, "writer block size " + bs.getBlockSize());
            }
            CvUsage usage = fs.getUsage();
            check(usage.getCapacity() > 0 && usage.getRemaining() <= usage.getCapacity(), "usage " + usage);
            check(fs.delete("/j/bs", false), "delete /j/bs");

            // A Parquet file: the footer comes with the open.
            byte[] local = Files.readAllBytes(Paths.get(args[1]));
            try (CvOutputStream p = fs.create("/j/t.parquet")) {
                p.write(local);
            }
            try (CvInputStream p = fs.open("/j/t.parquet")) {
                ByteBuffer trailer = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN);
                p.readFully(p.length() - 8, trailer);
                check(trailer.get(4) == 'P' && trailer.get(5) == 'A' && trailer.get(6) == 'R' && trailer.get(7) == '1',
                        "magic");
                int flen = trailer.getInt(0);
                check(p.getTailOffset() == p.length() - flen - 8, "tail holds exactly the footer");
                ByteBuffer footer = ByteBuffer.allocateDirect(flen);
                p.readFully(p.getTailOffset(), footer);
                footer.flip();
                check(footer.equals(ByteBuffer.wrap(local, local.length - 8 - flen, flen)), "footer bytes");
            }

            // Namespace.
            CvFileStatus[] ls = fs.listStatus("/j");
            String[] names = Arrays.stream(ls).map(CvFileStatus::getPath).toArray(String[]::new);
            check(Arrays.equals(names, new String[] {"/j/data", "/j/sub", "/j/t.parquet"}), Arrays.toString(names));
            check(ls[1].isDirectory() && ls[0].getLen() == DATA_LEN, "list status");
            check(fs.rename("/j/data", "/j/sub/moved"), "rename");
            check(!fs.exists("/j/data") && fs.getFileStatus("/j/sub/moved").getLen() == DATA_LEN, "renamed");
            expect(CvPathIsNotEmptyDirectoryException.class, CvErrorKind.NOT_EMPTY, () -> fs.delete("/j/sub", false),
                    "delete non-empty");
            check(fs.delete("/j/t.parquet", false), "delete");
            check(!fs.delete("/j/t.parquet", false), "delete missing is false");
            CvOutputStream aborted = fs.create("/j/aborted");
            aborted.write(new byte[10]);
            aborted.abort();
            expect(CvException.class, CvErrorKind.BAD_HANDLE, () -> aborted.write(1), "write after abort");
            fs.close();
            fs.close(); // idempotent
            expect(CvException.class, CvErrorKind.BAD_HANDLE, () -> fs.getFileStatus("/j"), "use after close");
        }
        System.out.println("CvJavaTest: all " + checks + " checks ok");
    }
}
