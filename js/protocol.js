// protocol.js: every message between the main-thread proxy (client.js) and
// the model worker (worker.js), plus the two things both sides need: errors
// as plain {name, message, code, stack} records, and one endpoint shape over
// a browser Worker / worker scope and Node worker_threads.
//
// client -> worker   { id, op: 'load', source, options }      source: see encodeSource
//                    { id, op: 'call', method, args }        inspect | tokenize | detokenize | logits | info
//                    { id, op: 'generate', prompt, options }
//                    { id, op: 'abort' }                      stops request id (generate or load)
//                    { id, op: 'free' }
//                    { id, op: 'agent', agent, method, args }  method: AGENT_CALLS; agent: the id
//                                                            of its 'create' request. create args:
//                                                            [{ tools (declarations), system, sampling }];
//                                                            complete: [text, { maxNewTokens, kind }];
//                                                            extract: [text, schema, options]; abort
//                                                            stops complete and extract
// worker -> client   { id, type: 'progress', loaded, total, checked }
//                    { id, type: 'token', token, text }
//                    { id, type: 'piece', kind, text }        agent output as produced: kind
//                                                            'reasoning' | 'call' | 'marker'
//                    { id, type: 'result', value, memory }    memory: { bytes, peak } of the worker's engine;
//                                                            agent value: { result, prefillCount, renderedTools }
//                    { id, type: 'error', error }             error: serializeError(e)

import { NeedleError } from './engine.js';

export const CALLS = Object.freeze(['inspect', 'tokenize', 'detokenize', 'logits', 'embed', 'info']);
export const AGENT_CALLS = Object.freeze(['create', 'complete', 'extract', 'embeddings', 'reset', 'free']);

export const request = {
  load: (id, source, options) => ({ id, op: 'load', source, options }),
  call: (id, method, args) => ({ id, op: 'call', method, args }),
  generate: (id, prompt, options) => ({ id, op: 'generate', prompt, options }),
  abort: (id) => ({ id, op: 'abort' }),
  free: (id) => ({ id, op: 'free' }),
  agent: (id, agent, method, args) => ({ id, op: 'agent', agent, method, args }),
};

export const reply = {
  progress: (id, { loaded, total, checked }) => ({ id, type: 'progress', loaded, total, checked }),
  token: (id, { token, text }) => ({ id, type: 'token', token, text }),
  piece: (id, { kind, text }) => ({ id, type: 'piece', kind, text }),
  result: (id, value, memory) => ({ id, type: 'result', value, memory }),
  error: (id, error) => ({ id, type: 'error', error: serializeError(error) }),
};

/** An error as a structured-clone-safe record. */
export function serializeError(error) {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error), code: undefined, stack: '' };
  return { name: error.name, message: error.message, code: error.code, stack: error.stack ?? '', status: error.status };
}

/** The record back as a throwable NeedleError with the worker's name and stack. */
export function deserializeError(record) {
  const error = new NeedleError(record.message, record.code);
  error.name = record.name;
  if (record.status !== undefined) error.status = record.status;
  error.stack = `${record.stack}\n    --- in the needle worker, re-thrown in the caller ---\n${error.stack ?? ''}`;
  return error;
}

/** ArrayBuffers inside a reply value (logits rows) to transfer, not copy. */
export function transferables(value) {
  const out = new Set();
  const visit = (v) => {
    if (ArrayBuffer.isView(v) && v.buffer instanceof ArrayBuffer) out.add(v.buffer);
    else if (Array.isArray(v)) v.forEach(visit);
  };
  visit(value);
  return [...out];
}

/**
 * A loadModel source as a postable value plus its transfer list. Strings,
 * URLs and GET Requests travel as URLs (the worker fetches, caches and
 * streams them itself); a Response or ReadableStream hands over its body
 * stream; Blobs travel by reference; bytes are copied unless transfer is set.
 */
export function encodeSource(source, { transfer = false, total, base } = {}) {
  if (typeof source === 'string') {
    const isPath = !/^[a-z][a-z0-9+.-]+:/i.test(source) && base === undefined;
    return { wire: { kind: isPath ? 'path' : 'url', value: isPath ? source : new URL(source, base).href }, transfer: [] };
  }
  if (source instanceof URL) return { wire: { kind: 'url', value: source.href }, transfer: [] };
  if (typeof Request !== 'undefined' && source instanceof Request) {
    if (source.method !== 'GET') throw new NeedleError(`cannot load an archive with a ${source.method} request`, 'SOURCE');
    return { wire: { kind: 'url', value: source.url, headers: [...source.headers] }, transfer: [] };
  }
  if (typeof Response !== 'undefined' && source instanceof Response) {
    const length = source.headers.get('content-length');
    const known = length !== null && !source.headers.get('content-encoding');
    return {
      wire: { kind: 'response', value: source.body, status: source.status, statusText: source.statusText,
        url: source.url, total: known ? Number(length) : undefined },
      transfer: source.body ? [source.body] : [],
    };
  }
  if (typeof ReadableStream !== 'undefined' && source instanceof ReadableStream) {
    return { wire: { kind: 'stream', value: source, total }, transfer: [source] };
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) return { wire: { kind: 'blob', value: source }, transfer: [] };
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const whole = source instanceof ArrayBuffer || (source.byteOffset === 0 && source.byteLength === source.buffer.byteLength);
    const buffer = source instanceof ArrayBuffer ? source : source.buffer;
    if (transfer && whole && buffer instanceof ArrayBuffer) return { wire: { kind: 'bytes', value: buffer }, transfer: [buffer] };
    return { wire: { kind: 'bytes', value: source }, transfer: [] };
  }
  throw new NeedleError(`loadModel cannot read a source of type ${source?.constructor?.name ?? typeof source}`, 'SOURCE');
}

/** The worker's view of an encoded source: [source, extra loader options]. */
export function decodeSource(wire) {
  switch (wire.kind) {
    case 'url': return [wire.headers ? new Request(wire.value, { headers: wire.headers }) : wire.value, {}];
    case 'response': return [new Response(wire.value, {
      status: wire.status, statusText: wire.statusText,
      headers: wire.total !== undefined ? { 'content-length': String(wire.total) } : {},
    }), {}];
    case 'stream': return [wire.value, { total: wire.total }];
    default: return [wire.value, {}];
  }
}

/**
 * One shape over both platforms: { post(message, transfer), listen(fn),
 * onFailure(fn), close() }. target: a browser Worker or worker scope, or a
 * Node Worker or parentPort.
 */
export function endpoint(target) {
  const node = typeof target.on === 'function';
  return {
    post: (message, transfer = []) => target.postMessage(message, transfer),
    listen: (fn) => (node ? target.on('message', fn) : target.addEventListener('message', (e) => fn(e.data))),
    onFailure(fn) {
      if (node) {
        target.on('error', fn);
        target.on('exit', (code) => fn(new NeedleError(`the needle worker exited (code ${code})`, 'WORKER')));
      } else {
        target.addEventListener('error', (e) => {
          e.preventDefault?.();
          fn(new NeedleError(`the needle worker failed: ${e.message || 'script error (see the console)'}`, 'WORKER'));
        });
        target.addEventListener('messageerror', () => fn(new NeedleError('a message from the needle worker could not be read', 'WORKER')));
      }
    },
    close: () => target.terminate?.() ?? target.close?.(),
    // A Node worker keeps the process alive only while a request is open.
    hold: (busy) => (busy ? target.ref?.() : target.unref?.()),
  };
}
