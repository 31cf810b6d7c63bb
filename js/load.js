// load.js: reads a .cact archive from any source straight into wasm linear
// memory. A fetched or streamed archive is copied chunk by chunk into one
// malloc'd block (sized from Content-Length when known, grown geometrically
// when not), so JS never holds a second full copy; the engine checks the
// header and tensor directory as soon as their bytes are in, so a wrong file
// fails within its first kilobytes. Archives fetched from http(s) URLs are
// kept in Cache Storage (when the platform has it) and revalidated with
// ETag / Last-Modified, which also makes them load offline.
//
// Error codes (NeedleError.code) raised here, besides the engine's numeric
// STATUS values (FORMAT 1 for a file that is not a valid archive, NOMEM 2):
//   'HTTP'       the server answered with an error status (error.status)
//   'NETWORK'    the URL could not be fetched and no cached copy exists
//   'TRUNCATED'  the stream ended before the announced length
//   'LENGTH'     the stream is longer than the announced length
//   'READ'       a file or Blob could not be read (missing file, I/O error)
//   'SOURCE'     the source is of a type loadModel does not take
//   'QUOTA'      Cache Storage is full; the model still loads, the error is
//                returned in the load report (report.cacheError), not thrown
//   STATUS.ABORTED (8), name 'AbortError': options.signal fired

import { NeedleError, STATUS, abortError } from './errors.js';
import { importNode } from './node-import.js';

// The package's own folder, kept in a variable: `new URL(file, import.meta.url)`
// spelled out would make bundlers copy the demo archive into every app.
const PACKAGE_BASE = import.meta.url;

/** The built-in demo model next to this file (js/demo.js has the bundler-visible URL). */
export const DEMO_ARCHIVE_URL = new URL('../dist/demo.cact', PACKAGE_BASE);

/** The options loadModel() takes (index.d.ts LoadOptions). */
export const LOAD_OPTIONS = Object.freeze(['onProgress', 'signal', 'cache', 'total', 'wasm', 'threads', 'worker',
  'workerUrl', 'transfer']);

/** The Cache Storage bucket that keeps fetched archives, keyed by URL. */
export const ARCHIVE_CACHE = 'needle-archives';

const FIRST_BLOCK = 1 << 20;     // initial block when the length is unknown
const FILE_CHUNK = 1 << 20;      // Node file reads
const isNode = typeof process !== 'undefined' && !!process.versions?.node;
// Passed as the archive's total size while it is still unknown: large enough
// that no offset is out of range yet; the full load re-checks every bound.
const UNKNOWN_TOTAL = Number.MAX_SAFE_INTEGER;

function throwIfAborted(signal) {
  if (signal?.aborted) throw abortError('loading the model', signal);
}

/** A short human name of a source for error messages. */
export function describeSource(source) {
  if (typeof source === 'string') return source;
  if (source instanceof URL) return source.href;
  if (typeof Request !== 'undefined' && source instanceof Request) return source.url;
  if (typeof Response !== 'undefined' && source instanceof Response) return source.url || 'response';
  if (typeof File !== 'undefined' && source instanceof File) return source.name;
  if (typeof Blob !== 'undefined' && source instanceof Blob) return 'blob';
  if (typeof ReadableStream !== 'undefined' && source instanceof ReadableStream) return 'stream';
  return 'bytes';
}

/** Chunks of a ReadableStream; cancels the stream when the consumer stops early. */
async function* streamChunks(stream, signal) {
  const reader = stream.getReader();
  const onAbort = () => reader.cancel(signal.reason).catch(() => {});
  signal?.addEventListener('abort', onAbort, { once: true });
  let done = false;
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) { done = true; return; }
      throwIfAborted(signal);
      yield next.value instanceof Uint8Array ? next.value : new Uint8Array(next.value);
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    if (!done) reader.cancel().catch(() => {});
    reader.releaseLock?.();
  }
}

/** Total byte length a response announces, or undefined (compressed bodies
 *  announce the compressed length, which is not what arrives). */
