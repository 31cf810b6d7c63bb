// A loaded Needle model in this thread: the archive lives in wasm memory,
// every computation is the engine's. loadModel() in index.js builds one.

import { Engine, NeedleError, STATUS, nextTask } from './engine.js';
import { abortError } from './errors.js';
import { checkInteger, checkKeys, checkSampling } from './options.js';
import { streamArchive } from './load.js';
import { shown } from './json-text.js';

const SPECIAL = { pad: 0, eos: 1, bos: 2, unknown: 3 };
const LOAD_REPACK = 1; // NEEDLE_LOAD_REPACK in src/needle.h
const CONTRASTIVE_HEAD = 1; // needle_session_head's kind: needle_model_head_outputs floats of unit norm

const GENERATE_OPTIONS = ['maxTokens', 'raw', 'temperature', 'topK', 'topP', 'minP', 'repetitionPenalty', 'seed',
  'signal', 'exact'];

const TAG3 = [0x84, 0x2a, 0xe1, 0x05]; // a Needle 3 archive's first bytes (needle3-model.md section 10)

/** The engine variant an archive needs, from its first bytes: Needle 3
 *  archives run in the needle3 variant; anything else in the default one. */
export function variantForArchive(head) {
  return head.length >= 4 && TAG3.every((b, i) => head[i] === b) ? 'needle3' : undefined;
}

/** Token ids as the engine's int32 bytes. Each must be an integer in
 *  [0, vocabulary): Int32Array.from would wrap 2**32 + 5 to 5 silently. */
function tokenBytes(ids, vocabulary, what) {
  if (typeof ids === 'string' || !(Number.isSafeInteger(ids?.length) && ids.length >= 0)) {
    throw new NeedleError(`${what} takes an array of token ids, not ${shown(ids)}`, STATUS.ARGUMENT);
  }
  const out = new Int32Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (!Number.isInteger(id) || id < 0 || id >= vocabulary) {
      throw new NeedleError(`${what}: ids[${i}] is ${shown(id)}, not a token id (an integer from 0 to ${vocabulary - 1})`, STATUS.ARGUMENT);
    }
    out[i] = id;
  }
  return new Uint8Array(out.buffer);
}

export class Model {
  /** bytes: Uint8Array of a .cact archive; wasm and threads: Engine.create's. */
  static async fromBytes(bytes, { wasm, threads } = {}) {
    const engine = await Engine.create(wasm ?? variantForArchive(bytes), { threads });
    try {
      return Model.fromMemory(engine, engine.copyIn(bytes), bytes.length);
    } catch (error) {
      await engine.free(); // its thread workers, if any
      throw error;
    }
  }

  /** Streams a source into a new engine (js/load.js) and loads it; the
   *  engine and its thread workers are freed again when that fails. options:
   *  loadModel's (wasm, threads, onProgress, signal, cache, total). The
   *  model's `source` reports { size, label, fromCache, cacheError }. */
  static async load(source, options = {}) {
    let engine;
    const createEngine = async (head) => {
      engine = await Engine.create(options.wasm ?? variantForArchive(head), { threads: options.threads });
      return engine;
    };
    try {
      const { value: model, ...report } = await streamArchive(createEngine, source, options,
        (ptr, size) => Model.fromMemory(engine, ptr, size));
      model.source = report;
      return model;
    } catch (error) {
      await engine?.free();
      throw error;
    }
  }

  /** An archive already in engine memory at ptr (js/load.js streams it
   *  there); the model takes ownership of ptr, also when this throws. */
  static fromMemory(engine, ptr, size) {
    // NEEDLE_LOAD_REPACK: the engine owns these bytes and tiles the weights in
    // place for its integer kernels (they are no longer an archive afterwards).
    const handle = engine.x.needle_model_load_ex(ptr, size, LOAD_REPACK, engine.err);
    if (!handle) {
      const error = engine.lastError(STATUS.FORMAT);
      engine.x.free(ptr);
      throw error;
    }
    return new Model(engine, handle, ptr);
  }

