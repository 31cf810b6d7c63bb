// The agent API: text in, a valid tool call out (spec section 8). A thin
// wrapper of the engine's needle_agent_*: turns, grammar, confidence and
// retrieval all run in C; this file marshals strings and runs JS tools.
//
//   const agent = await Needle.create({ model: 'needle2.cact', tools: [setLight], system: 'date: 2026-07-21' });
//   const r = await agent.complete('dim the kitchen to 10');   // the envelope
//
// This Needle runs in the calling thread over a Model. The worker imports it
// too (js/worker.js), so it imports no index.js or client.js: the package's
// Needle (index.js) extends it to run in a Web Worker by default in pages,
// and over a worker model it becomes a WorkerNeedle (client.js).

import { NeedleError, STATUS, nextTask } from './engine.js';
import { abortError } from './errors.js';
import { checkInteger, checkKeys, checkSampling } from './options.js';
import { parseExactJson } from './exact-json.js';
import { Model } from './model.js';
import { LOAD_OPTIONS, DEMO_ARCHIVE_URL } from './load.js';
import { demoWarnings } from './demo-model.js';
import { jsonText, refuse, shown } from './json-text.js';

const TURN = { auto: 0, query: 1, tool_result: 2 };
const STEP = { done: 0, reasoning: 1, call: 2, marker: 3, prefill: 4, failed: -1 };
const PIECE_BYTES = 256;


/** Attaches a schema to a JS function so an agent can declare and run it.
 *  schema: { name?, description?, parameters } or a bare JSON Schema. */
export function tool(fn, schema = {}) {
  const declared = schema.parameters ? schema : { parameters: schema };
  const description = declared.description ?? '';
  fn.tool = {
    name: declared.name ?? fn.name,
    ...(description ? { description } : {}),
    parameters: declared.parameters,
    ...(declared.triggers ? { triggers: declared.triggers } : {}),
  };
  return fn;
}

/** A tools entry as its plain JSON declaration (what crosses to a worker). */
export function declaration(entry) {
  if (typeof entry === 'function') {
    if (!entry.tool) throw new NeedleError(`tool function ${entry.name || '(anonymous)'} has no schema: wrap it with tool(fn, schema)`, STATUS.ARGUMENT);
    return entry.tool;
  }
  return entry;
}

/** create()'s tools and system, checked before anything is loaded or sent to a worker. */
export function checkAgentInput(tools, system) {
  if (!Array.isArray(tools)) {
    throw new NeedleError(`option tools is ${shown(tools)}: must be an array of tool declarations or functions made with tool()`, STATUS.ARGUMENT);
  }
  if (typeof system !== 'string') throw new NeedleError(`option system is ${shown(system)}: must be a string`, STATUS.ARGUMENT);
}


/** Needle 3's tool triggers (needle3-engine.md section 4), per declaration: its
 *  "triggers" patterns (an OpenAI wrapper's function's too) as the makers'
 *  engine reads them, ECMAScript regular expressions matched case-insensitively
 *  against the request; a pattern that does not compile is left out, as there. */
export function triggersOf(declarations) {
  return declarations.map((decl) => {
    const inner = decl?.type === 'function' && decl.function && typeof decl.function === 'object' ? decl.function : decl;
    const patterns = Array.isArray(inner?.triggers) ? inner.triggers.filter((p) => typeof p === 'string') : [];
    return patterns.flatMap((p) => {
      try { return [new RegExp(p, 'i')]; } catch { return []; }
    });
  });
}

/** name -> JS function of the tools made with tool(). */
export function toolFunctions(tools) {
  return new Map(tools.filter((t) => typeof t === 'function').map((fn) => [fn.tool?.name, fn]));
}

/** The options Needle.create passes on to the engine's decoder: the
 *  sampler's, exact (f32 numerics instead of the default fast mode) and
 *  largeIntegers (how envelopes hold integers beyond 2^53: 'number', 'bigint' or 'string'). */
