package io.cv;

/** A read that must be complete passes the end of the file (as Hadoop's readFully). */
public class CvEOFException extends java.io.EOFException implements CvError {
    private static final long serialVersionUID = 1L;
    private final CvErrorKind kind;
    private final boolean retryable;

    /** Called by the native library with a CV_ERR_* code. */
    public CvEOFException(String message, int code, boolean retryable) {
        super(message);
        this.kind = CvErrorKind.fromCode(code);
        this.retryable = retryable;
    }

    @Override
    public CvErrorKind kind() {
        return kind;
    }

    @Override
    public boolean retryable() {
        return retryable;
    }
}