  constructor(engine, handle, archive) {
    this.engine = engine;
    this.handle = handle;
    this.archive = archive;
    this.dependents = new Set(); // live sessions and agents: free() frees them first
    this.tokenizer = engine.x.needle_model_tokenizer(handle);
    this.vocabulary = this.geometry('vocabulary');
    this.ids = Object.fromEntries(
      Object.entries(SPECIAL).map(([name, which]) => [name, engine.x.needle_tokenizer_special(this.tokenizer, which)]),
    );
    this.ids.imEnd = this.pieceId('<|im_end|>');
  }

  /** Throws unless the model is loaded: every call after free() refuses. */
  live() {
    if (!this.handle) throw new NeedleError('this model was freed', STATUS.ARGUMENT);
  }

  geometry(field) {
    this.live();
    return this.engine.withString(`${field}\0`, (ptr) => this.engine.x.needle_model_geometry(this.handle, ptr));
  }

  /** Header fields and the tensor table, as `needle-wasm inspect` prints them. */
  inspect() {
    this.live();
    const { engine } = this;
    const fields = ['generation', 'tensorCount', 'codebookLength', 'kvWindow', 'kvBits', 'vocabulary', 'hidden',
      'queryHeads', 'kvHeads', 'layers', 'headDimension', 'maximumSequence', 'hadamardDimension',
      'lanes', 'engramSlots', 'engramSubDimension', 'engramTables', 'engramTaps', 'engramDilation',
      'orderCount', 'siteCount', 'ropeTheta'];
    // Needle 3 header fields (headDimension is then the q/k head width).
    if (this.geometry('generation') === 3) {
      fields.push('outVocabulary', 'vHeadDimension', 'slidingWindow', 'globalMaskLo', 'globalMaskHi',
        'qkvConvTaps', 'engramSeedHeads');
    }
    const geometry = Object.fromEntries(fields.map((f) => [f, this.geometry(f)]));
    const list = (name, count) => Array.from({ length: count }, (_, i) => this.geometry(`${name}[${i}]`));
    geometry.orders = list('orders', geometry.orderCount);
    geometry.sites = list('sites', geometry.siteCount);
    const cap = 512;
    const buf = engine.malloc(cap);
    try {
      const tensors = [];
      const count = engine.x.needle_model_tensor_count(this.handle);
      for (let i = 0; i < count; i++) {
        const n = engine.x.needle_model_tensor_json(this.handle, i, buf, cap);
        tensors.push(JSON.parse(engine.readString(buf, n)));
      }
      return { geometry, tensors };
    } finally {
      engine.x.free(buf);
    }
  }

  pieceId(text) {
    this.live();
    return this.engine.withString(text, (ptr, len) => this.engine.x.needle_tokenizer_piece_id(this.tokenizer, ptr, len));
  }

  /** Token ids of text (no BOS). */
  tokenize(text) {
    this.live();
    const { engine } = this;
    return engine.withString(text, (ptr, len) => {
      const countPtr = engine.malloc(8);
      try {
        let cap = len + 16;
        for (;;) {
          const ids = engine.malloc(cap * 4);
          try {
            const status = engine.x.needle_tokenize(this.tokenizer, ptr, len, ids, cap, countPtr, engine.err);
            const count = new DataView(engine.memory.buffer).getUint32(countPtr, true);
            if (status === STATUS.ARGUMENT && count > cap) { cap = count; continue; }
            engine.check(status);
            return Array.from(engine.i32(ids, count));
          } finally {
            engine.x.free(ids);
          }
        }
      } finally {
        engine.x.free(countPtr);
      }
    });
  }

