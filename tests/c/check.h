/* check.h: the smallest test harness for the C unit tests. Each test file
 * defines test functions, lists them in main() with RUN(), and ends with
 * return check_report(); the last line printed is "N passed, N failed",
 * which node's test wrapper (tests/js/c-units.test.js) reads. The same file
 * builds natively (under ASan/UBSan) and as a WASI module with SIMD128. */
#ifndef CHECK_H
#define CHECK_H
#include <stdio.h>

static int check_failures_in_test;
static int check_passed, check_failed;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            printf("  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
            printf(__VA_ARGS__);                                                \
            printf("\n");                                                       \
            check_failures_in_test++;                                           \
        }                                                                       \
    } while (0)

#define RUN(test)                                                               \
    do {                                                                        \
        check_failures_in_test = 0;                                             \
        test();                                                                 \
        if (check_failures_in_test) { check_failed++; printf("not ok %s\n", #test); } \
        else { check_passed++; printf("ok %s\n", #test); }                      \
        fflush(stdout);                                                         \
    } while (0)

static int check_report(void) {
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}
#endif
