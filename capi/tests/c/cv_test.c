/* Exercises the C ABI against a real cluster started by capi/tests/c_abi.rs.
 * Usage: cv_test <client config> <local parquet file>. Exit 0 = all passed. */
#include "cv.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                          \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, " (last error: %s)\n", cv_last_error_message());              \
            exit(1);                                                                      \
        }                                                                                 \
        checks++;                                                                         \
    } while (0)
#define EXPECT(want, call)                                                                \
    do {                                                                                  \
        int32_t s_ = (call);                                                              \
        CHECK(s_ == (want), "%s returned %s, expected %s", #call, cv_status_name(s_),     \
              cv_status_name(want));                                                      \
    } while (0)
#define OK(call) EXPECT(CV_OK, call)

#define MIB (1024u * 1024u)
#define BLOCK (4u * MIB)
/* Crosses two block boundaries and ends mid-block. */
#define DATA_LEN ((size_t)(9u * MIB + 12345u))

/* The same pattern as pattern() in capi/tests/common/mod.rs. */
static uint8_t pat(uint64_t i) { return (uint8_t)((i * 2654435761ull) >> 11); }

static int matches(const uint8_t *buf, uint64_t offset, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != pat(offset + i)) return 0;
    }
    return 1;
}

struct listing {
    int entries;
    int saw_file;
    int saw_dir;
};

static int32_t on_entry(void *ctx, const char *path, const cv_stat_t *st) {
    struct listing *l = ctx;
    l->entries++;
    if (strcmp(path, "/c/data") == 0 && st->kind == CV_KIND_FILE && st->length == DATA_LEN) l->saw_file = 1;
    if (strcmp(path, "/c/sub") == 0 && st->kind == CV_KIND_DIR) l->saw_dir = 1;
    return 0;
}

static int32_t stop_at_first(void *ctx, const char *path, const cv_stat_t *st) {
    (void)path;
    (void)st;
    (*(int *)ctx)++;
    return 1;
}

struct reader_arg {
    cv_file_t file;
    unsigned seed;
    int failures;
    int first_error_code;
};

/* Concurrent 64 KiB preads through one shared handle. */
static void *reader(void *p) {
    struct reader_arg *a = p;
    a->first_error_code = cv_last_error_code(); /* thread-local: 0 on a new thread */
    uint8_t *buf = malloc(64 * 1024);
    for (int i = 0; i < 40; i++) {
        a->seed = a->seed * 1103515245u + 12345u;
        uint64_t off = (a->seed >> 4) % (DATA_LEN - 64 * 1024);
        size_t n = 0;
        if (cv_pread(a->file, off, buf, 64 * 1024, &n) != CV_OK || n != 64 * 1024 || !matches(buf, off, n))
            a->failures++;
    }
    free(buf);
    return NULL;
}

static uint8_t *read_local(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)size);
    *len = fread(buf, 1, (size_t)size, f);
    fclose(f);
    return buf;
}

