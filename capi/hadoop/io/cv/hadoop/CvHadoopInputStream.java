package io.cv.hadoop;

import io.cv.CvInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntFunction;
import org.apache.hadoop.fs.FileRange;
import org.apache.hadoop.fs.ByteBufferPositionedReadable;
import org.apache.hadoop.fs.ByteBufferReadable;
import org.apache.hadoop.fs.FSExceptionMessages;
import org.apache.hadoop.fs.FSInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.StreamCapabilities;
import org.apache.hadoop.fs.statistics.IOStatistics;
import org.apache.hadoop.fs.statistics.IOStatisticsSource;
import org.apache.hadoop.fs.statistics.StreamStatisticNames;
import org.apache.hadoop.fs.statistics.impl.IOStatisticsBinding;
import org.apache.hadoop.fs.statistics.impl.IOStatisticsStore;

/**
 * A cv file as Hadoop reads it: seekable, positioned reads that leave the position alone, reads
 * into (direct) ByteBuffers, vectored reads. The file's tail came with the open, so footer reads
 * cost no round trip. Small sequential reads are served from a read-ahead buffer, filled by one
 * positioned read of the policy's range (openFile's read policy: 1 MiB sequential, 64 KiB
 * random by default); reads at least that large, positioned and vectored reads go straight to
 * the native stream. Counters are kept as IOStatistics and added to the file system's on close.
 */
