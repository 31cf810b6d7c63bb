/* threads.c: the pool of threads.h and its exported controls (needle.h).
 *
 * Protocol. The caller first closes the next job's ticket (job << 32 |
 * CLOSED: no chunk can be claimed, and a claim of the previous job, whose
 * last chunks are all taken, now fails its compare-exchange), writes the job
 * (fn, ctx, chunks), zeroes `done`, then opens it by storing ticket =
 * job << 32 (chunk counter 0). Without the closing store a worker that read
 * the old ticket could pair it with the new job's larger chunk count and
 * claim a chunk the opening store then hands out again. Anyone who
 * sees job J in the ticket claims chunk c by a compare-exchange of (J, c) to
 * (J, c + 1), runs it and counts it in `done`; the caller claims too, then
 * spins until done == chunks. A job's descriptor is rewritten only after all
 * of its chunks are done, and a claim succeeds only while its job is the
 * current one, so a worker that read the descriptor and then won a claim of
 * job J has read J's descriptor. The 32-bit job number does not wrap in
 * practice (four billion jobs).
 *
 * Idle workers spin on the ticket for spin_us (the next GEMV of a decode step
 * usually comes within microseconds; a round trip through atomic wait/notify
 * costs 12-20 us in V8, more than a small GEMV), then sleep in
 * memory.atomic.wait64 on it. The caller notifies only when one is asleep:
 * `sleepers` is raised before a worker re-reads the ticket and waits on the
 * value it read, so the two sequentially consistent orders leave no lost
 * wake-up. Waking a thread takes long (tens to hundreds of microseconds on a
 * busy machine), and the caller does not wait for it: it runs the job's
 * chunks itself meanwhile. So that the jobs published during that time do not
 * each pay for a notify, `woken` lets one notify through per sleep (a worker
 * clears it before it counts itself a sleeper).
 *
 * Busy machines. With more runnable threads than cores (other tabs, other
 * processes), a spinning worker is descheduled and its spins take time
 * slices from the threads doing the work. A worker descheduled twice within
 * AGAIN_MS in its spins (see spin; once is what an idle machine's other
 * threads do now and then) spins only briefly for a while. Released
 * geometry, 2-core machine, interleaved against the pool without it, two
 * runs: decode at 256 context 436 and 442 against 446 and 464 tok/s idle,
 * 272 and 274 against 187 and 220 with one other thread spinning, 196 and
 * 215 against 202 and 155 with two; prefill of 128 tokens 737 and 750
 * against 747 and 757, 423 and 400 against 358 and 339, 345 and 372 against
 * 363 and 287. Spinning 5 us always was 0.88x idle. */
#include "kernels/threads.h"
#include "needle.h"

#if defined(__wasm__) && defined(__wasm_atomics__)
#include <stdatomic.h>
#include "platform.h"

#define SPIN_US_DEFAULT 200u
#define SPIN_BUSY_US 5u
#define PREEMPTED_MS 0.05
#define AGAIN_MS 50.0
#define BUSY_MS 100.0
#define CLOSED 0xffffffffu /* chunk counter of a job being written */

/* Cache-line aligned (so a multiple of 64 bytes): every thread polls these,
 * and a variable of the caller's sharing their line would make each of its
 * writes a miss for them (a build whose static data moved decoded 12% slower
 * on two threads). */
static struct {
    _Alignas(64) _Atomic uint64_t ticket; /* job << 32 | next chunk to claim */
    _Atomic uint32_t done;    /* chunks of the current job finished */
    _Atomic uint32_t joined;  /* workers inside needle_thread_work */
    _Atomic uint32_t sleepers; /* workers in (or about to enter) atomic.wait */
    _Atomic uint32_t woken;   /* a wake-up is on its way to the sleepers */
    _Atomic uint32_t quit;    /* needle_threads_stop: workers leave */
    _Atomic uint32_t worker_chunks; /* chunks the workers ran, ever */
    uint32_t expected;        /* workers needle_threads_start announced */
    _Atomic uint32_t busy_marks; /* times a worker found itself descheduled, ever */
    uint32_t spin_us;
    /* the current job, written by the caller before it publishes the ticket */
    nd_chunk_fn fn;
    const void *ctx;
    uint32_t chunks;
} pool = {.spin_us = SPIN_US_DEFAULT};

uint32_t nd_threads(void) {
    uint32_t joined = atomic_load(&pool.joined);
    return pool.expected && joined == pool.expected && !atomic_load(&pool.quit) ? joined + 1 : 1;
}

/* Claims and runs chunks of job `job` until none is left; returns how many. */
static uint32_t run_chunks(uint32_t job) {
    uint32_t ran = 0;
    for (;;) {
        uint64_t v = atomic_load(&pool.ticket);
        if ((uint32_t)(v >> 32) != job) return ran;
        nd_chunk_fn fn = pool.fn;
        const void *ctx = pool.ctx;
        uint32_t c = (uint32_t)v;
        if (c == CLOSED) continue; /* opens within a few stores */
        if (c >= pool.chunks) return ran;
        if (!atomic_compare_exchange_weak(&pool.ticket, &v, v + 1)) continue;
        fn(ctx, c);
        atomic_fetch_add(&pool.done, 1);
        ran++;
    }
}

