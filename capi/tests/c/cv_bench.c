/* Latency of open + footer and of 64 KiB preads through the C ABI, run by
 * capi/tests/bench.rs. Usage: cv_bench <config> <parquet path> <data path> <iters>.
 * Prints: RESULT c <op> <p50 ns> <p99 ns> <mean ns>, op = open_footer, tail_read_4k, pread_64k. */
#include "cv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIE(...)                                                              \
    do {                                                                      \
        fprintf(stderr, __VA_ARGS__);                                         \
        fprintf(stderr, ": %s\n", cv_last_error_message());                   \
        exit(1);                                                              \
    } while (0)

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *op, uint64_t *ns, int n) {
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) sum += ns[i];
    qsort(ns, (size_t)n, sizeof *ns, cmp);
    printf("RESULT c %s %llu %llu %llu\n", op, (unsigned long long)ns[n / 2],
           (unsigned long long)ns[(size_t)n * 99 / 100], (unsigned long long)(sum / (uint64_t)n));
}

static uint8_t footer[1 << 20];
static uint8_t block[64 * 1024];

static void open_footer(cv_client_t c, const char *path) {
    cv_file_t f;
    uint64_t off, len;
    if (cv_open(c, path, &f) != CV_OK) DIE("open");
    if (cv_file_tail(f, &off, &len) != CV_OK || len == 0 || len > sizeof footer) DIE("tail");
    if (cv_pread_fully(f, off, footer, len) != CV_OK) DIE("footer");
    if (cv_file_close(f) != CV_OK) DIE("close");
}

int main(int argc, char **argv) {
    if (argc != 5) DIE("usage");
    int iters = atoi(argv[4]);
    uint64_t *ns = malloc(sizeof *ns * (size_t)iters);
    cv_client_t c;
    if (cv_client_open_file(argv[1], &c) != CV_OK) DIE("client");

    for (int i = 0; i < iters / 4; i++) open_footer(c, argv[2]);
    for (int i = 0; i < iters; i++) {
        uint64_t t = now_ns();
        open_footer(c, argv[2]);
        ns[i] = now_ns() - t;
    }
    report("open_footer", ns, iters);

    /* A 4 KiB read inside the tail: no network, so this is the cost of the
     * binding itself plus a copy. */
    cv_file_t p;
    uint64_t toff, tlen;
    if (cv_open(c, argv[2], &p) != CV_OK || cv_file_tail(p, &toff, &tlen) != CV_OK) DIE("open parquet");
    size_t tn = tlen < 4096 ? (size_t)tlen : 4096;
    int titers = iters * 10;
    uint64_t *tns = malloc(sizeof *tns * (size_t)titers);
    for (int i = -titers / 4; i < titers; i++) {
        uint64_t t = now_ns();
        if (cv_pread_fully(p, toff, footer, tn) != CV_OK) DIE("tail read");
        if (i >= 0) tns[i] = now_ns() - t;
    }
    report("tail_read_4k", tns, titers);
    free(tns);
    cv_file_close(p);

    cv_file_t f;
    uint64_t len;
    if (cv_open(c, argv[3], &f) != CV_OK || cv_file_length(f, &len) != CV_OK) DIE("open data");
    uint64_t slots = len / sizeof block, x = 42;
    for (int i = -iters / 4; i < iters; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t off = ((x >> 33) % slots) * sizeof block;
        uint64_t t = now_ns();
        if (cv_pread_fully(f, off, block, sizeof block) != CV_OK) DIE("pread");
        if (i >= 0) ns[i] = now_ns() - t;
    }
    report("pread_64k", ns, iters);
    cv_file_close(f);
    cv_client_close(c);
    free(ns);
    return 0;
}
