package io.cv;

/**
 * A path below a file ({@code file/child}): NOT_A_DIRECTORY. A FileNotFoundException, as the JDK
 * reports ENOTDIR, so callers that treat a missing path as such (exists, delete) need no case of
 * their own; kind() still tells the two apart.
 */
public class CvNotADirectoryException extends java.io.FileNotFoundException implements CvError {
    private static final long serialVersionUID = 1L;
    private final CvErrorKind kind;
    private final boolean retryable;

    /** Called by the native library with a CV_ERR_* code. */
    public CvNotADirectoryException(String message, int code, boolean retryable) {
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