  /** Text of ids (spec section 6 decoding). */
  detokenize(ids) {
    this.live();
    const { engine } = this;
    const idsPtr = engine.copyIn(tokenBytes(ids, this.vocabulary, 'detokenize()'));
    try {
      let cap = ids.length * 8 + 16;
      for (;;) {
        const out = engine.malloc(cap);
        try {
          const n = engine.x.needle_detokenize(this.tokenizer, idsPtr, ids.length, out, cap);
          if (n <= cap) return engine.readString(out, n);
          cap = n;
        } finally {
          engine.x.free(out);
        }
      }
    } finally {
      engine.x.free(idsPtr);
    }
  }

  /** A new session: { window, sinks, exact }. */
  session(options = {}) {
    this.live();
    return new Session(this, options);
  }

  /** Logits of the last position, or of every position with all: true. */
  logits(ids, { all = false, exact = false, window = 0, sinks = 0 } = {}) {
    const session = this.session({ exact, window, sinks });
    try {
      return session.feed(ids, { all });
    } finally {
      session.free();
    }
  }

  /** The contrastive (embedding) head's unit vector of text: BOS and its
   *  tokens in a fresh sequence, what tool retrieval compares. Throws
   *  STATUS.ARGUMENT when the archive has no such head (the released Needle 3
   *  has none). exact: the f32 numerics instead of the default fast mode. */
  embed(text, { exact = false } = {}) {
    const session = this.session({ exact });
    const { engine } = this;
    const width = engine.x.needle_model_head_outputs(this.handle, CONTRASTIVE_HEAD) || 1; // none: the call below says so
    const out = engine.malloc(width * 4);
    try {
      session.feed([this.ids.bos, ...this.tokenize(text)]);
      engine.check(engine.x.needle_session_head(session.handle, CONTRASTIVE_HEAD, out, engine.err));
      return Float32Array.from(new Float32Array(engine.memory.buffer, out, width));
    } finally {
      engine.x.free(out);
      session.free();
    }
  }

  /** The chat-format prompt ids of spec section 7 for one user query and no tools. */
  chatIds(prompt) {
    const text = `<|im_start|>user\n<tools>[]</tools>\n${prompt}<|im_end|>\n<|im_start|>assistant\n`;
    return [this.ids.bos, ...this.tokenize(text)];
  }

  /**
   * Streams generated pieces: for await (const { token, text } of model.generate(prompt, opts)).
   * opts: maxTokens, raw, temperature, topK, topP, minP, repetitionPenalty, seed, signal, exact.
   */
  async *generate(prompt, opts = {}) {
    checkKeys('generate()', opts, GENERATE_OPTIONS);
    const { maxTokens = 128, raw = false, signal, exact = false } = opts;
    const { temperature, topK, topP, minP, repetitionPenalty, seed } = checkSampling(opts);
    checkInteger('maxTokens', maxTokens, { min: 0, max: 1 << 20 });
    this.live();
    const { engine } = this;
    const promptIds = raw ? [this.ids.bos, ...this.tokenize(prompt)] : this.chatIds(prompt);
    const session = this.session({ exact });
    const sampler = engine.x.needle_sampler_new(this.vocabulary, temperature, topK, topP, minP,
      repetitionPenalty, seed);
    const decoderHandle = engine.x.needle_decoder_new(this.tokenizer);
    const textBuf = engine.malloc(256);
    const recent = [...promptIds];
    try {
      let logits = session.feed(promptIds)[0];
      for (let i = 0; i < maxTokens; i++) {
        if (signal?.aborted) throw abortError('generation', signal);
        const token = session.sample(sampler, logits, recent.slice(-64));
        if (token === this.ids.eos || token === this.ids.imEnd) break;
        recent.push(token);
        const n = engine.x.needle_decoder_push(decoderHandle, token, textBuf, 256);
        yield { token, text: engine.readString(textBuf, n) };
        logits = session.feed([token])[0];
        await nextTask(); // let abort signals and UI events in between tokens
      }
      const n = engine.x.needle_decoder_flush(decoderHandle, textBuf, 256);
      if (n) yield { token: -1, text: engine.readString(textBuf, n) };
    } finally {
      engine.x.free(textBuf);
      engine.x.needle_decoder_free(decoderHandle);
      engine.x.needle_sampler_free(sampler);
      session.free();
    }
  }

