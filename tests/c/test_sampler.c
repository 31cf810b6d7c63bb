/* test_sampler.c: the sampler's filters, its distributions over many draws
 * and its determinism. Frequencies are checked against the probabilities
 * each filter should leave, with a tolerance of about five standard errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "needle.h"

#define DRAWS 40000

/* Frequencies of DRAWS samples from logits (copied fresh for every draw). */
static void frequencies(needle_sampler *s, const float *logits, uint32_t n, double *freq) {
    float work[16];
    memset(freq, 0, n * sizeof *freq);
    for (int i = 0; i < DRAWS; i++) {
        memcpy(work, logits, n * sizeof *work);
        int32_t id = needle_sampler_sample(s, work, NULL, 0);
        if (id >= 0 && (uint32_t)id < n) freq[id] += 1.0 / DRAWS;
    }
}

static int close_to(const double *freq, const double *want, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        double se = sqrt(want[i] * (1 - want[i]) / DRAWS) + 1e-9;
        if (fabs(freq[i] - want[i]) > 5 * se + 1e-12) return 0;
    }
    return 1;
}

static const float probs[4] = {0.5f, 0.3f, 0.15f, 0.05f};

static void log_probs(float *l) {
    for (int i = 0; i < 4; i++) l[i] = logf(probs[i]) + 3.0f; /* any offset */
}

static void test_greedy(void) {
    needle_sampler *s = needle_sampler_new(5, 0.0f, 0, 1.0f, 0.0f, 1.0f, 7);
    float l[5] = {0.1f, 2.0f, -1.0f, 2.0f, 1.0f};
    CHECK(needle_sampler_sample(s, l, NULL, 0) == 1, "ties go to the lower id");
    float nan_first[5] = {NAN, -3.0f, -2.0f, -5.0f, -2.5f};
    CHECK(needle_sampler_sample(s, nan_first, NULL, 0) == 2, "NaN ranks last");
    needle_sampler_free(s);
}

static void test_temperature_one(void) {
    needle_sampler *s = needle_sampler_new(4, 1.0f, 0, 1.0f, 0.0f, 1.0f, 1);
    float l[4];
    double f[4], want[4];
    log_probs(l);
    for (int i = 0; i < 4; i++) want[i] = probs[i];
    frequencies(s, l, 4, f);
    CHECK(close_to(f, want, 4), "%f %f %f %f", f[0], f[1], f[2], f[3]);
    needle_sampler_free(s);
}

static void test_temperature_two(void) {
    needle_sampler *s = needle_sampler_new(4, 2.0f, 0, 1.0f, 0.0f, 1.0f, 2);
    float l[4];
    double f[4], want[4], total = 0;
    log_probs(l);
    for (int i = 0; i < 4; i++) total += want[i] = sqrt(probs[i]);
    for (int i = 0; i < 4; i++) want[i] /= total;
    frequencies(s, l, 4, f);
    CHECK(close_to(f, want, 4), "p^(1/2): %f %f %f %f", f[0], f[1], f[2], f[3]);
    needle_sampler_free(s);
}

static void test_top_k(void) {
    needle_sampler *s = needle_sampler_new(4, 1.0f, 2, 1.0f, 0.0f, 1.0f, 3);
    float l[4];
    double f[4], want[4] = {0.5 / 0.8, 0.3 / 0.8, 0, 0};
    log_probs(l);
    frequencies(s, l, 4, f);
    CHECK(close_to(f, want, 4), "%f %f %f %f", f[0], f[1], f[2], f[3]);
    needle_sampler_free(s);
    /* Equal logits: the ranking keeps the lowest ids, whatever qsort does. */
    s = needle_sampler_new(8, 1.0f, 3, 1.0f, 0.0f, 1.0f, 4);
    float flat[8] = {0};
    int bad = 0, seen[3] = {0};
    for (int i = 0; i < 3000; i++) {
        float w[8];
        memcpy(w, flat, sizeof w);
        int32_t id = needle_sampler_sample(s, w, NULL, 0);
        if (id < 0 || id > 2) bad++;
        else seen[id]++;
    }
    CHECK(!bad && seen[0] > 800 && seen[1] > 800 && seen[2] > 800, "bad %d, %d %d %d", bad,
          seen[0], seen[1], seen[2]);
    needle_sampler_free(s);
}