function responseTotal(response) {
  const length = response.headers.get('content-length');
  if (length === null || response.headers.get('content-encoding')) return undefined;
  const n = Number(length);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

function fromResponse(response, label, signal) {
  if (!response.ok && response.type !== 'opaque') {
    const error = new NeedleError(`cannot fetch ${label}: HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`, 'HTTP');
    error.status = response.status;
    throw error;
  }
  if (!response.body) return { total: 0, chunks: (async function* () {})() };
  if (response.bodyUsed) throw new NeedleError(`${label}: the response body was already read`, 'SOURCE');
  return { total: responseTotal(response), chunks: streamChunks(response.body, signal) };
}

async function openCache(cache) {
  if (cache === false) return null;
  if (cache && typeof cache === 'object') return cache; // a Cache given by the caller
  if (typeof caches === 'undefined') return null;
  try { return await caches.open(ARCHIVE_CACHE); } catch { return null; } // e.g. opaque origins
}

/** Fetches a URL through the archive cache: a cached copy is revalidated
 *  (If-None-Match / If-Modified-Since) and used on 304 or when offline. */
async function fetchCached(request, { signal, cache }) {
  const store = /^https?:$/.test(new URL(request.url).protocol) && request.method === 'GET'
    ? await openCache(cache) : null;
  const cached = store ? await store.match(request.url) : undefined;
  const headers = new Headers(request.headers);
  if (cached?.headers.get('etag')) headers.set('if-none-match', cached.headers.get('etag'));
  if (cached?.headers.get('last-modified')) headers.set('if-modified-since', cached.headers.get('last-modified'));
  const controller = new AbortController(); // also stops the cache copy on failure
  const stop = () => controller.abort(signal.reason);
  signal?.addEventListener('abort', stop, { once: true });
  if (signal?.aborted) stop(); // aborted while the cache was opened: the listener came too late
  let response;
  try {
    // The signal goes in fetch's own options: one inside a copied Request is
    // lost in Node once that Request is garbage-collected (undici issue 4068).
    response = await fetch(new Request(request, { headers, cache: 'no-store' }), { signal: controller.signal });
  } catch (error) {
    throwIfAborted(signal);
    if (cached) return { response: cached, fromCache: true };
    throw new NeedleError(`cannot fetch ${request.url}: ${error.message}`, 'NETWORK');
  }
  if (cached && (response.status === 304 || response.status >= 500)) {
    response.body?.cancel().catch(() => {});
    return { response: cached, fromCache: true };
  }
  const put = store && response.ok && response.status === 200
    ? store.put(request.url, response.clone()) : null;
  put?.catch(() => {}); // settle() reads its outcome; a failure before then is not unhandled
  return {
    response, fromCache: false,
    // After the load: keep the cached copy only if the archive loaded.
    async settle(ok) {
      signal?.removeEventListener('abort', stop);
      if (!put) return undefined;
      if (!ok) controller.abort();
      try {
        await put;
      } catch (error) {
        if (!ok) return undefined;
        return error?.name === 'QuotaExceededError'
          ? new NeedleError(`archive not cached for offline use: storage quota exceeded`, 'QUOTA')
          : new NeedleError(`archive not cached: ${error.message}`, 'QUOTA');
      }
      if (!ok) await store.delete(request.url).catch(() => {});
      return undefined;
    },
  };
}

async function openNodeFile(path, signal) {
  const fs = await importNode('node:fs');
  let size;
  try {
    size = (await fs.promises.stat(path)).size;
  } catch (error) {
    throw new NeedleError(`cannot read ${path}: ${error.code === 'ENOENT' ? 'no such file' : error.message}`, 'READ');
  }
  const stream = fs.createReadStream(path, { highWaterMark: FILE_CHUNK, signal });
  async function* chunks() {
    try {
      for await (const chunk of stream) yield chunk;
    } catch (error) {
      throwIfAborted(signal);
      throw new NeedleError(`cannot read ${path}: ${error.message}`, 'READ');
    } finally {
      stream.destroy();
    }
  }
  return { total: size, chunks: chunks() };
}

function bytesOf(source) {
  if (source instanceof Uint8Array) return source;
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (typeof SharedArrayBuffer !== 'undefined' && source instanceof SharedArrayBuffer) return new Uint8Array(source);
  return null;
}

/**
 * Opens any loadModel source as { total (bytes or undefined), chunks (async
 * iterator of Uint8Array), label, fromCache, settle(ok) }.
 */
export async function openSource(source, { signal, cache, total } = {}) {
  throwIfAborted(signal);
  const label = describeSource(source);
  const bytes = bytesOf(source);
  if (bytes) return { label, total: bytes.length, chunks: (async function* () { yield bytes; })() };
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    return { label, total: source.size, chunks: streamChunks(source.stream(), signal) };
  }
  if (typeof ReadableStream !== 'undefined' && source instanceof ReadableStream) {
    return { label, total, chunks: streamChunks(source, signal) };
  }
  if (typeof Response !== 'undefined' && source instanceof Response) {
    return { label, ...fromResponse(source, label, signal) };
  }
  // A file: URL may arrive as a string too (a worker gets every URL as one).
  const fileUrl = source instanceof URL ? source.protocol === 'file:' : typeof source === 'string' && /^file:/i.test(source);
  if (isNode && (fileUrl || (typeof source === 'string' && !/^[a-z][a-z0-9+.-]+:/i.test(source)))) {
    const path = fileUrl ? (await importNode('node:url')).fileURLToPath(source) : source;
    return { label, ...(await openNodeFile(path, signal)) };
  }
  let request;
  if (typeof Request !== 'undefined' && source instanceof Request) request = source;
  else if (typeof source === 'string' || source instanceof URL) {
    const base = typeof location !== 'undefined' ? location.href : undefined;
    request = new Request(new URL(source, base));
  } else {
    throw new NeedleError(`loadModel cannot read a source of type ${source?.constructor?.name ?? typeof source}; ` +
      'pass a URL, path, Request, Response, ReadableStream, Blob or bytes', 'SOURCE');
  }
  const fetched = await fetchCached(request, { signal, cache });
  try {
    return { label, fromCache: fetched.fromCache, settle: fetched.settle,
      ...fromResponse(fetched.response, label, signal) };
  } catch (error) {
    await fetched.settle?.(false);
    throw error;
  }
}

