package io.cv;

/** Any cv failure without a more specific type (the base of the cv-specific exceptions). */
public class CvException extends java.io.IOException implements CvError {
    private static final long serialVersionUID = 1L;
    private final CvErrorKind kind;
    private final boolean retryable;

    /** Called by the native library with a CV_ERR_* code. */
    public CvException(String message, int code, boolean retryable) {
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