static void test_top_p(void) {
    float l[4];
    double f[4];
    log_probs(l);
    needle_sampler *s = needle_sampler_new(4, 1.0f, 0, 0.7f, 0.0f, 1.0f, 5);
    double want[4] = {0.5 / 0.8, 0.3 / 0.8, 0, 0}; /* 0.5 < 0.7 <= 0.8 */
    frequencies(s, l, 4, f);
    CHECK(close_to(f, want, 4), "top_p 0.7: %f %f %f %f", f[0], f[1], f[2], f[3]);
    needle_sampler_free(s);
    s = needle_sampler_new(4, 1.0f, 0, 0.9f, 0.0f, 1.0f, 6);
    double want2[4] = {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0};
    frequencies(s, l, 4, f);
    CHECK(close_to(f, want2, 4), "top_p 0.9: %f %f %f %f", f[0], f[1], f[2], f[3]);
    needle_sampler_free(s);
}

static void test_min_p(void) {
    float l[4];
    double f[4], want[4] = {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}; /* 0.05 < 0.2 * 0.5 */
    log_probs(l);
    needle_sampler *s = needle_sampler_new(4, 1.0f, 0, 1.0f, 0.2f, 1.0f, 7);
    frequencies(s, l, 4, f);
    CHECK(close_to(f, want, 4), "%f %f %f %f", f[0], f[1], f[2], f[3]);
    needle_sampler_free(s);
}

static void test_repetition_penalty(void) {
    needle_sampler *s = needle_sampler_new(4, 0.0f, 0, 1.0f, 0.0f, 2.0f, 8);
    float l[4] = {2.0f, 1.9f, -1.0f, -1.05f};
    const int32_t recent[5] = {0, 0, 2, 99, -1}; /* repeats count once; out of range ignored */
    CHECK(needle_sampler_sample(s, l, recent, 5) == 1, "penalised 0 loses to 1");
    CHECK(l[0] == 1.0f && l[1] == 1.9f && l[2] == -2.0f && l[3] == -1.05f, "%g %g %g %g", l[0],
          l[1], l[2], l[3]);
    float again[4] = {2.0f, 1.9f, -1.0f, -1.05f};
    CHECK(needle_sampler_sample(s, again, NULL, 0) == 0, "no recent ids, no penalty");
    needle_sampler_free(s);
}

static void draw_sequence(uint32_t seed, int32_t *out, int n) {
    needle_sampler *s = needle_sampler_new(16, 0.8f, 10, 0.95f, 0.01f, 1.1f, seed);
    for (int i = 0; i < n; i++) {
        float l[16];
        for (int k = 0; k < 16; k++) l[k] = (float)((k * 37 + i * 11) % 23) * 0.1f;
        out[i] = needle_sampler_sample(s, l, out, (size_t)i);
    }
    needle_sampler_free(s);
}

static void test_determinism(void) {
    int32_t a[500], b[500], c[500];
    draw_sequence(42, a, 500);
    draw_sequence(42, b, 500);
    draw_sequence(43, c, 500);
    CHECK(!memcmp(a, b, sizeof a), "same seed, same tokens");
    CHECK(memcmp(a, c, sizeof a) != 0, "another seed, other tokens");
    int in_range = 1;
    for (int i = 0; i < 500; i++) in_range &= a[i] >= 0 && a[i] < 16;
    CHECK(in_range, "ids in range");
}

static void test_arguments(void) {
    CHECK(!needle_sampler_new(0, 1.0f, 0, 1.0f, 0.0f, 1.0f, 1), "vocab 0");
    CHECK(!needle_sampler_new(4, -1.0f, 0, 1.0f, 0.0f, 1.0f, 1), "negative temperature");
    CHECK(!needle_sampler_new(4, 1.0f, 0, 0.0f, 0.0f, 1.0f, 1), "top_p 0");
    CHECK(!needle_sampler_new(4, 1.0f, 0, 1.0f, 1.5f, 1.0f, 1), "min_p above 1");
    CHECK(!needle_sampler_new(4, 1.0f, 0, 1.0f, 0.0f, 0.0f, 1), "penalty 0");
    CHECK(!needle_sampler_new(4, NAN, 0, 1.0f, 0.0f, 1.0f, 1), "NaN temperature");
    CHECK(needle_sampler_sample(NULL, NULL, NULL, 0) == -1, "NULL sampler");
}

int main(void) {
    RUN(test_greedy);
    RUN(test_temperature_one);
    RUN(test_temperature_two);
    RUN(test_top_k);
    RUN(test_top_p);
    RUN(test_min_p);
    RUN(test_repetition_penalty);
    RUN(test_determinism);
    RUN(test_arguments);
    return check_report();
}