const CREATE_OPTIONS = ['model', 'tools', 'system', 'toolEmbeddings', 'worker', 'load',
  'temperature', 'topK', 'topP', 'minP', 'repetitionPenalty', 'seed', 'exact', 'largeIntegers', 'requireCall'];
const SAMPLING_OPTIONS = ['temperature', 'topK', 'topP', 'minP', 'repetitionPenalty', 'seed'];

/** The agent's sampling options out of the rest of create()'s, checked. */
export function samplingOf(options) {
  checkKeys('Needle.create()', options, CREATE_OPTIONS);
  const { temperature, topK, topP, minP, repetitionPenalty, seed, exact, largeIntegers, requireCall } = options;
  checkSampling({ temperature, topK, topP, minP, repetitionPenalty, seed });
  if (requireCall !== undefined && typeof requireCall !== 'boolean') {
    throw new NeedleError(`option requireCall is ${JSON.stringify(requireCall)}: must be true or false`, STATUS.ARGUMENT);
  }
  if (largeIntegers !== undefined && !['number', 'bigint', 'string'].includes(largeIntegers)) {
    throw new NeedleError(`option largeIntegers is ${JSON.stringify(largeIntegers)}: must be "number", "bigint" or "string"`, STATUS.ARGUMENT);
  }
  const out = { temperature, topK, topP, minP, repetitionPenalty, seed, exact, largeIntegers, requireCall };
  for (const key of Object.keys(out)) if (out[key] === undefined) delete out[key];
  return out;
}

/**
 * Needle.run over any agent with complete(): completes a query, runs the JS
 * tool functions it calls (here, in the caller's thread) and feeds their
 * results back until the model responds (or maxTurns). Returns the last
 * envelope with `results`: [{ name, arguments, result }] of every call run.
 */
export async function runTools(agent, functions, query, { maxTurns = 4, ...options } = {}) {
  const results = [];
  let envelope = await agent.complete(query, { ...options, kind: 'query' });
  for (let turn = 1; envelope.success && envelope.type === 'call' && envelope.function_calls.length; turn++) {
    if (turn > maxTurns) break;
    const outputs = [];
    for (const call of envelope.function_calls) {
      const fn = functions.get(call.name);
      if (!fn) throw new NeedleError(`the model called "${call.name}", which has no JS function`, 'UNKNOWN_TOOL');
      let result;
      try {
        result = await fn(call.arguments);
      } catch (cause) {
        // The conversation keeps the call; the caller may complete() a result itself.
        const error = new NeedleError(`tool "${call.name}" threw: ${cause?.message ?? cause}`, 'TOOL_FAILED');
        error.cause = cause;
        throw error;
      }
      outputs.push(result ?? null);
      results.push({ name: call.name, arguments: call.arguments, result: result ?? null });
    }
    // One call feeds its result back; several feed the array of results in call order.
    envelope = await agent.complete(outputs.length === 1 ? outputs[0] : outputs, { ...options, kind: 'tool_result' });
  }
  return { ...envelope, results };
}

/** A turn's kind ('query' or 'tool_result') and the text it feeds: a query
 *  as it is; a tool result (or a query that is no string) as its JSON. */
export function turnInput(text, kind = 'auto') {
  if (!Object.hasOwn(TURN, kind)) {
    throw new NeedleError(`option kind is ${JSON.stringify(kind)}: must be "auto", "query" or "tool_result"`, STATUS.ARGUMENT);
  }
  // 'auto': a string is a query, any other value a tool result (index.d.ts).
  const turn = kind === 'auto' ? (typeof text === 'string' ? 'query' : 'tool_result') : kind;
  const input = typeof text === 'string' && turn === 'query' ? text
    : jsonText(text, refuse(turn === 'query' ? 'the query' : 'the tool result'));
  return { turn, input };
}

const COMPLETE_OPTIONS = ['maxNewTokens', 'signal', 'kind', 'onToken', ...SAMPLING_OPTIONS];

/** The one tool an extraction declares, its call required: its arguments are the answer. */
export function extractionTool(schema, { name = 'extract', description = 'Extract the fields from the text.' } = {}) {
  return { name, description, parameters: schema };
}

