// The JS face of one engine instance: copies an archive into wasm linear
// memory once, and wraps the C API of src/needle.h (load, inspect, tokenize,
// sessions, sampling). It holds no model logic of its own.

import { instantiateEngine } from './wasm.js';

const ERROR_BYTES = 4 + 256; // needle_error: int code + char message[256]

/** An error raised by the engine: `code` is the NEEDLE_E_* status. */
export class NeedleError extends Error {
  constructor(message, code) {
    super(message);
    this.name = 'NeedleError';
    this.code = code;
  }
}

export const STATUS = Object.freeze({
  OK: 0, FORMAT: 1, NOMEM: 2, ARGUMENT: 3, INCOMPLETE: 4, TOKENIZER: 5, CONTEXT: 6, SCHEMA: 7,
  ABORTED: 8,
});

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Owns one wasm instance: memory helpers shared by the classes below. */
export class Engine {
  static async create(wasm) {
    const engine = new Engine(await instantiateEngine(wasm));
    engine.err = engine.x.needle_error_new();
    return engine;
  }

  constructor({ exports, memory, module }) {
    this.x = exports;
    this.memory = memory;
    this.module = module;
    this.peakBytes = memory.buffer.byteLength;
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

  readString(ptr, length) { return decoder.decode(this.u8().subarray(ptr, ptr + length)); }

  /** Throws the engine's last error if status is not OK. */
  check(status) {
    if (status !== STATUS.OK) throw this.lastError(status);
  }

  lastError(fallbackCode) {
    const view = new DataView(this.memory.buffer, this.err, ERROR_BYTES);
    const code = view.getInt32(0, true) || fallbackCode || STATUS.ARGUMENT;
    const bytes = this.u8().subarray(this.err + 4, this.err + ERROR_BYTES);
    const end = bytes.indexOf(0);
    return new NeedleError(decoder.decode(bytes.subarray(0, end < 0 ? bytes.length : end)), code);
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
