// client.js: the caller's side of a model that lives in a worker. A
// WorkerModel has the methods of Model (model.js), each returning a promise,
// and generate() is the same async iterator; errors thrown in the worker are
// re-thrown here with their name, code and stack. Each WorkerModel owns one
// worker, so a page can hold several models. Works over a browser module
// Worker and over Node worker_threads. A WorkerNeedle is an agent (agent.js)
// living in a model's worker: Needle's API, with the JS tool functions of
// run() executed here, in the caller's thread.

import { request, encodeSource, deserializeError, endpoint } from './protocol.js';
import { NeedleError, STATUS, abortError } from './errors.js';
import { importNode } from './node-import.js';
import { declaration, toolFunctions, samplingOf, runTools, checkAgentInput, turnInput } from './agent.js';
import { jsonText, refuse } from './json-text.js';

const isBrowser = typeof window !== 'undefined' || typeof WorkerGlobalScope !== 'undefined';

/** Starts the model worker: options.workerUrl if given, else worker.js next
 *  to this file. The default is spelled `new Worker(new URL('./worker.js',
 *  import.meta.url), { type: 'module' })` on purpose: bundlers (Vite,
 *  webpack 5, Parcel) recognise exactly that shape and bundle the worker
 *  with its imports; a URL kept in a variable would be copied as a bare file. */
async function spawn(url) {
  if (isBrowser) {
    return endpoint(url
      ? new Worker(url, { type: 'module', name: 'needle-model' })
      : new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'needle-model' }));
  }
  const threads = await importNode('node:worker_threads');
  const here = import.meta.url; // not the literal pattern: browser bundles need no copy of this path
  return endpoint(new threads.Worker(url ?? new URL('./worker.js', here)));
}

// Vite's dev server pre-bundles dependencies into node_modules/.vite/deps/,
// where the worker and engine files next to this one do not exist.
const PREBUNDLED = /\/\.vite\/deps\//.test(import.meta.url);

/** A worker that failed to start, with what to change when a dev server moved this package. */
function withBundlerHint(error) {
  if (PREBUNDLED && error.code === 'WORKER') {
    error.message += ". Vite's dev server pre-bundled needle-wasm, which moves its worker and engine files: "
      + "add optimizeDeps: { exclude: ['needle-wasm'] } to vite.config.js";
  }
  return error;
}

export class WorkerModel {
  /**
   * Starts a worker and loads source in it (see loadModel in index.js).
   * options: onProgress, signal, cache, total, transfer (hand over an
   * ArrayBuffer instead of copying it), wasm (URL or WebAssembly.Module),
   * workerUrl.
   */
  static async load(source, options = {}) {
    const { onProgress, signal, workerUrl, transfer, total, worker: _, ...rest } = options;
    if (signal?.aborted) throw abortError('loading the model', signal);
    const base = isBrowser && typeof location !== 'undefined' ? location.href : undefined;
    const encoded = encodeSource(source, { transfer, total, base });
    const wasm = rest.wasm instanceof URL ? rest.wasm.href : rest.wasm;
    const model = new WorkerModel(await spawn(workerUrl));
    try {
      model.info = await model.send(request.load(model.nextId++, encoded.wire, { ...rest, wasm }),
        encoded.transfer, { onProgress, signal });
    } catch (error) {
      model.terminate();
      throw error;
    }
    model.source = model.info.source;
    model.vocabulary = model.info.vocabulary;
    model.ids = model.info.ids;
    model.threads = model.info.threads;
    return model;
  }

  constructor(port) {
    this.port = port;
    this.nextId = 1;
    this.pending = new Map(); // id -> { resolve, reject, onMessage }
    this.memory = { bytes: 0, peak: 0 };
    this.failure = null;
    port.listen((message) => this.receive(message));
    port.onFailure((error) => this.fail(withBundlerHint(error)));
    port.hold(false);
  }

  receive(message) {
    const entry = this.pending.get(message.id);
    if (!entry) return;
    if (message.memory) this.memory = message.memory;
    if (message.type === 'result' || message.type === 'error') {
      this.pending.delete(message.id);
      this.port?.hold(this.pending.size > 0);
      if (message.type === 'result') entry.resolve(message.value);
      else entry.reject(deserializeError(message.error));
    } else {
      entry.onMessage?.(message);
    }
  }

  /** The worker died: every open request fails with the same error. */
  fail(error) {
    this.failure ??= error;
    for (const entry of this.pending.values()) entry.reject(this.failure);
    this.pending.clear();
  }

  /** Posts one request; resolves with its result. signal posts an abort. */
  send(message, transfer = [], { onProgress, onMessage, signal } = {}) {
    if (this.failure) return Promise.reject(this.failure);
    if (!this.port) return Promise.reject(new NeedleError('this model was freed', STATUS.ARGUMENT));
    return new Promise((resolve, reject) => {
      const onAbort = () => this.port?.post(request.abort(message.id));
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = (fn) => (value) => { signal?.removeEventListener('abort', onAbort); fn(value); };
      this.pending.set(message.id, {
        resolve: done(resolve), reject: done(reject),
        onMessage: onMessage ?? ((m) => m.type === 'progress' && onProgress?.({ loaded: m.loaded, total: m.total, checked: m.checked })),
      });
      this.port.hold(true);
      try {
        this.port.post(message, transfer);
      } catch (cause) { // a DataCloneError: a function, say, where a value was expected
        this.pending.delete(message.id);
        this.port.hold(this.pending.size > 0);
        const error = new NeedleError(`cannot send ${message.method ?? message.op} to the worker: ${cause.message}`, STATUS.ARGUMENT);
        error.cause = cause;
        done(reject)(error);
      }
    });
  }