export class Needle {
  /** options: model (Model, or a source loaded in this thread with options.load),
   *  tools, system, sampling (temperature, topK, topP, minP, repetitionPenalty, seed, exact),
   *  and toolEmbeddings (what toolEmbeddings() returned earlier: reused when neither
   *  the archive nor the tools changed, else recomputed). */
  static async create({ model, tools = [], system = '', load, toolEmbeddings, ...sampling } = {}) {
    checkAgentInput(tools, system);
    const owned = !(model instanceof Model);
    checkKeys('the load option of Needle.create()', load, LOAD_OPTIONS);
    const loaded = owned ? await Model.load(model ?? DEMO_ARCHIVE_URL, load) : model;
    try {
      const agent = new this(loaded, tools, system, samplingOf(sampling));
      agent.ownsModel = owned;
      agent.init(toolEmbeddings);
      return agent;
    } catch (error) {
      if (owned) loaded.free();
      throw error;
    }
  }

  constructor(model, tools, system, sampling) {
    this.model = model;
    this.engine = model.engine;
    this.functions = toolFunctions(tools);
    this.declarations = tools.map(declaration);
    // Checked first: the demo model's warnings below read every declaration too.
    this.toolTexts = this.declarations.map((decl, i) => jsonText(decl, refuse(`tools[${i}]`)));
    this.triggers = model.geometry('generation') === 3 ? triggersOf(this.declarations) : [];
    this.system = system;
    this.sampling = sampling;
    this.ownsModel = false;
    this.busy = false;
    const { engine } = this;
    model.live();
    this.handle = engine.x.needle_agent_new(model.handle, engine.err);
    if (!this.handle) throw engine.lastError(STATUS.NOMEM);
    this.piece = engine.malloc(PIECE_BYTES);
    this.pieceLength = engine.malloc(8);
    // Before any tool is added the fingerprint is the archive's alone: is it the demo model?
    engine.x.needle_agent_fingerprint(this.handle, this.piece);
    this.warnings = demoWarnings(engine.readString(this.piece, 16), this.declarations);
    model.dependents.add(this); // model.free() frees this agent first
  }

  /** Throws once the agent (or its model) was freed. */
  live() {
    if (!this.handle) throw new NeedleError('this agent was freed (or its model was)', STATUS.ARGUMENT);
  }

  init(saved) {
    const { engine } = this;
    try {
      for (const text of this.toolTexts) {
        engine.withString(text, (ptr, len) => engine.check(engine.x.needle_agent_add_tool(this.handle, ptr, len, engine.err)));
      }
      this.toolEmbeddingsReused = !!saved && this.useToolEmbeddings(saved);
      const { temperature, topK, topP, minP, repetitionPenalty, seed } = checkSampling(this.sampling);
      engine.x.needle_agent_exact(this.handle, this.sampling.exact ? 1 : 0);
      // requireCall: the grammar's call array cannot close empty (fixed at init, as the tools are).
      if (this.sampling.requireCall) engine.x.needle_agent_require_call(this.handle, 1);
      engine.x.needle_agent_set_sampling(this.handle, temperature, topK, topP, minP, repetitionPenalty, seed >>> 0);
      engine.withString(this.system, (ptr, len) => engine.check(engine.x.needle_agent_init(this.handle, ptr, len, engine.err)));
    } catch (error) {
      this.free();
      throw error;
    }
  }

  /** Throws unless the agent is free and idle: one turn at a time. */
  claim(what) {
    this.live();
    if (this.busy) throw new NeedleError(`cannot ${what} while a turn is running: await it or abort it first`, STATUS.ARGUMENT);
  }