void nd_parallel(nd_chunk_fn fn, const void *ctx, uint32_t chunks) {
    if (chunks < 2 || nd_threads() < 2) {
        for (uint32_t c = 0; c < chunks; c++) fn(ctx, c);
        return;
    }
    uint32_t job = (uint32_t)(atomic_load(&pool.ticket) >> 32) + 1;
    atomic_store(&pool.ticket, (uint64_t)job << 32 | CLOSED);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.chunks = chunks;
    atomic_store(&pool.done, 0);
    atomic_store(&pool.ticket, (uint64_t)job << 32);
    if (atomic_load(&pool.sleepers) && !atomic_exchange(&pool.woken, 1))
        __builtin_wasm_memory_atomic_notify((int *)&pool.ticket, pool.expected);
    run_chunks(job);
    while (atomic_load(&pool.done) != chunks) {
    }
}

/* Spins until the ticket shows a job other than `seen` (or quit) or the
 * spin time passes; returns the ticket last read. A spin whose clock jumps
 * between two looks (PREEMPTED_MS, where 256 turns of the loop take about a
 * microsecond) was descheduled (*preempted: when last). Twice within
 * AGAIN_MS: the machine is busy, and the worker spins only SPIN_BUSY_US for
 * the next BUSY_MS (*busy_until). Both marks are the worker's own. */
static uint64_t spin(uint32_t seen, double *busy_until, double *preempted) {
    double start = nd_now_ms(), last = start;
    double limit = (start < *busy_until ? SPIN_BUSY_US : pool.spin_us) / 1000.0;
    for (uint32_t i = 1;; i++) {
        uint64_t v = atomic_load(&pool.ticket);
        if ((uint32_t)(v >> 32) != seen || atomic_load(&pool.quit)) return v;
        if (i % 256 == 0) {
            double now = nd_now_ms();
            if (now - last > PREEMPTED_MS) {
                if (now - *preempted < AGAIN_MS) {
                    *busy_until = now + BUSY_MS, limit = SPIN_BUSY_US / 1000.0;
                    atomic_fetch_add(&pool.busy_marks, 1);
                }
                *preempted = now;
            }
            if (now - start > limit) return v;
            last = now;
        }
    }
}

void needle_thread_work(void) {
    uint32_t seen = (uint32_t)(atomic_load(&pool.ticket) >> 32);
    double busy_until = 0, preempted = -1e300;
    atomic_fetch_add(&pool.joined, 1);
    while (!atomic_load(&pool.quit)) {
        uint64_t v = spin(seen, &busy_until, &preempted);
        if ((uint32_t)(v >> 32) == seen) { /* idle for spin_us: sleep until the ticket moves */
            atomic_store(&pool.woken, 0);
            atomic_fetch_add(&pool.sleepers, 1);
            v = atomic_load(&pool.ticket);
            if ((uint32_t)(v >> 32) == seen && !atomic_load(&pool.quit))
                __builtin_wasm_memory_atomic_wait64((long long *)&pool.ticket, (long long)v, -1);
            atomic_fetch_sub(&pool.sleepers, 1);
            continue;
        }
        seen = (uint32_t)(v >> 32);
        atomic_fetch_add(&pool.worker_chunks, run_chunks(seen));
    }
    atomic_fetch_sub(&pool.joined, 1);
}

uint32_t needle_threads_supported(void) { return 1; }

void needle_threads_start(uint32_t workers, uint32_t spin_us) {
    atomic_store(&pool.quit, 0);
    pool.spin_us = spin_us ? spin_us : SPIN_US_DEFAULT;
    pool.expected = workers;
}

uint32_t needle_threads_joined(void) { return atomic_load(&pool.joined); }

uint32_t needle_threads_worker_chunks(void) { return atomic_load(&pool.worker_chunks); }

uint32_t needle_threads_busy_marks(void) { return atomic_load(&pool.busy_marks); }

int needle_threads_stop(uint32_t wait_ms) {
    /* An empty job moves the ticket, so a worker between its quit check and
     * its wait does not sleep on an unchanged value. */
    pool.chunks = 0;
    atomic_store(&pool.quit, 1);
    atomic_store(&pool.ticket, (atomic_load(&pool.ticket) & ~0xffffffffull) + (1ull << 32));
    __builtin_wasm_memory_atomic_notify((int *)&pool.ticket, ~0u);
    double start = nd_now_ms();
    while (atomic_load(&pool.joined))
        if (nd_now_ms() - start > wait_ms) return -1;
    pool.expected = 0;
    return 0;
}

#else /* no atomics: every job runs on the caller */

uint32_t nd_threads(void) { return 1; }

void nd_parallel(nd_chunk_fn fn, const void *ctx, uint32_t chunks) {
    for (uint32_t c = 0; c < chunks; c++) fn(ctx, c);
}

void needle_thread_work(void) {}
uint32_t needle_threads_supported(void) { return 0; }
void needle_threads_start(uint32_t workers, uint32_t spin_us) { (void)workers, (void)spin_us; }
uint32_t needle_threads_joined(void) { return 0; }
uint32_t needle_threads_worker_chunks(void) { return 0; }
uint32_t needle_threads_busy_marks(void) { return 0; }
int needle_threads_stop(uint32_t wait_ms) { (void)wait_ms; return 0; }
#endif