  /** Highest wasm linear memory size seen, in bytes. */
  get peakMemoryBytes() { this.engine.notePeak(); return this.engine.peakBytes; }

  /** { count, reason }: the threads the engine runs on (Engine.create). */
  get threads() { return this.engine.threads; }

  /** Frees the model and stops its engine's thread workers (each model
   *  has an engine of its own); the promise settles once they are gone.
   *  Sessions and agents still open on it are freed first, so they refuse
   *  every later call (a turn in progress ends with an AbortError). A second
   *  free() returns the first one's promise. */
  free() {
    if (this.freed) return this.freed;
    for (const dependent of [...this.dependents]) dependent.free();
    this.engine.x.needle_model_free(this.handle);
    this.engine.x.free(this.archive);
    this.handle = 0;
    this.freed = this.engine.free();
    return this.freed;
  }
}

/** KV cache and scratch of one conversation. */
export class Session {
  constructor(model, { window = 0, sinks = 0, exact = false } = {}) {
    this.model = model;
    const { engine } = model;
    this.handle = engine.x.needle_session_new(model.handle, window, sinks, exact ? 1 : 0, engine.err);
    if (!this.handle) throw engine.lastError(STATUS.NOMEM);
    model.dependents.add(this);
  }

  live() {
    if (!this.handle) throw new NeedleError('this session was freed (or its model was)', STATUS.ARGUMENT);
  }

  get position() { this.live(); return this.model.engine.x.needle_session_position(this.handle); }

  /** The CQ level indices of a cached K (which 0) or V (1) row, kvBits 2-4
   *  (needle_session_kv_levels): a Uint8Array of the padded head dim. */
  kvLevels(layer, head, position, which) {
    this.live();
    const { engine } = this.model;
    const n = engine.x.needle_session_kv_levels(this.handle, layer, head, position, which, 0, 0, engine.err);
    if (!n) throw engine.lastError(STATUS.ARGUMENT);
    const out = engine.malloc(n);
    try {
      engine.x.needle_session_kv_levels(this.handle, layer, head, position, which, out, n, engine.err);
      return engine.u8().slice(out, out + n);
    } finally {
      engine.x.free(out);
    }
  }

  /** Feeds ids; returns [Float32Array] of the last position, or one per position with all. */
  feed(ids, { all = false } = {}) {
    this.live();
    const { engine, vocabulary } = this.model;
    const rows = all ? ids.length : 1;
    const idsPtr = engine.copyIn(tokenBytes(ids, vocabulary, 'feed()'));
    const logitsPtr = engine.malloc(rows * vocabulary * 4);
    try {
      engine.check(engine.x.needle_session_feed(this.handle, idsPtr, ids.length, logitsPtr, all ? 1 : 0, engine.err));
      const out = [];
      for (let r = 0; r < rows; r++) out.push(engine.f32(logitsPtr + r * vocabulary * 4, vocabulary).slice());
      return out;
    } finally {
      engine.x.free(logitsPtr);
      engine.x.free(idsPtr);
    }
  }

  sample(sampler, logits, recent) {
    this.live();
    const { engine, vocabulary } = this.model;
    const logitsPtr = engine.malloc(vocabulary * 4);
    const recentPtr = engine.copyIn(new Uint8Array(Int32Array.from(recent).buffer));
    try {
      engine.f32(logitsPtr, vocabulary).set(logits);
      return engine.x.needle_sampler_sample(sampler, logitsPtr, recentPtr, recent.length);
    } finally {
      engine.x.free(recentPtr);
      engine.x.free(logitsPtr);
    }
  }

  free() {
    if (this.handle) this.model.engine.x.needle_session_free(this.handle);
    this.handle = 0;
    this.model.dependents.delete(this);
  }
}
