package io.cv;

/** No such file or directory (Hadoop callers catch FileNotFoundException). */
public class CvFileNotFoundException extends java.io.FileNotFoundException implements CvError {
    private static final long serialVersionUID = 1L;
    private final CvErrorKind kind;
    private final boolean retryable;

    /** Called by the native library with a CV_ERR_* code. */
    public CvFileNotFoundException(String message, int code, boolean retryable) {
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