final class CvHadoopInputStream extends FSInputStream
        implements ByteBufferReadable, ByteBufferPositionedReadable, StreamCapabilities, IOStatisticsSource {
    /** Fills of the read-ahead buffer (one native read each). */
    static final String READAHEAD_FILLS = "stream_read_readahead_fills";

    private final CvInputStream in;
    private final FileSystem.Statistics stats;
    private final IOStatisticsStore io;
    private final IOStatisticsStore fsIo;
    private final int readahead;
    private byte[] buf = new byte[0];
    /** For read(): no allocation per byte. */
    private final byte[] one = new byte[1];
    private long bufStart;
    private int bufLen;
    private long pos;
    private boolean closed;

    /**
     * @param readahead bytes a small sequential read fetches (0: none)
     * @param fsIo the file system's statistics, to which this stream's are added on close
     */
    CvHadoopInputStream(CvInputStream in, FileSystem.Statistics stats, long readahead, IOStatisticsStore fsIo) {
        this.in = in;
        this.stats = stats;
        this.readahead = (int) Math.min(readahead, Integer.MAX_VALUE);
        this.fsIo = fsIo;
        this.io = IOStatisticsBinding.iostatisticsStore()
                .withCounters(StreamStatisticNames.STREAM_READ_BYTES, StreamStatisticNames.STREAM_READ_OPERATIONS,
                        StreamStatisticNames.STREAM_READ_FULLY_OPERATIONS,
                        StreamStatisticNames.STREAM_READ_SEEK_OPERATIONS,
                        StreamStatisticNames.STREAM_READ_VECTORED_OPERATIONS,
                        StreamStatisticNames.STREAM_READ_VECTORED_INCOMING_RANGES,
                        StreamStatisticNames.STREAM_READ_CLOSE_OPERATIONS, StreamStatisticNames.STREAM_READ_EXCEPTIONS,
                        READAHEAD_FILLS)
                .build();
    }

    private void open() throws IOException {
        if (closed) {
            throw new IOException(FSExceptionMessages.STREAM_IS_CLOSED + ": " + in.getPath());
        }
    }

    private int counted(int n) {
        if (n > 0) {
            io.incrementCounter(StreamStatisticNames.STREAM_READ_BYTES, n);
            if (stats != null) {
                stats.incrementBytesRead(n);
            }
        }
        return n;
    }

    /** Runs a native read, counting it and its failure. */
    private <T> T op(String counter, Call<T> call) throws IOException {
        open();
        io.incrementCounter(counter);
        try {
            return call.run();
        } catch (IOException | RuntimeException e) {
            io.incrementCounter(StreamStatisticNames.STREAM_READ_EXCEPTIONS);
            throw e;
        }
    }

    private interface Call<T> {
        T run() throws IOException;
    }

    @Override
    public synchronized void seek(long target) throws IOException {
        open();
        if (target < 0) {
            throw new EOFException(FSExceptionMessages.NEGATIVE_SEEK + ": " + target);
        }
        if (target > in.length()) {
            throw new EOFException(FSExceptionMessages.CANNOT_SEEK_PAST_EOF + ": " + target);
        }
        io.incrementCounter(StreamStatisticNames.STREAM_READ_SEEK_OPERATIONS);
        pos = target; // the buffer stays: a seek inside it costs nothing
    }

    @Override
    public synchronized long getPos() {
        return pos;
    }

    /** One copy of each block is all a reader is offered here; no other source to seek to. */
    @Override
    public boolean seekToNewSource(long targetPos) {
        return false;
    }

    /** Bytes of the buffer at the position (0 if it does not hold it). */
    private int buffered() {
        return pos >= bufStart && pos < bufStart + bufLen ? (int) (bufStart + bufLen - pos) : 0;
    }

    /** Fills the buffer from the position; false at the end of the file. */
    private boolean fill() throws IOException {
        long left = in.length() - pos;
        if (left <= 0) {
            return false;
        }
        int want = (int) Math.min(readahead, left);
        if (buf.length < want) {
            buf = new byte[want];
        }
        bufLen = 0;
        bufStart = pos;
        io.incrementCounter(READAHEAD_FILLS);
        in.readFully(pos, buf, 0, want);
        bufLen = want;
        return true;
    }

    @Override
    public synchronized int read() throws IOException {
        return read(one, 0, 1) <= 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public synchronized int read(byte[] b, int off, int len) throws IOException {
        return op(StreamStatisticNames.STREAM_READ_OPERATIONS, () -> {
            if (len == 0) {
                return 0;
            }
            if (buffered() == 0 && (len >= readahead || !fill())) {
                if (pos >= in.length()) {
                    return -1;
                }
                int n = in.read(pos, b, off, len);
                pos += Math.max(n, 0);
                return counted(n);
            }
            int n = Math.min(len, buffered());
            System.arraycopy(buf, (int) (pos - bufStart), b, off, n);
            pos += n;
            return counted(n);
        });
    }

    @Override
    public int read(long position, byte[] b, int off, int len) throws IOException {
        return op(StreamStatisticNames.STREAM_READ_OPERATIONS, () -> {
            if (position >= in.length()) {
                return -1;
            }
            return counted(in.read(position, b, off, len));
        });
    }

    @Override
    public void readFully(long position, byte[] b, int off, int len) throws IOException {
        op(StreamStatisticNames.STREAM_READ_FULLY_OPERATIONS, () -> {
            in.readFully(position, b, off, len);
            return counted(len);
        });
    }

    @Override
    public void readFully(long position, byte[] b) throws IOException {
        readFully(position, b, 0, b.length);
    }

    @Override
    public synchronized int read(ByteBuffer dst) throws IOException {
        return op(StreamStatisticNames.STREAM_READ_OPERATIONS, () -> {
            int len = dst.remaining();
            if (len == 0) {
                return 0;
            }
            if (buffered() == 0 && (len >= readahead || !fill())) {
                if (pos >= in.length()) {
                    return -1;
                }
                int n = in.read(pos, dst);
                pos += Math.max(n, 0);
                return counted(n);
            }
            int n = Math.min(len, buffered());
            dst.put(buf, (int) (pos - bufStart), n);
            pos += n;
            return counted(n);
        });
    }

    @Override
    public int read(long position, ByteBuffer dst) throws IOException {
        return op(StreamStatisticNames.STREAM_READ_OPERATIONS, () -> {
            if (position >= in.length()) {
                return -1;
            }
            return counted(in.read(position, dst));
        });
    }

    @Override
    public void readFully(long position, ByteBuffer dst) throws IOException {
        op(StreamStatisticNames.STREAM_READ_FULLY_OPERATIONS, () -> {
            int n = dst.remaining();
            in.readFully(position, dst);
            return counted(n);
        });
    }

    /**
     * Every range in one native call, coalesced and fetched in parallel (`cv_preadv`); a range
     * reaching past the end of the file fails its own future with EOFException. Buffers the
     * allocator gives that are not direct are filled through a direct one.
     */
    @Override
    public void readVectored(List<? extends FileRange> ranges, IntFunction<ByteBuffer> allocate) throws IOException {
        op(StreamStatisticNames.STREAM_READ_VECTORED_OPERATIONS, () -> {
            readRanges(ranges, allocate);
            return null;
        });
    }

    private void readRanges(List<? extends FileRange> ranges, IntFunction<ByteBuffer> allocate) throws IOException {
        io.incrementCounter(StreamStatisticNames.STREAM_READ_VECTORED_INCOMING_RANGES, ranges.size());
        List<FileRange> inside = new ArrayList<>();
        List<ByteBuffer> given = new ArrayList<>();
        for (FileRange r : ranges) {
            if (r.getOffset() < 0 || r.getLength() < 0) {
                throw new IllegalArgumentException("cv: bad range " + r);
            }
            if (r.getOffset() + r.getLength() > in.length()) {
                CompletableFuture<ByteBuffer> f = new CompletableFuture<>();
                f.completeExceptionally(new EOFException("cv: range " + r.getOffset() + "+" + r.getLength()
                        + " reaches past the end of " + in.getPath() + " (" + in.length() + " bytes)"));
                r.setData(f);
                continue;
            }
            inside.add(r);
            given.add(allocate.apply(r.getLength()));
        }
        long[] positions = new long[inside.size()];
        ByteBuffer[] direct = new ByteBuffer[inside.size()];
        for (int i = 0; i < direct.length; i++) {
            positions[i] = inside.get(i).getOffset();
            ByteBuffer b = given.get(i);
            direct[i] = b.isDirect() ? b : ByteBuffer.allocateDirect(inside.get(i).getLength());
        }
        in.readVectored(positions, direct);
        for (int i = 0; i < direct.length; i++) {
            ByteBuffer out = given.get(i);
            direct[i].flip();
            if (direct[i] != out) {
                out.put(direct[i]);
                out.flip();
            }
            counted(out.remaining());
            inside.get(i).setData(CompletableFuture.completedFuture(out));
        }
    }

    @Override
    public synchronized int available() throws IOException {
        open();
        return (int) Math.min(Math.max(in.length() - pos, 0), Integer.MAX_VALUE);
    }

    @Override
    public IOStatistics getIOStatistics() {
        return io;
    }

    @Override
    public boolean hasCapability(String capability) {
        switch (capability.toLowerCase(java.util.Locale.ROOT)) {
            case StreamCapabilities.READBYTEBUFFER:
            case StreamCapabilities.PREADBYTEBUFFER:
            case StreamCapabilities.VECTOREDIO:
            case StreamCapabilities.IOSTATISTICS:
                return true;
            default:
                return false;
        }
    }

    @Override
    public synchronized void close() throws IOException {
        if (!closed) {
            closed = true;
            io.incrementCounter(StreamStatisticNames.STREAM_READ_CLOSE_OPERATIONS);
            buf = new byte[0];
            try {
                in.close();
            } finally {
                if (fsIo != null) {
                    fsIo.aggregate(io);
                }
            }
        }
    }
}
