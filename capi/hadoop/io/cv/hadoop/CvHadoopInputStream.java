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

/**
 * A cv file as Hadoop reads it: seekable, positioned reads that leave the position alone, reads
 * into (direct) ByteBuffers. Every call goes straight to the JNI stream, whose file's tail came
 * with the open: footer reads cost no round trip.
 */
final class CvHadoopInputStream extends FSInputStream
        implements ByteBufferReadable, ByteBufferPositionedReadable, StreamCapabilities {
    private final CvInputStream in;
    private final FileSystem.Statistics stats;
    private boolean closed;

    CvHadoopInputStream(CvInputStream in, FileSystem.Statistics stats) {
        this.in = in;
        this.stats = stats;
    }

    private void open() throws IOException {
        if (closed) {
            throw new IOException(FSExceptionMessages.STREAM_IS_CLOSED + ": " + in.getPath());
        }
    }

    private int counted(int n) {
        if (n > 0 && stats != null) {
            stats.incrementBytesRead(n);
        }
        return n;
    }

    @Override
    public synchronized void seek(long pos) throws IOException {
        open();
        if (pos < 0) {
            throw new EOFException(FSExceptionMessages.NEGATIVE_SEEK + ": " + pos);
        }
        if (pos > in.length()) {
            throw new EOFException(FSExceptionMessages.CANNOT_SEEK_PAST_EOF + ": " + pos);
        }
        in.seek(pos);
    }

    @Override
    public synchronized long getPos() {
        return in.getPos();
    }

    /** One copy of each block is all a reader is offered here; no other source to seek to. */
    @Override
    public boolean seekToNewSource(long targetPos) {
        return false;
    }

    @Override
    public synchronized int read() throws IOException {
        open();
        int b = in.read();
        if (b >= 0) {
            counted(1);
        }
        return b;
    }

    @Override
    public synchronized int read(byte[] b, int off, int len) throws IOException {
        open();
        return counted(in.read(b, off, len));
    }

    @Override
    public int read(long position, byte[] b, int off, int len) throws IOException {
        open();
        if (position >= in.length()) {
            return -1;
        }
        return counted(in.read(position, b, off, len));
    }

    @Override
    public void readFully(long position, byte[] b, int off, int len) throws IOException {
        open();
        in.readFully(position, b, off, len);
        counted(len);
    }

    @Override
    public void readFully(long position, byte[] b) throws IOException {
        readFully(position, b, 0, b.length);
    }

    @Override
    public synchronized int read(ByteBuffer buf) throws IOException {
        open();
        return counted(in.read(buf));
    }

    @Override
    public int read(long position, ByteBuffer buf) throws IOException {
        open();
        if (position >= in.length()) {
            return -1;
        }
        return counted(in.read(position, buf));
    }

    @Override
    public void readFully(long position, ByteBuffer buf) throws IOException {
        open();
        int n = buf.remaining();
        in.readFully(position, buf);
        counted(n);
    }

    /**
     * Every range in one native call, coalesced and fetched in parallel (`cv_preadv`); a range
     * reaching past the end of the file fails its own future with EOFException. Buffers the
     * allocator gives that are not direct are filled through a direct one.
     */
    @Override
    public void readVectored(List<? extends FileRange> ranges, IntFunction<ByteBuffer> allocate) throws IOException {
        open();
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
        return in.available();
    }

    @Override
    public boolean hasCapability(String capability) {
        switch (capability.toLowerCase(java.util.Locale.ROOT)) {
            case StreamCapabilities.READBYTEBUFFER:
            case StreamCapabilities.PREADBYTEBUFFER:
                return true;
            default:
                return false;
        }
    }

    @Override
    public synchronized void close() throws IOException {
        if (!closed) {
            closed = true;
            in.close();
        }
    }
}
