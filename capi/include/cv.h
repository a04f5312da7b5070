/*
 * cv.h — C ABI of cv, the cache volume (library: libcv_capi.so / libcv_capi.a).
 *
 * Conventions
 *  - Every function except the cv_version/cv_status_name/cv_last_error_* group
 *    returns a status: CV_OK (0) or a CV_ERR_* code. On failure the message is
 *    kept per thread: cv_last_error_message() (valid until the next failing cv
 *    call on the same thread), cv_last_error_code(), cv_last_error_retryable().
 *  - Calls block; an internal runtime serves them. All functions are
 *    thread-safe, and handles may be shared between threads.
 *  - Handles are 64-bit ids, never pointers; 0 is never a valid handle. A
 *    closed, doubled, forged or wrongly typed handle gives CV_ERR_BAD_HANDLE.
 *    Each handle must be closed once; closing it again gives CV_ERR_BAD_HANDLE.
 *  - Pointers are checked: a NULL (unless marked "may be NULL") or misaligned
 *    pointer, or a length above PTRDIFF_MAX, gives CV_ERR_INVALID_ARGUMENT.
 *    A non-NULL pointer must be valid for its length during the call, and
 *    output buffers must not be used by another thread meanwhile.
 *  - Strings are NUL-terminated UTF-8; paths are absolute cv paths ("/a/b").
 *  - No error unwinds out of the library: an internal fault is CV_ERR_INTERNAL.
 *
 * Config: the cv TOML file (as written by `cvctl up`): [tls] ca/cert/key
 * (required), [client] and [transport] (optional). Other sections are ignored.
 * Relative paths are taken from the process's working directory.
 */
#ifndef CV_H
#define CV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: the kinds of the client SDK (cv_client::ErrorKind) with their numbers,
 * and the binding's own 16-18; capi/tests/header.rs checks this list against that table. */
#define CV_OK 0
#define CV_ERR_NOT_FOUND 1          /* no such file or directory */
#define CV_ERR_ALREADY_EXISTS 2     /* the target exists */
#define CV_ERR_NOT_A_DIRECTORY 3    /* a path component is a file */
#define CV_ERR_IS_A_DIRECTORY 4     /* a directory where a file is needed */
#define CV_ERR_NOT_EMPTY 5          /* directory not empty */
#define CV_ERR_INVALID_PATH 6       /* relative, too long, escapes the root */
#define CV_ERR_INVALID_ARGUMENT 7   /* NULL/misaligned pointer, bad length, non-UTF-8 */
#define CV_ERR_PERMISSION_DENIED 8  /* refused by the cluster */
#define CV_ERR_TIMEOUT 9            /* the deadline passed (retryable) */
#define CV_ERR_UNAVAILABLE 10       /* a server cannot be reached (retryable) */
#define CV_ERR_CORRUPT 11           /* stored bytes failed their checksum */
#define CV_ERR_NO_SPACE 12          /* storage is full */
#define CV_ERR_PROTOCOL 13          /* peer broke the protocol or versions differ */
#define CV_ERR_CONFIG 14            /* config file or certificates */
#define CV_ERR_OTHER 15             /* anything else */
#define CV_ERR_BAD_HANDLE 16        /* handle unknown, closed, or of another type */
#define CV_ERR_EOF 17               /* a read that must be complete passes the end */
#define CV_ERR_INTERNAL 18          /* a bug in the library (caught) */
#define CV_ERR_UNSUPPORTED 19       /* not done by cv, e.g. a rename across mounts */
#define CV_ERR_WORKER_UNREACHABLE 20 /* a worker cannot be reached, after failover (retryable) */
#define CV_ERR_DATA_LOSS 21         /* the only copy of acknowledged bytes is gone */
#define CV_ERR_STORE_UNAVAILABLE 22 /* the object store failed or is unreachable (retryable) */
#define CV_ERR_STALE 23             /* the version read was replaced or removed: open again */
#define CV_ERR_FILE_INCOMPLETE 24   /* still being written: opens once its writer completes it */

/* Handles. */
typedef uint64_t cv_client_t;
typedef uint64_t cv_file_t;
typedef uint64_t cv_writer_t;

/* cv_stat_t.kind */
#define CV_KIND_FILE 1
#define CV_KIND_DIR 2

/* Metadata of a path. */
typedef struct cv_stat {
    uint64_t id;         /* inode id, stable across renames */
    uint64_t length;     /* bytes; 0 for directories */
    uint64_t mtime_ms;   /* last modification, ms since the Unix epoch */
    uint64_t version;    /* changes whenever the content does */
    uint64_t block_size; /* 0 for directories */
    uint32_t mode;       /* POSIX permission bits */
    uint32_t kind;       /* CV_KIND_FILE or CV_KIND_DIR */
    uint32_t complete;   /* 0 while a file is being written */
    uint32_t reserved;
} cv_stat_t;