/** Asks the engine whether the prefix so far is a valid archive start:
 *  true when header and directory passed, false when more bytes are needed. */
function checkPrefix(engine, ptr, loaded, total) {
  const status = engine.x.needle_archive_check_prefix(ptr, loaded, total ?? UNKNOWN_TOTAL, engine.err);
  if (status === STATUS.OK) return true;
  if (status === STATUS.INCOMPLETE) return false;
  throw engine.lastError(status);
}

function allocate(engine, bytes, label) {
  const ptr = engine.x.malloc(Math.max(1, bytes));
  if (!ptr) {
    throw new NeedleError(`out of memory: ${label} needs ${bytes} bytes of wasm memory, more than the ` +
      'browser allows this page', STATUS.NOMEM);
  }
  return ptr;
}

/** Copies every chunk into one block of engine memory; returns { ptr, size }. */
async function fill(engine, opened, { onProgress, signal }) {
  const { total, label } = opened;
  let capacity = total ?? FIRST_BLOCK;
  let ptr = allocate(engine, capacity, label);
  let loaded = 0;
  let checked = false;
  try {
    for await (const chunk of opened.chunks) {
      throwIfAborted(signal);
      if (loaded + chunk.length > capacity) {
        if (total !== undefined) {
          throw new NeedleError(`${label}: more bytes than the ${total} announced`, 'LENGTH');
        }
        const grown = Math.max(capacity * 2, loaded + chunk.length);
        const next = allocate(engine, grown, label);
        engine.u8().copyWithin(next, ptr, ptr + loaded); // inside wasm memory
        engine.x.free(ptr);
        ptr = next;
        capacity = grown;
      }
      engine.u8().set(chunk, ptr + loaded);
      loaded += chunk.length;
      if (!checked) checked = checkPrefix(engine, ptr, loaded, total);
      onProgress?.({ loaded, total, checked });
    }
    if (total !== undefined && loaded < total) {
      throw new NeedleError(`${label} is truncated: the stream ended after ${loaded} of ${total} bytes`, 'TRUNCATED');
    }
    if (!checked && !checkPrefix(engine, ptr, loaded, loaded)) {
      throw new NeedleError(`${label} is not a .cact archive: it ends (${loaded} bytes) before its ` +
        'header and tensor directory do', STATUS.FORMAT);
    }
    return { ptr, size: loaded };
  } catch (error) {
    engine.x.free(ptr);
    throwIfAborted(signal);
    if (error instanceof NeedleError) throw error;
    if (total !== undefined && loaded < total) {
      throw new NeedleError(`${label} is truncated: the connection broke after ${loaded} of ${total} bytes ` +
        `(${error.message})`, 'TRUNCATED');
    }
    throw new NeedleError(`cannot read ${label}: ${error.message}`, 'READ');
  }
}

/** The first chunks of a stream until they hold `count` bytes: { head (at
 *  most count bytes), chunks (the whole stream again, those chunks first) }. */
async function peek(chunks, count) {
  const iterator = chunks[Symbol.asyncIterator]();
  const seen = [];
  let size = 0;
  let ended = false;
  while (size < count && !ended) {
    const { value, done } = await iterator.next();
    if (done) ended = true;
    else seen.push(value), size += value.length;
  }
  const head = new Uint8Array(Math.min(size, count));
  let at = 0;
  for (const chunk of seen) {
    if (at >= head.length) break;
    head.set(chunk.subarray(0, head.length - at), at);
    at += Math.min(chunk.length, head.length - at);
  }
  async function* replay() {
    try {
      yield* seen;
      while (!ended) {
        const { value, done } = await iterator.next();
        if (done) return;
        yield value;
      }
    } finally {
      if (!ended) await iterator.return?.();
    }
  }
  return { head, chunks: replay() };
}

/**
 * Streams an archive into the memory of an engine made for it and hands it
 * to build(ptr, size) (which takes ownership of ptr, e.g. Model.fromMemory);
 * returns { value: build's result, size, label, fromCache, cacheError }.
 * createEngine(head) gets the archive's first four bytes (its tag: the
 * generation) once they arrive and returns the engine to load into; it is
 * called at most once. A URL's cached copy is kept only when build succeeds.
 * options: onProgress({loaded, total, checked}), signal, cache (false to
 * skip Cache Storage, or a Cache to use), total (for a bare ReadableStream).
 */
export async function streamArchive(createEngine, source, options, build) {
  const opened = await openSource(source, options);
  let value;
  let size;
  try {
    const { head, chunks } = await peek(opened.chunks, 4);
    const engine = await createEngine(head);
    const filled = await fill(engine, { ...opened, chunks }, options);
    size = filled.size;
    value = await build(filled.ptr, filled.size);
  } catch (error) {
    await opened.settle?.(false);
    throw error;
  }
  const cacheError = await opened.settle?.(true);
  return { value, size, label: opened.label, fromCache: !!opened.fromCache, cacheError };
}
