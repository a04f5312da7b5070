package io.cv;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * A file being written. Bytes become visible to readers at {@link #close()},
 * which completes the file. Not for concurrent use (as Hadoop's streams).
 */
public final class CvOutputStream extends OutputStream {
    private final long writer;
    /** Keeps the client this writer came from reachable while the stream is: unreachable clients are closed. */
    private final CvFileSystem owner;
    private final String path;
    private final long blockSize;
    private long written;
    private boolean closed;
    private CvFileStatus status;

    CvOutputStream(CvFileSystem owner, long writer, String path) throws IOException {
        this.owner = owner;
        this.writer = writer;
        this.path = path;
        long size;
        try {
            size = Native.writerBlockSize(writer);
        } catch (CvException | RuntimeException e) {
            try {
                Native.writerAbort(writer); // do not leak the handle
            } catch (CvException aborting) {
                e.addSuppressed(aborting);
            }
            throw e;
        }
        this.blockSize = size;
    }

    public String getPath() {
        return path;
    }

    /** The block size the cluster gave this file (its master's {@code block_size}). */
    public long getBlockSize() {
        return blockSize;
    }

    /** Bytes written so far. */
    public long getPos() {
        return written;
    }

    @Override
    public void write(int b) throws IOException {
        write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
        Objects.checkFromIndexSize(off, len, b.length);
        try {
            Native.writeArray(writer, b, off, len);
        } finally {
            Reference.reachabilityFence(this); // the client must not be cleaned mid-call
        }
        written += len;
    }

    /** Writes buf's remaining bytes; from a direct buffer without a heap copy. */
    public void write(ByteBuffer buf) throws IOException {
        int len = buf.remaining();
        try {
            if (buf.isDirect()) {
                Native.write(writer, buf, buf.position(), len);
            } else {
                Native.writeArray(writer, buf.array(), buf.arrayOffset() + buf.position(), len);
            }
        } finally {
            Reference.reachabilityFence(this);
        }
        buf.position(buf.position() + len);
        written += len;
    }

    /** Completes the file. Idempotent; writes afterwards fail with BAD_HANDLE. */
    @Override
    public void close() throws IOException {
        if (!closed) {
            closed = true;
            try {
                status = Native.writerClose(writer);
            } finally {
                Reference.reachabilityFence(this);
            }
        }
    }

    /** Gives the file up without completing it: it is removed (not listed, not openable). */
    public void abort() throws IOException {
        if (!closed) {
            closed = true;
            Native.writerAbort(writer);
        }
    }

    /** Metadata of the finished file, after a successful close; null before. */
    public CvFileStatus getFileStatus() {
        return status;
    }
}