  /**
   * Runs one turn and returns the envelope. text: a query, or (after a call)
   * a tool result (any JSON value). options: maxNewTokens, signal, kind
   * ('query' | 'tool_result'), onToken({ kind: 'reasoning'|'call'|'marker', text }).
   */
  async complete(text, options = {}) {
    checkKeys('complete()', options, COMPLETE_OPTIONS);
    const { maxNewTokens = 256, signal, kind = 'auto', onToken } = options;
    this.claim('complete');
    const { engine } = this;
    const { turn, input } = turnInput(text, kind);
    checkInteger('maxNewTokens', maxNewTokens, { min: 1, max: 1 << 20 });
    this.restartSampler(options);
    if (signal?.aborted) throw abortError('the turn', signal);
    if (turn === 'query') this.trigger(input);
    const status = engine.withString(input, (ptr, len) =>
      engine.x.needle_agent_begin(this.handle, ptr, len, TURN[turn], maxNewTokens, engine.err));
    if (status !== STATUS.OK) return this.warned(failedEnvelope(engine.lastError(status)));
    this.busy = true;
    try {
      for (;;) {
        if (!this.handle) throw abortError('the turn (its agent or model was freed)');
        if (signal?.aborted) throw abortError('the turn', signal); // the catch below undoes it
        const step = engine.x.needle_agent_step(this.handle, this.piece, PIECE_BYTES, this.pieceLength);
        if (step === STEP.done || step === STEP.failed) break;
        const length = new DataView(engine.memory.buffer).getUint32(this.pieceLength, true);
        const piece = engine.readString(this.piece, length);
        if (onToken && piece) onToken({ kind: step === STEP.reasoning ? 'reasoning' : step === STEP.call ? 'call' : 'marker', text: piece });
        await nextTask(); // let abort signals, worker messages and UI events in
      }
    } catch (error) {
      if (this.handle) engine.x.needle_agent_abort(this.handle); // aborted, or an onToken callback threw: undo the turn
      throw error;
    } finally {
      this.busy = false;
    }
    return this.warned(this.envelope());
  }

  /** Tells the engine which tools' triggers match the request (Needle 3): the
   *  engine acts on them in a user turn with no negation cue. */
  trigger(request) {
    const matched = this.triggers.flatMap((patterns, i) => (patterns.some((re) => re.test(request)) ? [i] : []));
    if (!matched.length) return;
    const { engine } = this;
    const ptr = engine.malloc(4 * matched.length);
    try {
      new Uint32Array(engine.memory.buffer, ptr, matched.length).set(matched);
      engine.check(engine.x.needle_agent_trigger(this.handle, ptr, matched.length, engine.err));
    } finally {
      engine.x.free(ptr);
    }
  }

  /** An envelope with the agent's warnings (demo-model.js), when it has any. */
  warned(envelope) {
    return this.warnings.length ? { ...envelope, warnings: [...this.warnings] } : envelope;
  }

  /** Sampling options given to a turn restart the sampler for it from the
   *  agent's options overridden by them, so a turn with a seed samples the
   *  same tokens whatever turns came before; the next turn without any
   *  restarts the agent's own. A turn with none after one with none goes on
   *  with the running sampler, as before. */
  restartSampler(options) {
    const given = Object.fromEntries(SAMPLING_OPTIONS.filter((k) => options[k] !== undefined).map((k) => [k, options[k]]));
    const any = Object.keys(given).length > 0;
    if (!any && !this.turnSampled) return;
    const { temperature, topK, topP, minP, repetitionPenalty, seed } = checkSampling({ ...this.sampling, ...given });
    this.engine.x.needle_agent_set_sampling(this.handle, temperature, topK, topP, minP, repetitionPenalty, seed >>> 0);
    this.turnSampled = any;
  }

  /** The last turn's envelope; integer arguments keep every digit (largeIntegers). */
  envelope() {
    this.live();
    return parseExactJson(this.readText(this.engine.x.needle_agent_envelope), this.sampling.largeIntegers);
  }

  /** Text from an engine call that writes it: sized by a first call with no buffer. */
  readText(write) {
    const { engine } = this;
    const n = write(this.handle, 0, 0);
    const out = engine.malloc(n + 1);
    try {
      write(this.handle, out, n + 1);
      return engine.readString(out, n);
    } finally {
      engine.x.free(out);
    }
  }

