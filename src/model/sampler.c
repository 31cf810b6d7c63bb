/* sampler.c: picks the next token from logits.
 *
 * Order of the filters: repetition penalty (CTRL: positive logits divided,
 * negative ones multiplied, once per distinct recent id), then greedy when
 * temperature is 0, else logits / temperature, top-k, top-p (smallest prefix
 * of the ranking whose probability reaches top_p), min-p (drop tokens below
 * min_p times the best probability), then one draw.
 *
 * Determinism: the ranking is a total order (logit descending, then lower id
 * first), so it never depends on the sort's stability; the PRNG (splitmix64)
 * and the exponential below use only integer arithmetic and correctly
 * rounded IEEE operations, so the same seed and logits give the same token
 * on every platform (libm's expf may differ in the last bit between
 * platforms; this one does not).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "needle.h"

typedef struct {
    float logit;
    uint32_t id;
} nd_candidate;

struct needle_sampler {
    uint32_t vocab, top_k;
    float temperature, top_p, min_p, penalty;
    uint64_t state;
    nd_candidate *cand; /* [vocab] */
    double *prob;       /* [vocab] */
    uint8_t *seen;      /* [vocab] repetition-penalty marks, all 0 between calls */
};

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits: exact in double. */
static double uniform(uint64_t *state) { return (double)(splitmix64(state) >> 11) * 0x1.0p-53; }

/* exp(x) for x <= 0 from +, *, / only (platform independent): x = k ln2 + r
 * with |r| <= ln2/2, a degree-13 Taylor series for exp(r) (error < 1e-16),
 * then an exact scaling by 2^k. */
static double nd_exp(double x) {
    if (!(x > -745.0)) return 0.0; /* also NaN */
    double k = floor(x * 1.4426950408889634 + 0.5);
    double r = (x - k * 0.6931471803691238) - k * 1.9082149292705877e-10;
    double term = 1.0, sum = 1.0;
    for (int i = 1; i <= 13; i++) {
        term = term * r / i;
        sum += term;
    }
    return ldexp(sum, (int)k);
}

needle_sampler *needle_sampler_new(uint32_t vocab, float temperature, uint32_t top_k, float top_p,
                                   float min_p, float repetition_penalty, uint32_t seed) {
    if (vocab == 0 || !(temperature >= 0) || !(top_p > 0 && top_p <= 1) ||
        !(min_p >= 0 && min_p <= 1) || !(repetition_penalty > 0) || isinf(temperature) ||
        isinf(repetition_penalty))
        return NULL;
    needle_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cand = malloc((size_t)vocab * sizeof *s->cand);
    s->prob = malloc((size_t)vocab * sizeof *s->prob);
    s->seen = calloc(vocab, 1);
    if (!s->cand || !s->prob || !s->seen) {
        needle_sampler_free(s);
        return NULL;
    }
    s->vocab = vocab, s->top_k = top_k, s->temperature = temperature;
    s->top_p = top_p, s->min_p = min_p, s->penalty = repetition_penalty;
    s->state = seed;
    return s;
}

void needle_sampler_free(needle_sampler *s) {
    if (!s) return;
    free(s->cand), free(s->prob), free(s->seen);
    free(s);
}

static void apply_penalty(needle_sampler *s, float *logits, const int32_t *recent, size_t n) {
    if (s->penalty == 1.0f || !recent) return;
    for (size_t i = 0; i < n; i++) {
        int32_t id = recent[i];
        if (id < 0 || (uint32_t)id >= s->vocab || s->seen[id]) continue;
        s->seen[id] = 1;
        logits[id] = logits[id] > 0 ? logits[id] / s->penalty : logits[id] * s->penalty;
    }
    for (size_t i = 0; i < n; i++)
        if (recent[i] >= 0 && (uint32_t)recent[i] < s->vocab) s->seen[recent[i]] = 0;
}

/* Logit with NaN ranked below everything. */
static float rank_value(float x) { return x == x ? x : -INFINITY; }

/* Descending logit, then ascending id: a total order. */
static int by_rank(const void *pa, const void *pb) {
    const nd_candidate *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int32_t argmax(const needle_sampler *s, const float *logits) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < s->vocab; i++)
        if (rank_value(logits[i]) > rank_value(logits[best])) best = i;
    return (int32_t)best;
}

int32_t needle_sampler_sample(needle_sampler *s, float *logits, const int32_t *recent, size_t n_recent) {
    if (!s || !logits) return -1;
    apply_penalty(s, logits, recent, n_recent);
    if (s->temperature == 0.0f) return argmax(s, logits);
    uint32_t n = s->vocab;
    for (uint32_t i = 0; i < n; i++) s->cand[i] = (nd_candidate){rank_value(logits[i]) / s->temperature, i};
    int ranked = s->top_k > 0 || s->top_p < 1.0f;
    if (ranked) qsort(s->cand, n, sizeof *s->cand, by_rank);
    if (s->top_k > 0 && s->top_k < n) n = s->top_k;
    double best = -INFINITY, total = 0;
    for (uint32_t i = 0; i < n; i++) best = fmax(best, (double)s->cand[i].logit);
    if (best == -INFINITY) return argmax(s, logits);
    for (uint32_t i = 0; i < n; i++) total += s->prob[i] = nd_exp((double)s->cand[i].logit - best);
    if (s->top_p < 1.0f) {
        double cum = 0;
        for (uint32_t i = 0; i < n; i++) {
            cum += s->prob[i];
            if (cum >= s->top_p * total) { n = i + 1; break; }
        }
    }
    total = 0; /* min-p against the best probability (exp(0) = 1 before normalising) */
    for (uint32_t i = 0; i < n; i++) {
        if (s->prob[i] < s->min_p) s->prob[i] = 0;
        total += s->prob[i];
    }
    double r = uniform(&s->state) * total, cum = 0;
    uint32_t last = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (s->prob[i] == 0) continue;
        last = i;
        cum += s->prob[i];
        if (r < cum) return (int32_t)s->cand[i].id;
    }
    return (int32_t)s->cand[last].id;
}
