/* Linked against libcv_capi.a: the library works without the shared object. */
#include "cv.h"

#include <stdio.h>
#include <string.h>

int main(void) {
    size_t n = 0;
    uint8_t buf[4];
    if (cv_pread(42, 0, buf, sizeof buf, &n) != CV_ERR_BAD_HANDLE) return 1;
    if (strstr(cv_last_error_message(), "handle") == NULL) return 2;
    cv_client_t c = 0;
    if (cv_client_open_toml("not toml [", &c) != CV_ERR_CONFIG || c != 0) return 3;
    printf("static ok, version %s\n", cv_version());
    return 0;
}
