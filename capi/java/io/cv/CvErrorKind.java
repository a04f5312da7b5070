package io.cv;

/**
 * What went wrong; the codes are the CV_ERR_* values of cv.h (capi/tests/header.rs checks both
 * against the Rust table).
 */
public enum CvErrorKind {
    NOT_FOUND(1),
    ALREADY_EXISTS(2),
    NOT_A_DIRECTORY(3),
    IS_A_DIRECTORY(4),
    NOT_EMPTY(5),
    INVALID_PATH(6),
    INVALID_ARGUMENT(7),
    PERMISSION_DENIED(8),
    TIMEOUT(9),
    UNAVAILABLE(10),
    CORRUPT(11),
    NO_SPACE(12),
    PROTOCOL(13),
    CONFIG(14),
    OTHER(15),
    BAD_HANDLE(16),
    EOF(17),
    INTERNAL(18),
    UNSUPPORTED(19),
    WORKER_UNREACHABLE(20),
    DATA_LOSS(21),
    STORE_UNAVAILABLE(22),
    STALE(23),
    /** The file is still being written; it opens once its writer completes it (not retryable). */
    FILE_INCOMPLETE(24);

    private final int code;

    CvErrorKind(int code) {
        this.code = code;
    }

    /** The numeric code shared with the C ABI. */
    public int code() {
        return code;
    }

    /** The kind of a code; OTHER for an unknown one. */
    public static CvErrorKind fromCode(int code) {
        for (CvErrorKind k : values()) {
            if (k.code == code) {
                return k;
            }
        }
        return OTHER;
    }
}
