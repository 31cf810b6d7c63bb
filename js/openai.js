// openai.js: OpenAI's chat.completions shapes over the agent, for apps
// written against cloud models.
//
//   import { openai } from 'needle-wasm';
//   const client = await openai();   // the demo model; or { model: Model | worker model | source }
//   const r = await client.chat.completions.create({ messages, tools, tool_choice: 'auto' });
//   r.choices[0].message.tool_calls   // [{ id, type: 'function', function: { name, arguments } }]
//   r.choices[0].message.reasoning_content // the model's reasoning; content: null when it calls
//   await client.free();              // frees only what openai() loaded
//
// response_format { type: 'json_schema' } answers with the JSON of an
// extraction (agent.js extract) as the content. An answer carries a
// top-level `warnings` when its agent's envelope does (the demo model given
// tools it was not trained on: demo-model.js).
//
// Each distinct system text, tool set and tool_choice gets its own agent
// (the tools block is prefilled once, then reused), the last few kept.
// Needle cannot be told what it said before: an earlier assistant turn of
// the messages is regenerated and must come out as written, which it does
// when the request keeps the options that produced it, as every turn
// restarts the sampler from the request's seed. The conversation an agent
// holds is kept, so the usual next request (the same messages plus tool
// results) feeds only its new turn. Requests run one at a time: one engine.

import { NeedleError, STATUS, abortError } from './errors.js';
import { Model } from './model.js';
import { Needle } from './agent.js';
import { checkInteger, checkKeys } from './options.js';
import { loadModel } from './load-model.js';
import { planRequest, invalid } from './openai-request.js';
import { TurnChunks, foldChunks } from './openai-chunks.js';

const OPTIONS = ['model', 'name', 'worker', 'load', 'maxAgents'];

/**
 * An OpenAI-shaped client over a model. options: model (a Model, a worker
 * model, or a source loadModel loads, by default the demo archive), name
 * (the model name answers carry; default: the archive's file name), worker
 * and load (for a source, as in Needle.create), maxAgents (agents kept, 4).
 */
export async function openai(options = {}) {
  checkKeys('openai()', options, OPTIONS);
  const { model, name, worker, load = {}, maxAgents = 4 } = options;
  checkInteger('maxAgents', maxAgents, { min: 1, max: 64 });
  const given = model instanceof Model || typeof model?.createAgent === 'function';
  let loaded = model;
  if (!given) {
    loaded = await loadModel(model, { ...load, ...(worker === undefined ? {} : { worker }) });
  }
  return new NeedleOpenAI(loaded, { name: name ?? nameOf(loaded), owned: !given, maxAgents });
}

/** The archive's file name without .cact ('demo' for the demo model). */
function nameOf(model) {
  const file = String(model.source?.label ?? '').split(/[/\\]/).pop().replace(/\.cact$/i, '');
  return file || 'needle';
}

/** Calls as compared across turns: names and arguments, key order aside. */
function callsKey(calls) {
  const sorted = (v) => (v && typeof v === 'object' && !Array.isArray(v)
    ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : Array.isArray(v) ? v.map(sorted) : v);
  return JSON.stringify(calls.map((c) => [c.name, sorted(c.arguments)]), (_, v) => (typeof v === 'bigint' ? String(v) : v));
}

const exchangeKey = (input, calls) => JSON.stringify([input.kind, input.value]) + callsKey(calls);

class NeedleOpenAI {
  constructor(model, { name, owned, maxAgents }) {
    this.model = model;
    this.name = name;
    this.owned = owned;
    this.maxAgents = maxAgents;
    this.agents = new Map(); // key of the agent's config -> { agent, history, settings }, oldest first
    this.queue = Promise.resolve();
    this.created = Math.floor(Date.now() / 1000);
    this.chat = { completions: { create: (params) => this.create(params) } };
    this.models = { list: async () => ({ object: 'list', data: [this.modelCard()] }) };
  }

  modelCard() { return { id: this.name, object: 'model', created: this.created, owned_by: 'needle-wasm' }; }

  /** Runs fn after every request before it: one engine, one turn at a time. */
  exclusive(fn) {
    const run = this.queue.then(fn);
    this.queue = run.catch(() => {});
    return run;
  }

  /** chat.completions.create: a chat.completion, or with stream: true an async iterable of chunks. */
  async create(params) {
    if (this.freed) throw new NeedleError('this client was freed', STATUS.ARGUMENT);
    const plan = planRequest(params);
    const stream = new ChunkStream();
    const signal = stream.linkSignal(plan.signal);
    this.exclusive(() => this.generate(plan, stream, signal)).then(() => stream.end(), (error) => stream.end(error));
    if (!plan.stream) {
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      return foldChunks(chunks);
    }
    await stream.started; // errors before the answer starts (a bad conversation, say) reject create()
    return stream;
  }

  /** Whether the engine post-processes the model's calls after a turn (Needle 3). */
  async postprocessed() {
    this.generation ??= (await this.model.inspect()).geometry.generation;
    return this.generation === 3;
  }