  call(method, ...args) { return this.send(request.call(this.nextId++, method, args)); }

  inspect() { return this.call('inspect'); }
  tokenize(text) { return this.call('tokenize', text); }
  detokenize(ids) { return this.call('detokenize', ids); }
  logits(ids, options = {}) { return this.call('logits', ids, options); }
  embed(text, options = {}) { return this.call('embed', text, options); }

  /** Same as Model.generate: yields { token, text } as the worker produces them. */
  async *generate(prompt, options = {}) {
    const { signal, ...rest } = options;
    if (signal?.aborted) throw abortError('generation', signal);
    const id = this.nextId++;
    const queue = [];
    let wake = null;
    let finished = false;
    let failure = null;
    const result = this.send(request.generate(id, prompt, rest), [], {
      signal,
      onMessage: (m) => { if (m.type === 'token') { queue.push({ token: m.token, text: m.text }); wake?.(); } },
    }).then(() => { finished = true; wake?.(); }, (error) => { failure = error; finished = true; wake?.(); });
    try {
      for (;;) {
        // Tokens already in flight when the caller aborted are dropped.
        if (signal?.aborted) throw abortError('generation', signal);
        if (queue.length) { yield queue.shift(); continue; }
        if (finished) break;
        await new Promise((resolve) => { wake = resolve; });
        wake = null;
      }
      await result;
      if (failure) throw failure;
    } finally {
      if (!finished) this.port?.post(request.abort(id)); // the caller stopped iterating early
    }
  }

  /** An agent over this model, in its worker (see Needle.create). */
  createAgent(options = {}) { return WorkerNeedle.create(this, options); }

  /** Highest wasm memory size of the worker's engine, as of its last reply. */
  get peakMemoryBytes() { return this.memory.peak; }

  /** Releases the model and ends its worker. */
  async free() {
    if (!this.port) return;
    try { await this.send(request.free(this.nextId++)); } finally { this.terminate(); }
  }

  terminate() {
    if (!this.port) return;
    const port = this.port;
    this.port = null;
    // Work still running ends as it does in this thread when its model is freed: an AbortError.
    const stopped = abortError('the request (its model was freed)');
    for (const entry of this.pending.values()) entry.reject(stopped);
    this.pending.clear();
    this.failure ??= new NeedleError('this model was freed', STATUS.ARGUMENT);
    port.close();
  }
}

/**
 * The agent of agent.js in a model's worker, driven from this thread: the
 * same methods as Needle; reset() and free() return promises, and
 * prefillCount / renderedTools() answer from the state of the last reply.
 */
export class WorkerNeedle {
  /** options: tools, system, sampling (see Needle.create); ownsModel: free() also frees the model. */
  static async create(model, { tools = [], system = '', ownsModel = false, toolEmbeddings, ...rest } = {}) {
    checkAgentInput(tools, system);
    const declarations = tools.map(declaration);
    declarations.forEach((decl, i) => jsonText(decl, refuse(`tools[${i}]`))); // as the worker will, before they are cloned
    const id = model.nextId++;
    const agent = new WorkerNeedle(model, id, toolFunctions(tools), ownsModel);
    agent.update(await model.send(request.agent(id, id, 'create', [{ tools: declarations, system, toolEmbeddings, sampling: samplingOf(rest) }])));
    return agent;
  }

  constructor(model, id, functions, ownsModel) {
    this.model = model;
    this.id = id;
    this.functions = functions;
    this.ownsModel = ownsModel;
    this.freed = false;
    this.state = { prefillCount: 0, renderedTools: [] };
  }

  update({ result, prefillCount, renderedTools }) {
    this.state = { prefillCount, renderedTools };
    return result;
  }

  /** One agent request; pieces go to onToken until the signal aborts. */
  async send(method, args, { signal, onToken } = {}) {
    if (this.freed) throw new NeedleError('this agent was freed', STATUS.ARGUMENT);
    const id = this.model.nextId++;
    const reply = this.model.send(request.agent(id, this.id, method, args), [], {
      signal,
      // Pieces already in flight when the caller aborted are dropped.
      onMessage: (m) => { if (m.type === 'piece' && !signal?.aborted) onToken?.({ kind: m.kind, text: m.text }); },
    });
    if (signal?.aborted) this.model.port?.post(request.abort(id));
    return this.update(await reply);
  }

  /** See Needle.complete; the envelope is computed in the worker. A tool
   *  result crosses as its JSON's value: what this thread would feed, and
   *  checked here (turnInput), so that it can be cloned. */
  async complete(text, { signal, onToken, ...options } = {}) {
    const { turn, input } = turnInput(text, options.kind);
    const value = typeof text === 'string' && turn === 'query' ? text : JSON.parse(input);
    return this.send('complete', [value, { ...options, kind: turn }], { signal, onToken });
  }

  /** See runTools: the worker returns each envelope, the JS tools run here. */
  run(query, options) { return runTools(this, this.functions, query, options); }

  /** See Needle.extract. */
  extract(text, schema, { signal, onToken, ...options } = {}) {
    return this.send('extract', [text, schema, options], { signal, onToken });
  }

  renderedTools() { return structuredClone(this.state.renderedTools); }

  /** See Needle.toolEmbeddings (a promise here). */
  toolEmbeddings() { return this.send('embeddings', []); }

  get prefillCount() { return this.state.prefillCount; }

  async reset() { await this.send('reset', []); }

  /** Releases the agent in the worker, and the model too when it owns it. */
  async free() {
    if (this.freed) return;
    try {
      if (this.model.port) await this.send('free', []);
    } finally {
      this.freed = true;
      if (this.ownsModel) await this.model.free();
    }
  }
}