int main(int argc, char **argv) {
    CHECK(argc == 3, "usage: cv_test <config> <parquet>");
    CHECK(strlen(cv_version()) > 0, "version");
    cv_client_t c = 0;

    /* Configuration errors are typed, and NULL is never dereferenced. */
    EXPECT(CV_ERR_CONFIG, cv_client_open_file("/nonexistent/cv.toml", &c));
    CHECK(strstr(cv_last_error_message(), "/nonexistent/cv.toml") != NULL, "message names the file");
    CHECK(cv_last_error_code() == CV_ERR_CONFIG, "last error code");
    EXPECT(CV_ERR_CONFIG, cv_client_open_toml("[tls]\nca = 1\n", &c));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_client_open_file(NULL, &c));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_client_open_file(argv[1], NULL));
    /* Layers: the file with settings laid over it; a bad one is named; no file and no [tls]. */
    EXPECT(CV_ERR_CONFIG, cv_client_open_layers(argv[1], "[client]\nretries = \"many\"\n", &c));
    CHECK(strstr(cv_last_error_message(), "client.retries") != NULL, "the bad setting is named: %s",
          cv_last_error_message());
    EXPECT(CV_ERR_CONFIG, cv_client_open_layers(NULL, "[client]\nretries = 1\n", &c));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_client_open_layers(argv[1], NULL, &c));
    OK(cv_client_open_layers(argv[1], "[client]\ndeadline = \"7s\"\n", &c));
    OK(cv_client_close(c));
    OK(cv_client_open_file(argv[1], &c));
    CHECK(c != 0, "client handle");

    /* Write a multi-block file in uneven pieces. */
    OK(cv_mkdir(c, "/c/sub", 1));
    uint8_t *data = malloc(DATA_LEN);
    for (size_t i = 0; i < DATA_LEN; i++) data[i] = pat(i);
    cv_writer_t w = 0;
    OK(cv_create(c, "/c/data", 0, &w));
    for (size_t off = 0; off < DATA_LEN; off += 1000003) {
        size_t n = DATA_LEN - off < 1000003 ? DATA_LEN - off : 1000003;
        OK(cv_write(w, data + off, n));
    }
    OK(cv_write(w, NULL, 0));
    cv_stat_t st;
    OK(cv_writer_close(w, &st));
    CHECK(st.length == DATA_LEN && st.kind == CV_KIND_FILE && st.complete == 1, "writer stat");
    EXPECT(CV_ERR_BAD_HANDLE, cv_write(w, data, 1));
    EXPECT(CV_ERR_BAD_HANDLE, cv_writer_close(w, NULL));
    EXPECT(CV_ERR_ALREADY_EXISTS, cv_create(c, "/c/data", 0, &w));
    /* A failing close frees the handle too (cv.h): here a misaligned stat slot. */
    cv_writer_t w2 = 0;
    OK(cv_create(c, "/c/bad-close", 0, &w2));
    OK(cv_write(w2, data, 10));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_writer_close(w2, (cv_stat_t *)((char *)&st + 1)));
    EXPECT(CV_ERR_BAD_HANDLE, cv_writer_close(w2, NULL));
    EXPECT(CV_ERR_NOT_FOUND, cv_stat(c, "/c/bad-close", &st));

    /* Open: length, version, block-crossing preads, byte-exact. */
    cv_file_t f = 0;
    OK(cv_open(c, "/c/data", &f));
    uint64_t len = 0, version = 0;
    OK(cv_file_length(f, &len));
    OK(cv_file_version(f, &version));
    CHECK(len == DATA_LEN, "length %llu", (unsigned long long)len);
    CHECK(version == st.version, "version");
    cv_stat_t fst;
    OK(cv_file_stat(f, &fst));
    CHECK(fst.id == st.id && fst.length == DATA_LEN, "file stat");

    uint8_t *back = malloc(DATA_LEN + 100);
    size_t n = 0;
    OK(cv_pread(f, 0, back, DATA_LEN + 100, &n));
    CHECK(n == DATA_LEN && memcmp(back, data, DATA_LEN) == 0, "whole file, n=%zu", n);
    const uint64_t offs[] = {0, 1, BLOCK - 7, BLOCK, 2 * BLOCK - 1, DATA_LEN - 3};
    for (size_t i = 0; i < sizeof offs / sizeof *offs; i++) {
        memset(back, 0, 70000);
        OK(cv_pread(f, offs[i], back, 70000, &n));
        size_t want = DATA_LEN - offs[i] < 70000 ? DATA_LEN - offs[i] : 70000;
        CHECK(n == want && matches(back, offs[i], n), "pread at %llu", (unsigned long long)offs[i]);
    }
    OK(cv_pread_fully(f, BLOCK - 100, back, 200));
    CHECK(matches(back, BLOCK - 100, 200), "pread_fully across a block boundary");

    /* Reads past the end: pread reports EOF as 0 bytes, pread_fully as CV_ERR_EOF. */
    n = 99;
    OK(cv_pread(f, DATA_LEN, back, 10, &n));
    CHECK(n == 0, "pread at the end reads 0");
    OK(cv_pread(f, DATA_LEN + 1000, back, 10, &n));
    CHECK(n == 0, "pread past the end reads 0");
    memset(back, 0xAB, 16);
    EXPECT(CV_ERR_EOF, cv_pread_fully(f, DATA_LEN - 5, back, 16));
    CHECK(back[0] == 0xAB, "a failed pread_fully writes nothing");
    EXPECT(CV_ERR_EOF, cv_pread_fully(f, UINT64_MAX, back, 16));
    OK(cv_pread(f, 0, NULL, 0, &n));
    CHECK(n == 0, "empty read");

    /* Vectored: overlapping, adjacent, block-crossing, short and past-the-end ranges. */
    uint8_t b0[10], b1[10], b2[70000], b3[20], b4[4], b5[1];
    cv_range_t r[] = {
        {0, b0, sizeof b0, 99},          {5, b1, sizeof b1, 99},
        {BLOCK - 35000, b2, sizeof b2, 99}, {DATA_LEN - 5, b3, sizeof b3, 99},
        {DATA_LEN + 7, b4, sizeof b4, 99}, {2 * BLOCK, b5, sizeof b5, 99},
    };
    OK(cv_preadv(f, r, 6));
    CHECK(r[0].read == 10 && matches(b0, 0, 10), "v0");
    CHECK(r[1].read == 10 && matches(b1, 5, 10), "v1");
    CHECK(r[2].read == sizeof b2 && matches(b2, BLOCK - 35000, sizeof b2), "v2");
    CHECK(r[3].read == 5 && matches(b3, DATA_LEN - 5, 5), "v3 short at the end");
    CHECK(r[4].read == 0, "v4 past the end");
    CHECK(r[5].read == 1 && matches(b5, 2 * BLOCK, 1), "v5");
    OK(cv_preadv(f, NULL, 0));
    cv_range_t bad = {0, NULL, 5, 0};
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_preadv(f, &bad, 1));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_preadv(f, NULL, 1));

    /* Concurrency: four threads share the handle. */
    pthread_t th[4];
    struct reader_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct reader_arg){f, (unsigned)i * 7919u + 1u, 0, -1};
        CHECK(pthread_create(&th[i], NULL, reader, &args[i]) == 0, "thread");
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].failures == 0, "thread %d: %d bad reads", i, args[i].failures);
        CHECK(args[i].first_error_code == 0, "last error is per thread");
    }

    /* Bad arguments and bad handles: documented errors, no crash. */
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_pread(f, 0, NULL, 10, &n));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_pread(f, 0, back, 10, NULL));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_pread(f, 0, back, (size_t)-1, &n));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_open(c, NULL, &f));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_open(c, "/c/data", NULL));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_stat(c, "\xff\xfe", &st));
    EXPECT(CV_ERR_INVALID_ARGUMENT, cv_list(c, "/c", NULL, NULL));
    EXPECT(CV_ERR_BAD_HANDLE, cv_pread(0, 0, back, 10, &n));
    EXPECT(CV_ERR_BAD_HANDLE, cv_pread(0x0200000012345678ull, 0, back, 10, &n));
    EXPECT(CV_ERR_BAD_HANDLE, cv_pread((cv_file_t)c, 0, back, 10, &n));
    EXPECT(CV_ERR_BAD_HANDLE, cv_open((cv_client_t)f, "/c/data", &f));
    CHECK(strstr(cv_last_error_message(), "not a client handle") != NULL, "message: %s", cv_last_error_message());
    EXPECT(CV_ERR_BAD_HANDLE, cv_file_close((cv_file_t)c));
    OK(cv_file_close(f));
    EXPECT(CV_ERR_BAD_HANDLE, cv_file_close(f));
    EXPECT(CV_ERR_BAD_HANDLE, cv_pread(f, 0, back, 10, &n));
    EXPECT(CV_ERR_BAD_HANDLE, cv_file_length(f, &len));
    EXPECT(CV_ERR_BAD_HANDLE, cv_writer_abort(12345));
    CHECK(strcmp(cv_status_name(CV_ERR_BAD_HANDLE), "CV_ERR_BAD_HANDLE") == 0, "status name");
    CHECK(strcmp(cv_status_name(-3), "CV_ERR_UNKNOWN") == 0, "unknown status name");

    /* Missing files. */
    EXPECT(CV_ERR_NOT_FOUND, cv_open(c, "/c/missing", &f));
    CHECK(strstr(cv_last_error_message(), "/c/missing") != NULL, "message: %s", cv_last_error_message());
    CHECK(cv_last_error_retryable() == 0, "not found is final");
    EXPECT(CV_ERR_NOT_FOUND, cv_stat(c, "/c/missing", &st));
    EXPECT(CV_ERR_IS_A_DIRECTORY, cv_open(c, "/c/sub", &f));

    /* A file whose writer has not closed it: its own status, not retryable (issue 40). */
    OK(cv_create(c, "/c/busy", 0, &w));
    OK(cv_write(w, (const uint8_t *)"abc", 3));
    EXPECT(CV_ERR_FILE_INCOMPLETE, cv_open(c, "/c/busy", &f));
    CHECK(strstr(cv_last_error_message(), "/c/busy") != NULL, "message: %s", cv_last_error_message());
    CHECK(cv_last_error_retryable() == 0, "a file being written is not worth a retry");
    CHECK(strcmp(cv_status_name(CV_ERR_FILE_INCOMPLETE), "CV_ERR_FILE_INCOMPLETE") == 0, "status name");
    OK(cv_writer_abort(w));

    /* A Parquet file: the footer comes with the open. */
    size_t plen = 0;
    uint8_t *local = read_local(argv[2], &plen);
    CHECK(local != NULL && plen > 12, "read %s", argv[2]);
    OK(cv_create(c, "/c/t.parquet", 0, &w));
    OK(cv_write(w, local, plen));
    OK(cv_writer_close(w, NULL));
    OK(cv_open(c, "/c/t.parquet", &f));
    uint64_t toff = 0, tlen = 0;
    OK(cv_file_tail(f, &toff, &tlen));
    uint8_t trailer[8];
    OK(cv_pread_fully(f, plen - 8, trailer, 8));
    CHECK(memcmp(trailer + 4, "PAR1", 4) == 0, "parquet magic");
    uint32_t flen = (uint32_t)trailer[0] | (uint32_t)trailer[1] << 8 | (uint32_t)trailer[2] << 16 |
                    (uint32_t)trailer[3] << 24;
    CHECK(tlen == (uint64_t)flen + 8 && toff == plen - flen - 8, "tail holds exactly the footer");
    uint8_t *footer = malloc(flen);
    OK(cv_pread_fully(f, plen - 8 - flen, footer, flen));
    CHECK(memcmp(footer, local + plen - 8 - flen, flen) == 0, "footer bytes");
    OK(cv_pread_fully(f, 0, trailer, 4));
    CHECK(memcmp(trailer, "PAR1", 4) == 0, "leading magic");
    OK(cv_file_close(f));

    /* Namespace. */
    struct listing l = {0, 0, 0};
    OK(cv_list(c, "/c", on_entry, &l));
    CHECK(l.entries == 3 && l.saw_file && l.saw_dir, "list: %d entries", l.entries);
    int calls = 0;
    OK(cv_list(c, "/c", stop_at_first, &calls));
    CHECK(calls == 1, "a non-zero callback return stops the listing");
    OK(cv_stat(c, "/c/sub", &st));
    CHECK(st.kind == CV_KIND_DIR, "dir stat");
    OK(cv_rename(c, "/c/data", "/c/sub/moved"));
    EXPECT(CV_ERR_NOT_FOUND, cv_stat(c, "/c/data", &st));
    OK(cv_stat(c, "/c/sub/moved", &st));
    CHECK(st.length == DATA_LEN, "renamed length");
    EXPECT(CV_ERR_NOT_EMPTY, cv_delete(c, "/c/sub", 0));
    OK(cv_create(c, "/c/aborted", 0, &w));
    OK(cv_write(w, data, 100));
    OK(cv_writer_abort(w));
    EXPECT(CV_ERR_BAD_HANDLE, cv_writer_abort(w));
    OK(cv_delete(c, "/c/t.parquet", 0));
    EXPECT(CV_ERR_NOT_FOUND, cv_open(c, "/c/t.parquet", &f));

    OK(cv_client_close(c));
    EXPECT(CV_ERR_BAD_HANDLE, cv_client_close(c));
    EXPECT(CV_ERR_BAD_HANDLE, cv_stat(c, "/c", &st));
    free(data);
    free(back);
    free(local);
    free(footer);
    printf("cv_test.c: all %d checks ok\n", checks);
    return 0;
}
