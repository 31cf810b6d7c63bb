/* platform.h: the two things the engine asks of its host: a monotonic clock
 * (for the tok/s figures of the agent envelope) and the size of memory in use
 * (the wasm linear memory high-water mark). In wasm the clock is the one
 * import besides memory growth, `env.needle_now_ms`, given by js/wasm.js. */
#ifndef ND_PLATFORM_H
#define ND_PLATFORM_H
#include <stddef.h>

#ifdef __wasm__
__attribute__((import_module("env"), import_name("needle_now_ms"))) double nd_now_ms(void);
static inline size_t nd_memory_bytes(void) { return __builtin_wasm_memory_size(0) * 65536u; }
#else
#include <time.h>
static inline double nd_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
/* Natively there is no single linear memory; the agent reports 0. */
static inline size_t nd_memory_bytes(void) { return 0; }
#endif
#endif
