/* threads.h: a tiny pool of worker threads over one shared wasm memory.
 *
 * A job is `chunks` independent pieces of work fn(ctx, chunk); nd_parallel
 * runs them on the calling thread and on every worker that has joined, each
 * chunk exactly once, and returns when all are done. Chunks are claimed one
 * at a time from a shared counter, so a worker that is asleep or slow to wake
 * costs nothing: the caller takes the chunks it did not claim. Work that is
 * split so that each output is written by one chunk, computed as the single
 * thread computes it, gives the same bits on any number of threads.
 *
 * The pool's state lives in linear memory (a static), so every wasm instance
 * over the memory sees it: the engine's thread publishes a job, the workers
 * (js/thread-worker.js: the same module instantiated in a Worker over the same
 * memory, each with its own stack, entered through needle_thread_work) spin
 * on it for a short while and then sleep in memory.atomic.wait. Builds
 * without wasm atomics (the single-threaded variants, native tests) run every
 * job on the caller, chunk by chunk, in order.
 *
 * Only the engine's thread calls nd_parallel, and never from inside a chunk;
 * chunks must not allocate (workers never call malloc). */
#ifndef ND_THREADS_H
#define ND_THREADS_H
#include <stdint.h>

typedef void (*nd_chunk_fn)(const void *ctx, uint32_t chunk);

/* Runs fn(ctx, c) for every c in [0, chunks) and returns when all have run. */
void nd_parallel(nd_chunk_fn fn, const void *ctx, uint32_t chunks);

/* Threads a job runs on now: 1 + the workers that joined (1 when the build
 * has no atomics or no worker is running). */
uint32_t nd_threads(void);

#endif
