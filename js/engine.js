// The JS face of one engine instance: copies an archive into wasm linear
// memory once, and wraps the C API of src/needle.h (load, inspect, tokenize,
// sessions, sampling). It holds no model logic of its own.

import {
  instantiateEngine, importsMemory, detectFeatures, forcedByEnv, VARIANTS, threadPlan, hostThreadFacts, startWorkers,
  threadedVariant,
  createSharedMemory,
} from './wasm.js';
import { NeedleError, STATUS } from './errors.js';

export { NeedleError, STATUS, abortError } from './errors.js';

const ERROR_BYTES = 4 + 256; // needle_error: int code + char message[256]

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// Stops the workers of an engine that was dropped without free().
const orphans = typeof FinalizationRegistry === 'function' ? new FinalizationRegistry((stop) => stop()) : null;

/** The variant name `wasm` forces (or the environment does), if any. */
function forcedVariant(wasm) {
  if (wasm === undefined || wasm === null) return forcedByEnv();
  return typeof wasm === 'string' && Object.hasOwn(VARIANTS, wasm) ? wasm : undefined;
}

/** Instantiates the engine for `wasm` (see instantiateEngine) on the threads
 *  `threads` asks for: { instance, plan }. */
async function instantiateThreaded(wasm, threads) {
  const custom = wasm instanceof WebAssembly.Module || wasm instanceof URL
    || (typeof wasm === 'string' && !Object.hasOwn(VARIANTS, wasm));
  const facts = { ...(await hostThreadFacts()), simd: detectFeatures().simd, variant: forcedVariant(wasm) };
  if (custom) { // a module given by the caller: threaded if it imports its memory
    const instance = await instantiateEngine(wasm, { createMemory: createSharedMemory });
    facts.variant = importsMemory(instance.module) ? 'threads' : 'the given module';
    return { instance, plan: threadPlan(threads, facts) };
  }
  const plan = threadPlan(threads, facts);
  const forcedThreads = Boolean(VARIANTS[facts.variant]?.threaded);
  if (plan.count > 1 || forcedThreads) {
    try {
      return { instance: await instantiateEngine(threadedVariant(facts.variant), { createMemory: createSharedMemory }), plan };
    } catch (error) {
      if (forcedThreads) throw error;
      return { instance: await instantiateEngine(wasm), plan: { count: 1, reason: `the threaded engine did not load: ${error.message}` } };
    }
  }
  return { instance: await instantiateEngine(wasm), plan };
}

/** Owns one wasm instance: memory helpers shared by the classes below. */
export class Engine {
  /** wasm: a variant name, module or URL (instantiateEngine); threads:
   *  'auto' (default: as many as threadPlan allows here) or a count. The
   *  engine's `threads` tells what runs: { count, reason } (reason: why
   *  fewer than asked, else null). free() stops the workers. */
  static async create(wasm, { threads = 'auto' } = {}) {
    const { instance, plan } = await instantiateThreaded(wasm, threads);
    const engine = new Engine(instance);
    engine.err = engine.x.needle_error_new();
    engine.threads = { count: 1, reason: plan.reason };
    if (plan.count > 1 && importsMemory(instance.module)) {
      try {
        engine.pool = await startWorkers(instance, plan.count);
        engine.threads = { count: plan.count, reason: plan.reason };
        orphans?.register(engine, engine.pool.stop, engine);
      } catch (error) {
        engine.threads = { count: 1, reason: `the thread workers did not start: ${error.message}` };
      }
    }
    return engine;
  }

  constructor({ exports, memory, module, variant }) {
    this.x = exports;
    this.memory = memory;
    this.module = module;
    this.variant = variant;
    this.peakBytes = memory.buffer.byteLength;
    this.threads = { count: 1, reason: null };
    this.pool = null;
  }

  /** Stops and terminates the thread workers (the engine itself needs no
   *  freeing: its memory goes with it); the engine runs on one thread after.
   *  Returns a promise that settles when the workers are gone. */
  free() {
    if (!this.pool) return Promise.resolve();
    orphans?.unregister(this);
    const gone = this.pool.stop();
    this.pool = null;
    this.threads = { count: 1, reason: 'the engine was freed' };
    return gone;
  }

  // Views must be made afresh after any call that may grow memory.
  u8() { this.notePeak(); return new Uint8Array(this.memory.buffer); }
  f32(ptr, n) { this.notePeak(); return new Float32Array(this.memory.buffer, ptr, n); }
  i32(ptr, n) { this.notePeak(); return new Int32Array(this.memory.buffer, ptr, n); }
  notePeak() { this.peakBytes = Math.max(this.peakBytes, this.memory.buffer.byteLength); }

  malloc(bytes) {
    const ptr = this.x.malloc(Math.max(1, bytes));
    if (!ptr) throw new NeedleError(`out of wasm memory allocating ${bytes} bytes`, STATUS.NOMEM);
    return ptr;
  }

  /** Copies bytes in; returns the pointer (caller frees). */
  copyIn(bytes) {
    const ptr = this.malloc(bytes.length);
    this.u8().set(bytes, ptr);
    return ptr;
  }

  /** Runs fn(ptr, length) over UTF-8 text copied into memory. */
  withString(text, fn) {
    const bytes = encoder.encode(text);
    const ptr = this.copyIn(bytes);
    try { return fn(ptr, bytes.length); } finally { this.x.free(ptr); }
  }

  // slice, not subarray: TextDecoder refuses views of a shared memory (browsers).
  readString(ptr, length) { return decoder.decode(this.u8().slice(ptr, ptr + length)); }

  /** Throws the engine's last error if status is not OK. */
  check(status) {
    if (status !== STATUS.OK) throw this.lastError(status);
  }

  lastError(fallbackCode) {
    const view = new DataView(this.memory.buffer, this.err, ERROR_BYTES);
    const code = view.getInt32(0, true) || fallbackCode || STATUS.ARGUMENT;
    const bytes = this.u8().subarray(this.err + 4, this.err + ERROR_BYTES);
    const end = bytes.indexOf(0);
    return new NeedleError(decoder.decode(bytes.slice(0, end < 0 ? bytes.length : end)), code);
  }
}

/** Lets queued events (an abort, a worker message, a click) run between
 *  tokens: a macrotask, not a microtask, and not setTimeout, which browsers
 *  clamp to 4 ms once nested. */
export const nextTask = typeof setImmediate === 'function'
  ? () => new Promise((resolve) => setImmediate(resolve))
  : (() => {
      const channel = new MessageChannel();
      const waiting = [];
      channel.port1.onmessage = () => waiting.shift()?.();
      return () => new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(0); });
    })();
