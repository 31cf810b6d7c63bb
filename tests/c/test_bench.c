/* test_bench.c: needle_bench_gemv (src/kernels/bench.c) builds and times valid
 * matrices for every width, group and padded shape (ASan/UBSan check the
 * buffers natively), and rejects bad arguments with a status and a message.
 * No timing thresholds: only that a time is reported. */
#include <string.h>
#include "check.h"
#include "needle.h"

static void test_every_width_and_shape(void) {
    const uint32_t bits[] = {2, 3, 4, 1, 32};
    const uint32_t shapes[][3] = {{64, 512, 128}, {33, 100, 32}, {5, 300, 256}, {1, 1, 1}, {7, 64, 64}};
    for (size_t b = 0; b < sizeof bits / sizeof *bits; b++) {
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            needle_error err = {0};
            double ms = needle_bench_gemv(bits[b], shapes[s][0], shapes[s][1], shapes[s][2], 3, &err);
            CHECK(ms >= 0, "bits %u shape %ux%u group %u: %f (%s)", bits[b], shapes[s][0], shapes[s][1],
                  shapes[s][2], ms, err.message);
        }
    }
}

static void test_rejects_bad_arguments(void) {
    const struct { uint32_t bits, rows, cols, group; const char *says; } bad[] = {
        {5, 8, 8, 8, "bits 5"},       {0, 8, 8, 8, "bits 0"},         {2, 0, 8, 8, "shape"},
        {2, 8, 0, 8, "shape"},        {2, 8, 64, 0, "group 0"},       {3, 8, 64, 48, "group 48"},
        {4, 8, 64, 512, "group 512"}, {2, 65536, 65536, 64, "2^26"}, {32, 70000, 1, 1, "65536"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        needle_error err = {0};
        double ms = needle_bench_gemv(bad[i].bits, bad[i].rows, bad[i].cols, bad[i].group, 1, &err);
        CHECK(ms == -1, "case %zu returned %f", i, ms);
        CHECK(err.code == NEEDLE_E_ARGUMENT, "case %zu: code %d", i, err.code);
        CHECK(strstr(err.message, bad[i].says) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, err.message,
              bad[i].says);
    }
    CHECK(needle_bench_gemv(5, 8, 8, 8, 1, NULL) == -1, "a NULL err is allowed");
}

int main(void) {
    RUN(test_every_width_and_shape);
    RUN(test_rejects_bad_arguments);
    return check_report();
}