/* One range of cv_preadv: set offset, buf, len; the call sets read. */
typedef struct cv_range {
    uint64_t offset;
    uint8_t *buf;
    size_t len;
    size_t read;
} cv_range_t;

/* Called by cv_list for each entry; path and status are valid during the
 * call only. Return non-zero to stop. Must not unwind (C++ exceptions). */
typedef int32_t (*cv_list_fn_t)(void *ctx, const char *path, const cv_stat_t *status);

/* Library version, e.g. "0.1.0" (static storage). */
const char *cv_version(void);
/* "CV_OK", "CV_ERR_NOT_FOUND", ...; "CV_ERR_UNKNOWN" otherwise (static storage). */
const char *cv_status_name(int32_t status);
/* Status of the last failed call on this thread (0 if none yet). */
int32_t cv_last_error_code(void);
/* 1 if the last failed call on this thread may succeed when repeated. */
int32_t cv_last_error_retryable(void);
/* Message of the last failed call on this thread ("" if none). */
const char *cv_last_error_message(void);

/* Clients. */
int32_t cv_client_open_file(const char *config_path, cv_client_t *client);
int32_t cv_client_open_toml(const char *config_toml, cv_client_t *client);
/* The file at config_path (or nothing, when NULL) with the TOML text overrides
 * laid over it key by key inside each section, e.g. "[client]\ndeadline = \"5s\"". */
int32_t cv_client_open_layers(const char *config_path, const char *overrides_toml, cv_client_t *client);
/* Closes the connections and waits (at most a second) until the servers have
 * been told, so a process may exit right after. Files and writers opened
 * through the client must still be closed; every other call on them fails at
 * once with CV_ERR_BAD_HANDLE from now on (tail reads too). */
int32_t cv_client_close(cv_client_t client);

/* Namespace. */
int32_t cv_stat(cv_client_t client, const char *path, cv_stat_t *stat);
int32_t cv_list(cv_client_t client, const char *path, cv_list_fn_t callback, void *ctx);
int32_t cv_mkdir(cv_client_t client, const char *path, int32_t parents);
int32_t cv_rename(cv_client_t client, const char *src, const char *dst);
int32_t cv_delete(cv_client_t client, const char *path, int32_t recursive);

/* Reading. cv_open is one round trip and brings the file's tail (the footer
 * of Parquet/ORC files, else up to 64 KiB): reads at or after the tail
 * offset cost no further round trip. */
int32_t cv_open(cv_client_t client, const char *path, cv_file_t *file);
int32_t cv_file_length(cv_file_t file, uint64_t *length);
int32_t cv_file_version(cv_file_t file, uint64_t *version);
/* offset = where the in-memory tail starts; length = its size (0 if none). */
int32_t cv_file_tail(cv_file_t file, uint64_t *offset, uint64_t *length);
int32_t cv_file_stat(cv_file_t file, cv_stat_t *stat);
/* Up to len bytes at offset; *read = 0 at or past the end (as pread(2)).
 * buf may be NULL when len is 0. */
int32_t cv_pread(cv_file_t file, uint64_t offset, uint8_t *buf, size_t len, size_t *read);
/* Exactly len bytes at offset, or CV_ERR_EOF (nothing read) if the range
 * passes the end. */
int32_t cv_pread_fully(cv_file_t file, uint64_t offset, uint8_t *buf, size_t len);
/* count ranges in one call, coalesced and fetched in parallel; each
 * range's read is short at the end and 0 past it. Buffers must not overlap
 * each other or the array. At most 65536 ranges. */
int32_t cv_preadv(cv_file_t file, cv_range_t *ranges, size_t count);
int32_t cv_file_close(cv_file_t file);

/* Writing. Bytes become visible to readers at cv_writer_close. */
int32_t cv_create(cv_client_t client, const char *path, int32_t overwrite, cv_writer_t *writer);
/* data may be NULL when len is 0. */
int32_t cv_write(cv_writer_t writer, const uint8_t *data, size_t len);
/* Completes the file; frees the handle even when it fails. stat may be NULL. */
int32_t cv_writer_close(cv_writer_t writer, cv_stat_t *stat);
/* Gives the file up: it is removed (not listed, not openable) and the handle
 * freed, also when the removal fails (then its error is returned and the
 * master's write lease removes the file). */
int32_t cv_writer_abort(cv_writer_t writer);

#ifdef __cplusplus
}
#endif

#endif /* CV_H */