  /** See runTools: the JS tools run in this thread. */
  run(query, options) { return runTools(this, this.functions, query, options); }

  /** One-tool extraction: the arguments the model fills for `schema` from text. */
  async extract(text, schema, { name, description, ...options } = {}) {
    checkKeys('extract()', options, COMPLETE_OPTIONS.filter((k) => k !== 'kind'));
    this.live();
    const extractor = new Needle(this.model, [extractionTool(schema, { name, description })], this.system, this.sampling);
    try {
      this.engine.x.needle_agent_require_call(extractor.handle, 1); // an extraction always calls its tool
      extractor.init();
      const envelope = await extractor.complete(text, { ...options, kind: 'query' });
      if (!envelope.success) throw new NeedleError(envelope.error, envelope.error_code);
      return envelope.function_calls[0].arguments; // the grammar required the call
    } finally {
      extractor.free();
    }
  }

  /** The tools JSON rendered into the prompt now (5 at most with retrieval). */
  /** The retrieval embeddings of the tools (more than 5 tools), to save and pass
   *  back as Needle.create({ toolEmbeddings }); null when there are none. */
  toolEmbeddings() {
    this.live();
    const { engine } = this;
    const print = engine.malloc(17);
    try {
      const dim = engine.x.needle_agent_tool_embeddings(this.handle, 0, 0);
      if (!dim) return null;
      const count = dim * this.declarations.length;
      const out = engine.malloc(count * 4);
      try {
        engine.x.needle_agent_tool_embeddings(this.handle, out, count);
        engine.x.needle_agent_fingerprint(this.handle, print);
        return { fingerprint: engine.readString(print, 16), dim, vectors: engine.f32(out, count).slice() };
      } finally {
        engine.x.free(out);
      }
    } finally {
      engine.x.free(print);
    }
  }

  /** Offers saved embeddings; false (and nothing used) when they are stale. */
  useToolEmbeddings({ fingerprint, vectors } = {}) {
    const { engine } = this;
    if (typeof fingerprint !== 'string' || !/^[0-9a-f]{16}$/.test(fingerprint)) {
      throw new NeedleError('toolEmbeddings.fingerprint must be the 16 hex digits toolEmbeddings() returned', STATUS.ARGUMENT);
    }
    if (!vectors || typeof vectors.length !== 'number') {
      throw new NeedleError('toolEmbeddings.vectors must be the array toolEmbeddings() returned', STATUS.ARGUMENT);
    }
    const data = Float32Array.from(vectors);
    const bad = data.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) throw new NeedleError(`toolEmbeddings.vectors[${bad}] is ${vectors[bad]}, not a finite number`, STATUS.ARGUMENT);
    const ptr = engine.copyIn(new Uint8Array(data.buffer));
    try {
      return engine.withString(`${fingerprint}\0`, (print) =>
        engine.x.needle_agent_use_tool_embeddings(this.handle, print, ptr, data.length, engine.err) === STATUS.OK);
    } finally {
      engine.x.free(ptr);
    }
  }

  renderedTools() { this.live(); return JSON.parse(this.readText(this.engine.x.needle_agent_rendered_tools)); }

  /** Tokens the last turn prefilled. */
  get prefillCount() { this.live(); return this.engine.x.needle_agent_prefill_count(this.handle); }

  reset() {
    this.claim('reset');
    this.engine.check(this.engine.x.needle_agent_reset(this.handle, this.engine.err));
  }

  /** Releases the agent, and the model too when create() loaded it. */
  free() {
    if (!this.handle) return;
    this.engine.x.needle_agent_free(this.handle);
    this.engine.x.free(this.piece);
    this.engine.x.free(this.pieceLength);
    this.handle = 0;
    this.model.dependents.delete(this);
    if (this.ownsModel) this.model.free();
  }
}

function failedEnvelope(error) {
  return {
    type: 'call', success: false, error: error.message, error_code: error.code, function_calls: [],
    reasoning: '', confidence: null, prefill_tps: 0, decode_tps: 0, peak_ram_mb: 0,
  };
}
