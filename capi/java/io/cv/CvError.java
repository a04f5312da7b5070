package io.cv;

/** Implemented by every exception the native library throws. */
public interface CvError {
    /** What went wrong. */
    CvErrorKind kind();

    /** Whether the same call may succeed if made again. */
    boolean retryable();
}
