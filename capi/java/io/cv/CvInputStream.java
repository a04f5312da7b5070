package io.cv;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ReadOnlyBufferException;
import java.util.Objects;

/**
 * An open cv file. Positioned reads (Hadoop's PositionedReadable and
 * ByteBufferPositionedReadable) are thread-safe and leave the stream
 * position alone; into a direct ByteBuffer they land in the buffer's memory
 * with no copy through the Java heap. The sequential methods (Seekable,
 * ByteBufferReadable) use the stream position and, like Hadoop's, are not
 * meant for concurrent use.
 */
public final class CvInputStream extends InputStream {
    private final long file;
    /** Keeps the client this file came from reachable while the stream is: unreachable clients are closed. */
    private final CvFileSystem owner;
    private final String path;
    private final long length;
    private final long version;
    private final long tailOffset;
    private long pos;
    private volatile boolean closed;

    CvInputStream(CvFileSystem owner, long file, String path) throws IOException {
        this.owner = owner;
        this.file = file;
        this.path = path;
        long[] info;
        try {
            info = Native.fileInfo(file);
        } catch (CvException | RuntimeException e) {
            try {
                Native.fileClose(file); // do not leak the handle
            } catch (CvException closing) {
                e.addSuppressed(closing);
            }
            throw e;
        }
        this.length = info[0];
        this.version = info[1];
        this.tailOffset = info[2];
    }

    public String getPath() {
        return path;
    }

    /** File length in bytes. */
    public long length() {
        return length;
    }

    /** Changes whenever the content does: part of any cache key. */
    public long getVersion() {
        return version;
    }

    /** Reads at or after this offset are served from memory (the footer came with the open). */
    /** The file's blocks as the open brought them: byte ranges and the hosts holding each. */
    public CvBlock[] getBlocks() throws IOException {
        String[] raw = Native.fileBlocks(file);
        CvBlock[] out = new CvBlock[raw.length];
        for (int i = 0; i < raw.length; i++) {
            out[i] = CvBlock.parse(raw[i]);
        }
        return out;
    }

    public long getTailOffset() {
        return tailOffset;
    }

    /** Reads up to buf.remaining() bytes at position; -1 at or past the end. Advances buf. */
    public int read(long position, ByteBuffer buf) throws IOException {
        return readInto(position, buf, false);
    }

    /** Reads exactly buf.remaining() bytes at position, or throws EOFException (nothing read). */
    public void readFully(long position, ByteBuffer buf) throws IOException {
        readInto(position, buf, true);
    }

    private int readInto(long position, ByteBuffer buf, boolean fully) throws IOException {
        if (buf.isReadOnly()) {
            throw new ReadOnlyBufferException();
        }
        int want = buf.remaining();
        if (want == 0) {
            return 0;
        }
        int n;
        try {
            n = buf.isDirect()
                    ? Native.pread(file, position, buf, buf.position(), want, fully)
                    : Native.preadArray(file, position, buf.array(), buf.arrayOffset() + buf.position(), want, fully);
        } finally {
            Reference.reachabilityFence(this); // the client must not be cleaned mid-call
        }
        if (n == 0) {
            return -1;
        }
        buf.position(buf.position() + n);
        return n;
    }

    /** Reads up to len bytes at position into b[off..]; -1 at or past the end. */
    public int read(long position, byte[] b, int off, int len) throws IOException {
        Objects.checkFromIndexSize(off, len, b.length);
        if (len == 0) {
            return 0;
        }
        try {
            int n = Native.preadArray(file, position, b, off, len, false);
            return n == 0 ? -1 : n;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Reads exactly len bytes at position, or throws EOFException. */
    public void readFully(long position, byte[] b, int off, int len) throws IOException {
        Objects.checkFromIndexSize(off, len, b.length);
        if (len > 0) {
            try {
                Native.preadArray(file, position, b, off, len, true);
            } finally {
                Reference.reachabilityFence(this);
            }
        }
    }

    public void readFully(long position, byte[] b) throws IOException {
        readFully(position, b, 0, b.length);
    }

    /**
     * Reads several ranges in one call, coalesced and fetched in parallel:
     * buffers[i] (direct) is filled from positions[i] up to its remaining
     * bytes, or fewer at the end of the file; each buffer's position advances.
     */
    public void readVectored(long[] positions, ByteBuffer[] buffers) throws IOException {
        if (positions.length != buffers.length) {
            throw new IllegalArgumentException("positions and buffers differ in length");
        }
        int[] offsets = new int[buffers.length];
        int[] lengths = new int[buffers.length];
        for (int i = 0; i < buffers.length; i++) {
            ByteBuffer b = buffers[i];
            if (!b.isDirect() || b.isReadOnly()) {
                throw new IllegalArgumentException("readVectored needs writable direct buffers (index " + i + ")");
            }
            offsets[i] = b.position();
            lengths[i] = b.remaining();
        }
        int[] read;
        try {
            read = Native.preadv(file, positions, buffers, offsets, lengths);
        } finally {
            Reference.reachabilityFence(this);
        }
        for (int i = 0; i < buffers.length; i++) {
            buffers[i].position(offsets[i] + read[i]);
        }
    }

    /** Moves the stream position; past the end is an EOFException. */
    public void seek(long newPos) throws IOException {
        if (newPos < 0 || newPos > length) {
            throw new EOFException("seek to " + newPos + " outside a " + length + "-byte file " + path);
        }
        pos = newPos;
    }

    public long getPos() {
        return pos;
    }

    @Override
    public int read() throws IOException {
        byte[] one = new byte[1];
        return read(one, 0, 1) == 1 ? one[0] & 0xff : -1;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
        int n = read(pos, b, off, len);
        if (n > 0) {
            pos += n;
        }
        return n;
    }

    /** Reads at the stream position into buf (Hadoop's ByteBufferReadable). */
    public int read(ByteBuffer buf) throws IOException {
        int n = read(pos, buf);
        if (n > 0) {
            pos += n;
        }
        return n;
    }

    @Override
    public long skip(long n) {
        long to = Math.min(length, pos + Math.max(0, n));
        long skipped = to - pos;
        pos = to;
        return skipped;
    }

    @Override
    public int available() {
        return (int) Math.min(Integer.MAX_VALUE, Math.max(0, length - pos));
    }

    /** Frees the native handle. Idempotent; reads afterwards fail with BAD_HANDLE. */
    @Override
    public void close() throws IOException {
        if (!closed) {
            closed = true;
            Native.fileClose(file);
        }
    }
}
