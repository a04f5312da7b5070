package io.cv;

/**
 * A path below a file ({@code file/child}): NOT_A_DIRECTORY. A FileNotFoundException, as the JDK
 * reports ENOTDIR, so callers that treat a missing path as such (exists, delete) need no case of
 * their own; kind() still tells the two apart.
 */
public class CvNotADirectoryException extends CvFileNotFoundException {
    private static final long serialVersionUID = 1L;

    /** Called by the native library with a CV_ERR_* code. */
    public CvNotADirectoryException(String message, int code, boolean retryable) {
        super(message, code, retryable);
    }
}