  /** The agent of one config ({ system, tools, requireCall }), created on first use. */
  async agentFor(config) {
    const key = JSON.stringify(config);
    let entry = this.agents.get(key);
    if (entry) this.agents.delete(key); // re-inserted below as the newest
    else {
      while (this.agents.size >= this.maxAgents) {
        const [oldest, old] = this.agents.entries().next().value;
        this.agents.delete(oldest);
        await old.agent.free();
      }
      const options = { tools: config.tools, system: config.system, requireCall: config.requireCall };
      const agent = this.model instanceof Model ? await Needle.create({ model: this.model, ...options })
        : await this.model.createAgent(options); // a worker model: the agent lives in its worker
      entry = { agent, history: null, settings: null };
    }
    this.agents.set(key, entry);
    return entry;
  }

  /** One request: the earlier turns the agent does not hold yet, then the answer, as chunks. */
  async generate(plan, stream, signal) {
    if (signal.aborted) throw abortError('the request', signal);
    const entry = await this.agentFor(plan.agent);
    const { agent } = entry;
    const settings = JSON.stringify([plan.sampling, plan.maxNewTokens]);
    const keys = plan.turns.map((t) => exchangeKey(t.input, t.reply.calls));
    // The exchanges the agent holds from the last request, when they begin this one.
    const holds = entry.history && entry.settings === settings && entry.history.every((k, i) => k === keys[i]);
    const held = holds ? entry.history.length : 0;
    entry.history = null; // unknown until this request succeeds
    if (!held) await agent.reset();
    let promptTokens = 0;
    for (const { input, reply } of plan.turns.slice(held)) {
      const envelope = await this.turn(agent, input, plan, signal);
      promptTokens += agent.prefillCount;
      if (callsKey(envelope.function_calls) !== callsKey(reply.calls)) {
        throw invalid(reply.at, `the model's turn here now calls ${callsKey(envelope.function_calls)}, not what the message says: ` +
          'Needle regenerates earlier assistant turns (it cannot be told what it said), so they must come from this model ' +
          'with the same tools, tool_choice, temperature, top_p, seed and max_tokens');
      }
    }
    // A whole answer is folded from the same chunks, usage included.
    const chunks = new TurnChunks({
      model: this.name, includeUsage: plan.includeUsage || !plan.stream, maxNewTokens: plan.maxNewTokens, extraction: plan.extraction,
      callsAtEnd: await this.postprocessed(),
    });
    stream.push(chunks.start());
    const envelope = await this.turn(agent, plan.final, plan, signal, (piece) => stream.push(chunks.piece(piece)));
    promptTokens += agent.prefillCount;
    stream.push(chunks.finish({ promptTokens, warnings: envelope.warnings, calls: envelope.function_calls }));
    entry.history = [...keys, exchangeKey(plan.final, envelope.function_calls)];
    entry.settings = settings;
  }

  /** One agent turn; a turn the model could not finish is an error here. */
  async turn(agent, input, plan, signal, onToken) {
    const envelope = await agent.complete(input.value, {
      kind: input.kind, maxNewTokens: plan.maxNewTokens, signal, onToken, ...plan.sampling,
    });
    if (envelope.success) return envelope;
    if (envelope.error_code === STATUS.ABORTED) throw abortError('the request', signal);
    const budget = envelope.error_code === STATUS.CONTEXT && /max_new_tokens/.test(envelope.error);
    const error = new NeedleError(budget ? `option max_tokens is ${plan.maxNewTokens}: too small for the call (${envelope.error})`
      : `${input.at}: ${envelope.error}`, envelope.error_code);
    error.param = budget ? 'max_tokens' : input.at;
    throw error;
  }

  /** Frees the agents, and the model when openai() loaded it; waits for the request running. */
  async free() {
    if (this.freed) return;
    this.freed = true;
    await this.queue;
    for (const { agent } of this.agents.values()) await agent.free();
    this.agents.clear();
    if (this.owned) await this.model.free();
  }
}

/**
 * The chunks of one request as an async iterable, filled while the request
 * runs whether or not anyone reads yet. Stopping the iteration early (break)
 * aborts the request. `started` settles with the first chunk or the error.
 */
class ChunkStream {
  constructor() {
    this.items = [];
    this.done = false;
    this.error = null;
    this.wake = null;
    this.controller = new AbortController();
    this.started = new Promise((resolve, reject) => { this.begin = { resolve, reject }; });
    this.started.catch(() => {}); // read by create() only when streaming
  }

  /** The request's signal, aborted by the caller's or by an early stop. */
  linkSignal(signal) {
    if (signal?.aborted) this.controller.abort(signal.reason);
    else signal?.addEventListener('abort', () => this.controller.abort(signal.reason), { once: true });
    return this.controller.signal;
  }

  push(chunks) {
    this.items.push(...chunks);
    this.begin.resolve();
    this.wake?.();
  }

  end(error = null) {
    this.done = true;
    this.error = error;
    if (error) this.begin.reject(error);
    else this.begin.resolve();
    this.wake?.();
  }

  async *[Symbol.asyncIterator]() {
    try {
      for (;;) {
        if (this.items.length) {
          yield this.items.shift();
          continue;
        }
        if (this.done) {
          if (this.error) throw this.error;
          return;
        }
        await new Promise((resolve) => { this.wake = resolve; });
        this.wake = null;
      }
    } finally {
      if (!this.done) this.controller.abort(); // the reader stopped early: so does the model
    }
  }
}
