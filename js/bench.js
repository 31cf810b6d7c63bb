// bench.js: the numbers behind "how fast is it" (`needle-wasm bench`, `npm
// run bench`). On one archive (default: dist/released-random.cact, the released
// geometry with random weights) it measures decode and prefill tokens/s, the share of
// each forward stage in a decode step (needle_session_profile), GEMV GMAC/s of
// every CQ width against the dense f32 GEMV (needle_bench_gemv), the wasm
// memory high-water mark of a 1,000-token conversation, grammar-mask latency
// and the module sizes. A figure this host cannot measure is null and
// `host.nulls` says why. `quick` runs the same code on the tiny archive with
// minimal repetitions: a smoke run of seconds for the tests, not a measurement.
// Decode and prefill run on one thread (t1: the default single-threaded
// variant) and on two (t2: the threaded engine, see threadPlan in js/wasm.js), measured
// alternately in the same run; host.threads says what each ran. `needle3` holds
// the same decode, prefill, memory and command figures for a Needle 3 archive of the
// released geometry with random weights (written in memory; the tiny Needle 3
// when quick), on the needle3 and needle3-threads modules.

import { readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import { Model } from './model.js';
import { Needle } from './agent.js';
import { makeTestTokenizerBlob, syntheticPieces, CHAT_MARKERS3 } from './cact-writer.js';
import { writeCact3 } from './cact3-writer.js';
import { RELEASED3_HEADS, TINY3_GEOMETRY } from './cact3-format.js';
import { VARIANTS, chooseVariant, detectFeatures, defaultVariant, variantUrl } from './wasm.js';

const RELEASED = new URL('../dist/released-random.cact', import.meta.url);
const DEMO = new URL('../dist/demo.cact', import.meta.url);
const DEMO_TOOLS = new URL('../dist/demo-tools.json', import.meta.url);
const TINY = new URL('../dist/tiny.cact', import.meta.url);

export const CONTEXTS = [64, 256, 1000];
export const PROMPTS = [128, 512];
export const GEMV_SHAPES = [[512, 512], [256, 512], [8192, 512]];
export const GEMV_WIDTHS = { cq2: 2, cq3: 3, cq4: 4, ternary: 1 }; // needle_bench_gemv bits
export const STAGES = ['embedding', 'mhc', 'engram', 'attn_proj', 'attention', 'mlp_fwht', 'logits', 'other'];
const F32_BITS = 32;
const GEMV_GROUP = 128; // the released archive's weight group

const FULL = { decodeSteps: 16, decodeRuns: 3, prefillRuns: 3, gemvMs: 40, gemvRuns: 3, masks: 300, commands: 200, queries: 15,
  abortQueryTokens: 4000, abortTurns: 40, conversationTurns: 400 };
const QUICK = { decodeSteps: 2, decodeRuns: 1, prefillRuns: 1, gemvMs: 1, gemvRuns: 1, masks: 20, commands: 3, queries: 2,
  abortQueryTokens: 200, abortTurns: 4, conversationTurns: 24 };
// A command on the bench's archive: a query of about 40 tokens, a budget whose
// quarter (the agent's reasoning share) is 24 tokens, and one required call of
// a tool whose arguments are an enum and a boolean, so that random weights
// write a call of bounded length.
const COMMAND = {
  queryTokens: 40, maxNewTokens: 96,
  tools: [{ name: 'set_light', description: 'Turn the lights of a room on or off', parameters: { type: 'object',
    properties: { room: { type: 'string', enum: ['kitchen', 'hall', 'bedroom'] }, on: { type: 'boolean' } },
    required: ['room', 'on'], additionalProperties: false } }],
};

const TOOLS = JSON.stringify([
  { name: 'set_light', description: 'Turn a light on or off', parameters: { type: 'object',
    properties: { room: { type: 'string' }, on: { type: 'boolean' }, level: { type: 'integer' } },
    required: ['room', 'on'] } },
  { name: 'play_music', description: 'Play music', parameters: { type: 'object',
    properties: { genre: { type: 'string', enum: ['jazz', 'rock', 'classical'] }, volume: { type: 'number' } },
    required: ['genre'] } },
]);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
};
const round = (x, digits = 2) => (x === null ? null : Number(x.toFixed(digits)));

/** n token ids in [4, vocabulary): deterministic, no special tokens. */
function tokenIds(n, vocabulary, seed) {
  let s = seed >>> 0 || 1;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return 4 + (s % (vocabulary - 4));
  });
}

function rewind(session, position) {
  const { engine } = session.model;
  engine.check(engine.x.needle_session_rewind(session.handle, position, engine.err));
}

/** Runs the hot paths once: V8 first runs a new module's functions from a
 *  baseline compile and optimises them once they are hot, in the background. */
function warmUp(model) {
  const session = model.session();
  try {
    session.feed(tokenIds(32, model.vocabulary, 3));
    for (const id of tokenIds(8, model.vocabulary, 5)) session.feed([id]);
  } finally {
    session.free();
  }
}

/** Median decode tok/s after a prompt of `context` tokens; optionally the
 *  per-stage milliseconds of the timed steps. */
function decodeAt(model, context, opts, profile) {
  const session = model.session();
  try {
    session.feed(tokenIds(context, model.vocabulary, context));
    const steps = tokenIds(opts.decodeSteps, model.vocabulary, 7);
    const { x } = model.engine;
    const rates = [];
    for (let run = 0; run < opts.decodeRuns; run++) {
      if (profile) x.needle_session_set_profiling(session.handle, 1);
      const t0 = performance.now();
      for (const id of steps) session.feed([id]); // logits copied out, as generate() does
      rates.push(steps.length / ((performance.now() - t0) / 1000));
      if (profile) profile.push(readProfile(model, session));
      rewind(session, context);
    }
    return median(rates);
  } finally {
    session.free();
  }
}

function readProfile(model, session) {
  const { engine } = model;
  const n = STAGES.length;
  const ptr = engine.malloc(n * 8);
  try {
    const count = engine.x.needle_session_profile(session.handle, ptr, n);
    if (count !== n) throw new Error(`the engine reports ${count} stages, the bench knows ${n}`);
    return Array.from(new Float64Array(engine.memory.buffer, ptr, n));
  } finally {
    engine.x.free(ptr);
  }
}

function prefillTps(model, length, opts) {
  const ids = tokenIds(length, model.vocabulary, length + 1);
  const rates = [];
  for (let run = 0; run < opts.prefillRuns; run++) {
    const session = model.session();
    try {
      const t0 = performance.now();
      session.feed(ids);
      rates.push(length / ((performance.now() - t0) / 1000));
    } finally {
      session.free();
    }
  }
  return median(rates);
}

/** GMAC/s of one kernel and shape: calibrated to about opts.gemvMs per run. */
function gemvGmacs(engine, bits, rows, cols, opts) {
  const time = (iterations) => {
    const ms = engine.x.needle_bench_gemv(bits, rows, cols, GEMV_GROUP, iterations, engine.err);
    if (ms < 0) throw engine.lastError();
    return ms;
  };
  const once = Math.max(time(1), 1e-3); // also the warm-up
  const iterations = Math.max(1, Math.round(opts.gemvMs / once));
  const rates = [];
  for (let run = 0; run < opts.gemvRuns; run++) {
    rates.push((rows * cols * iterations) / (Math.max(time(iterations), 1e-3) * 1e6));
  }
  return median(rates);
}

function gemvTable(engine, opts) {
  const gmacs = {};
  for (const [name, bits] of [...Object.entries(GEMV_WIDTHS), ['f32', F32_BITS]]) {
    gmacs[name] = Object.fromEntries(GEMV_SHAPES.map(([r, c]) =>
      [`${r}x${c}`, round(gemvGmacs(engine, bits, r, c, opts), 3)]));
  }
  const speedup = {};
  for (const name of Object.keys(GEMV_WIDTHS)) {
    speedup[name] = Object.fromEntries(Object.keys(gmacs.f32).map((shape) =>
      [shape, round(gmacs[name][shape] / gmacs.f32[shape], 3)]));
  }
  return { gmacs, speedup };
}

/** Grammar-mask latency in microseconds over random logits on the grammar
 *  of tools (JSON text), or a reason. The grammar is new, so its first
 *  masks are walked and later ones are mostly remembered (grammar_cache.c). */
function maskLatency(model, opts, tools) {
  const { engine } = model;
  const { x } = engine;
  if (typeof x.needle_grammar_mask !== 'function') return { reason: 'needle_grammar_mask is not in the engine build' };
  const end = model.pieceId('</tool_call>');
  if (end < 0) return { reason: 'the archive tokenizer has no </tool_call> piece' };
  const grammar = engine.withString(tools, (ptr, len) => x.needle_grammar_new(model.tokenizer, ptr, len, end, engine.err));
  if (!grammar) return { reason: `needle_grammar_new failed: ${engine.lastError().message}` };
  const V = model.vocabulary;
  const logits = engine.malloc(V * 4);
  const random = new Float32Array(V);
  let seed = 12345;
  const times = [];
  try {
    while (times.length < opts.masks) {
      for (let i = 0; i < V; i++) { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; random[i] = seed / 2 ** 32; }
      engine.f32(logits, V).set(random);
      const t0 = performance.now();
      const allowed = x.needle_grammar_mask(grammar, logits);
      times.push((performance.now() - t0) * 1000);
      if (!allowed) return { reason: 'the grammar reached a dead end (a grammar bug)' };
      const view = engine.f32(logits, V);
      let best = 0;
      for (let i = 1; i < V; i++) if (view[i] > view[best]) best = i;
      engine.check(x.needle_grammar_accept(grammar, best, engine.err));
      if (x.needle_grammar_done(grammar)) x.needle_grammar_reset(grammar);
    }
  } finally {
    engine.x.free(logits);
    x.needle_grammar_free(grammar);
  }
  return { median: median(times), p99: quantile(times, 0.99), count: times.length };
}

const argmax = (v) => {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
};

/** Greedy decode tok/s at 64 tokens of context with the call grammar's mask on
 *  every step, and without it, measured in one run. */
function constrainedDecode(model, opts) {
  const { engine } = model;
  const { x } = engine;
  const end = model.pieceId('</tool_call>');
  const grammar = end < 0 ? 0
    : engine.withString(TOOLS, (ptr, len) => x.needle_grammar_new(model.tokenizer, ptr, len, end, engine.err));
  if (!grammar) return { reason: 'no call grammar for this archive' };
  const V = model.vocabulary;
  const logits = engine.malloc(V * 4);
  const session = model.session();
  const steps = opts.decodeSteps * 4;
  const run = (constrained) => {
    let row = session.feed(tokenIds(64, V, 64))[0];
    const t0 = performance.now();
    for (let i = 0; i < steps; i++) {
      let id = argmax(row);
      if (constrained) {
        engine.f32(logits, V).set(row);
        x.needle_grammar_mask(grammar, logits);
        id = argmax(engine.f32(logits, V));
        engine.check(x.needle_grammar_accept(grammar, id, engine.err));
        if (x.needle_grammar_done(grammar)) x.needle_grammar_reset(grammar);
      }
      row = session.feed([id])[0];
    }
    const tps = steps / ((performance.now() - t0) / 1000);
    rewind(session, 0);
    return tps;
  };
  try {
    return { constrained: run(true), unconstrained: run(false) };
  } finally {
    session.free();
    engine.x.free(logits);
    x.needle_grammar_free(grammar);
  }
}

/** Decode tok/s at 64 tokens of context of every other shipped, built variant
 *  this host runs (the same code without SIMD, for instance). */
async function otherVariants(bytes, chosen, features, opts) {
  const rates = {};
  for (const [name, variant] of Object.entries(VARIANTS)) {
    if (name === chosen || !variant.shipped || variant.threaded || variant.needle3) continue; // t2 measures the threaded one
    try { chooseVariant(features, name); } catch { continue; } // the host cannot run it
    if (!(await stat(variantUrl(name)).catch(() => null))) continue;
    const model = await Model.fromBytes(bytes, { wasm: name, threads: 1 });
    warmUp(model);
    // One short run: a scalar build is many times slower, and this is a comparison only.
    const short = { ...opts, decodeRuns: 1, decodeSteps: Math.min(opts.decodeSteps, 8) };
    try { rates[name] = round(decodeAt(model, 64, short)); } finally { await model.free(); }
  }
  return rates;
}

async function wasmSizes() {
  const sizes = {};
  for (const variant of Object.values(VARIANTS)) {
    const st = await stat(new URL(variant.file, variantUrl('simd'))).catch(() => null);
    if (variant.shipped && st) sizes[variant.file] = st.size;
  }
  return sizes;
}

function host(variant, features) {
  return {
    node: process.version, v8: process.versions.v8, cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.cpus().length, platform: `${os.platform()} ${os.arch()}`, threads_used: 1,
    load_average: os.loadavg().map((l) => round(l)), // other work on the machine skews every figure
    variant, features,
  };
}

/** Runs fn(model) for the t1 and the t2 model (t2 only when there is one),
 *  t1 first on even rounds and t2 first on odd ones, `rounds` times:
 *  { t1, t2 } medians. Alternating evens out what else the machine does. */
function alternate(t1, t2, rounds, fn) {
  const rates = { t1: [], t2: [] };
  for (let r = 0; r < rounds; r++) {
    const order = t2 ? (r % 2 ? [['t2', t2], ['t1', t1]] : [['t1', t1], ['t2', t2]]) : [['t1', t1]];
    for (const [key, model] of order) rates[key].push(fn(model));
  }
  return { t1: median(rates.t1), t2: t2 ? median(rates.t2) : null };
}

/** Decode tok/s at 256 tokens of context, t1 and t2 alternated, while as
 *  many other threads as the host has cores spin: a machine with more
 *  runnable threads than cores, as a browser beside other tabs often is. */
async function busyDecode(model, threaded, opts) {
  const { Worker } = await import('node:worker_threads');
  const spinners = Array.from({ length: os.cpus().length }, () => new Worker('for (;;) {}', { eval: true }));
  try {
    await Promise.all(spinners.map((w) => new Promise((resolve) => w.once('online', resolve))));
    return alternate(model, threaded, opts.decodeRuns, (m) => decodeAt(m, 256, opts));
  } finally {
    await Promise.all(spinners.map((w) => w.terminate()));
  }
}

/** Time per command on the bench's archive, 1 thread: complete() to the
 *  envelope of queries of COMMAND.queryTokens random pieces on an agent whose
 *  tools block is prefilled (reset() rewinds to it), greedy. With random
 *  weights the reasoning runs to its budget, so the token counts of each part
 *  come with the times. */
async function commandMs(model, opts) {
  const agent = await Needle.create({ model, tools: COMMAND.tools, temperature: 0, requireCall: true });
  const runs = [];
  try {
    for (let i = 0; i < opts.queries; i++) {
      const query = model.detokenize(tokenIds(COMMAND.queryTokens, model.vocabulary, 1000 + i));
      const counts = { reasoning: 0, call: 0 };
      agent.reset();
      const t0 = performance.now();
      const envelope = await agent.complete(query, {
        maxNewTokens: COMMAND.maxNewTokens, onToken: ({ kind }) => { if (kind in counts) counts[kind]++; } });
      const ms = performance.now() - t0;
      // A turn the budget cut (Needle 3 closes the reasoning 32 steps before the end, too few
      // for the call this archive's one-byte pieces spell) still took the whole budget's time.
      if (!envelope.success && envelope.error_code !== 'truncated') return { reason: `complete() failed: ${envelope.error}` };
      runs.push({ ms, query: model.tokenize(query).length, ...counts });
    }
  } finally {
    agent.free();
  }
  const of = (key) => runs.map((r) => r[key]);
  return { median: median(of('ms')), p90: quantile(of('ms'), 0.9), count: runs.length,
    tokens: { query: median(of('query')), reasoning: median(of('reasoning')), call: median(of('call')) } };
}

/** The longest engine step of a turn, the most an abort waits (the signal is
 *  read between steps): a query of opts.abortQueryTokens tokens with the 18
 *  demo tools declared (retrieval embeds the query first), and the turns of a
 *  conversation of opts.abortTurns queries over them (re-feeds after new
 *  tools), greedy, 1 thread. */
async function longestStepMs(model, opts) {
  const exports = model.engine.x;
  let longest = 0;
  model.engine.x = { ...exports, needle_agent_step: (...args) => {
    const t0 = performance.now();
    try { return exports.needle_agent_step(...args); } finally { longest = Math.max(longest, performance.now() - t0); }
  } };
  const tools = JSON.parse(await readFile(DEMO_TOOLS, 'utf8'));
  const agent = await Needle.create({ model, tools, temperature: 0 });
  try {
    const query = model.detokenize(tokenIds(opts.abortQueryTokens, model.vocabulary, 7));
    await agent.complete(query, { kind: 'query', maxNewTokens: 32 });
    const longQuery = longest;
    longest = 0;
    agent.reset();
    for (let i = 0; i < opts.abortTurns; i++) {
      await agent.complete(model.detokenize(tokenIds(24, model.vocabulary, 100 + i)), { kind: 'query', maxNewTokens: 64 });
    }
    return { long_query: round(longQuery, 1), long_conversation: round(longest, 1) };
  } finally {
    agent.free();
    model.engine.x = exports;
  }
}

/** The cost of a turn late in a conversation against an early one, on the
 *  demo model: a conversation of opts.conversationTurns commands cycling
 *  through the 18 tools' domains (retrieval picks other tools most turns, so
 *  the conversation is re-fed behind a new tools block), greedy, 1 thread;
 *  the median of turns 5-14 and of the last ten. */
async function conversationCost(opts) {
  const model = await Model.fromBytes(new Uint8Array(await readFile(DEMO)), { threads: 1 });
  const tools = JSON.parse(await readFile(DEMO_TOOLS, 'utf8'));
  const commands = ['turn on the kitchen light', 'set a timer for 5 minutes', "what's the weather in Oslo", 'play some jazz',
    'lock the front door', 'translate hello into French', 'call mom', 'add milk to my shopping list'];
  const agent = await Needle.create({ model, tools, temperature: 0 });
  try {
    const ms = [];
    for (let turn = 0; turn < opts.conversationTurns; turn++) {
      const t0 = performance.now();
      await agent.complete(commands[turn % commands.length], { kind: 'query', maxNewTokens: 96 });
      ms.push(performance.now() - t0);
    }
    const early = median(ms.slice(4, 14)), late = median(ms.slice(-10));
    return { early: round(early, 1), late: round(late, 1), ratio: round(late / early, 2), turns: ms.length };
  } finally {
    agent.free();
    await model.free();
  }
}

/** Time per command on the trained demo model: complete() of held-out
 *  commands (src/train/demo-model/), each on a fresh agent whose tools block
 *  was prefilled at create. Only in a source checkout, where they are. */
async function demoCommandMs(opts) {
  let evaluation;
  try {
    evaluation = await import('../src/train/evaluate.mjs');
  } catch {
    return { reason: 'the held-out commands are in the source checkout (src/train/), not in the package' };
  }
  const model = await Model.fromBytes(new Uint8Array(await readFile(DEMO)), { threads: 1 });
  try {
    const results = await evaluation.evaluate(model, evaluation.heldout().slice(0, opts.commands));
    const ms = results.map((r) => r.turns[0].ms).sort((a, b) => a - b);
    return { median: ms[Math.floor(ms.length / 2)], p90: ms[Math.floor(ms.length * 0.9)], count: ms.length };
  } finally {
    await model.free();
  }
}

/** The 2-thread model beside a 1-thread one, or null and why not:
 *  { threaded, t2Reason }. */
async function threadedTwin(bytes, options) {
  const threaded = await Model.fromBytes(bytes, { ...options, threads: 2 }).catch((error) => ({ error }));
  const t2Reason = threaded.error ? `the threaded engine failed: ${threaded.error.message}`
    : threaded.engine.threads.count < 2 ? `2 threads are not available here: ${threaded.engine.threads.reason}` : null;
  if (!t2Reason) return { threaded, t2Reason };
  if (!threaded.error) await threaded.free();
  return { threaded: null, t2Reason };
}

/** Decode tok/s at every context and prefill tok/s of every prompt, t1 and
 *  t2 alternated (t2 null, explained in nulls under `prefix`, without a
 *  threaded model), and the t1 model's peak memory after the decode at 1000
 *  tokens of context, which runs first so that the mark is its own. profile
 *  collects the t1 stage times at 256 tokens of context. */
function rateTables(model, threaded, t2Reason, opts, nulls, { prefix = '', progress = () => {}, profile = null } = {}) {
  const rates = ({ t1, t2 }, key) => {
    if (t2 === null) nulls[`${prefix}${key}.t2`] = t2Reason;
    return { t1: round(t1), t2: t2 === null ? null : round(t2) };
  };
  const decode = {};
  for (const ctx of [1000, ...CONTEXTS.filter((c) => c !== 1000)]) {
    progress(`decode at ${ctx} tokens of context`);
    decode[ctx] = rates(alternate(model, threaded, 1,
      (m) => decodeAt(m, ctx, opts, ctx === 256 && m === model ? profile : null)), `decode_tps.ctx${ctx}`);
    if (ctx === 1000) decode.peakBytes = model.peakMemoryBytes;
  }
  const prefill = {};
  for (const n of PROMPTS) {
    progress(`prefill of ${n} tokens`);
    prefill[`p${n}`] = rates(alternate(model, threaded, opts.prefillRuns,
      (m) => prefillTps(m, n, { ...opts, prefillRuns: 1 })), `prefill_tps.p${n}`);
  }
  return {
    decode_tps: Object.fromEntries(CONTEXTS.map((ctx) => [`ctx${ctx}`, decode[ctx]])),
    prefill_tps: prefill, peakBytes: decode.peakBytes,
  };
}

/** Decode and prefill tok/s (1 and 2 threads, alternated as for Needle 2)
 *  and the peak memory of a 1000-token conversation for Needle 3 (see the
 *  file comment). Null figures are explained in nulls. */
async function needle3Figures(opts, quick, nulls) {
  const tokenizer = makeTestTokenizerBlob(syntheticPieces(quick ? 400 : 8192, CHAT_MARKERS3));
  const bytes = quick
    ? writeCact3({ geometry: { ...TINY3_GEOMETRY, maximumSequence: 2048 }, seed: 1, bits: 2, group: 32, tokenizer })
    : writeCact3({ seed: 1, tokenizer, heads: RELEASED3_HEADS });
  const model = await Model.fromBytes(bytes, { wasm: 'needle3', threads: 1 });
  const { threaded, t2Reason } = await threadedTwin(bytes, { wasm: 'needle3' });
  try {
    warmUp(model);
    if (threaded) warmUp(threaded);
    const { decode_tps, prefill_tps, peakBytes } = rateTables(model, threaded, t2Reason, opts, nulls, { prefix: 'needle3.' });
    const command = await commandMs(model, opts);
    if (command.reason) nulls['needle3.command_ms'] = command.reason;
    return {
      decode_tps, prefill_tps,
      command_ms: command.reason ? null : { median: round(command.median, 1), p90: round(command.p90, 1), tokens: command.tokens },
      peak_memory_mb: round(peakBytes / 2 ** 20, 1), beyond_archive_mb: round((peakBytes - bytes.length) / 2 ** 20, 1),
      archive_mb: round(bytes.length / 2 ** 20, 1),
    };
  } finally {
    await threaded?.free();
    await model.free();
  }
}

/** Runs the benchmark; returns the result object (see the file comment).
 *  progress(text) is told what runs next. */
export async function runBench({ file, quick = false, progress = () => {} } = {}) {
  const opts = quick ? QUICK : FULL;
  const source = file ?? (quick ? TINY : RELEASED);
  const started = performance.now();
  const bytes = new Uint8Array(await readFile(source));
  const variant = defaultVariant();
  const features = detectFeatures();
  const model = await Model.fromBytes(bytes, { wasm: variant, threads: 1 });
  let { threaded, t2Reason } = await threadedTwin(bytes, {});
  const threadsInfo = {
    t1: { variant: model.engine.variant ?? variant, count: model.engine.threads.count },
    t2: t2Reason ? { count: null, reason: t2Reason }
      : { variant: threaded.engine.variant, count: threaded.engine.threads.count },
  };
  const nulls = {};
  try {
    progress('warm-up');
    warmUp(model);
    if (threaded) warmUp(threaded);
    const profile = [];
    const { decode_tps: decodeTps, prefill_tps: prefill, peakBytes } = rateTables(model, threaded, t2Reason, opts, nulls,
      { progress, profile });
    const peakMemoryMb = peakBytes / 2 ** 20;
    progress('decode on a busy machine');
    const busy = await busyDecode(model, threaded, opts);
    if (!threaded) nulls['busy_decode_tps.t2'] = t2Reason;
    const stageMs = STAGES.map((_, i) => profile.reduce((sum, run) => sum + run[i], 0));
    const total = stageMs.reduce((a, b) => a + b, 0);
    const stageShare = Object.fromEntries(STAGES.map((name, i) => [name, round(stageMs[i] / total, 4)]));
    const stepMs = Object.fromEntries(STAGES.map((name, i) =>
      [name, round(stageMs[i] / (profile.length * opts.decodeSteps), 4)]));
    progress('GEMV kernels');
    const gemv = gemvTable(model.engine, opts);
    progress('grammar masks');
    const mask = maskLatency(model, opts, TOOLS);
    if (mask.reason) nulls.mask_us_median = nulls.mask_us_p99 = mask.reason;
    const catalogueMask = maskLatency(model, opts, await readFile(DEMO_TOOLS, 'utf8'));
    if (catalogueMask.reason) nulls.mask_us_demo_catalogue = catalogueMask.reason;
    progress('constrained decode');
    const constrained = constrainedDecode(model, opts);
    if (constrained.reason) nulls.constrained_decode_tps = constrained.reason;
    progress('commands');
    const command = await commandMs(model, opts);
    if (command.reason) nulls.command_ms = command.reason;
    progress('commands on the demo model');
    const demoCommand = await demoCommandMs(opts);
    if (demoCommand.reason) nulls.demo_command_ms = demoCommand.reason;
    progress('the longest step (abort latency)');
    const abortMs = await longestStepMs(model, opts);
    progress('a long conversation on the demo model');
    const conversation = await conversationCost(opts);
    progress('Needle 3');
    const needle3 = await needle3Figures(opts, quick, nulls);
    progress('other engine variants');
    await threaded?.free();
    threaded = null;
    const variants = { [variant]: decodeTps.ctx64.t1, ...(await otherVariants(bytes, variant, features, opts)) };
    const geometry = ['vocabulary', 'hidden', 'layers', 'lanes', 'kvWindow', 'kvBits']
      .map((f) => [f, model.geometry(f)]);
    return {
      decode_tps: decodeTps,
      prefill_tps: prefill,
      stage_share: stageShare,
      stage_ms_per_token: stepMs,
      gemv_gmacs: gemv.gmacs,
      gemv_speedup_vs_f32: gemv.speedup,
      busy_decode_tps: { t1: round(busy.t1), t2: round(busy.t2) },
      peak_memory_mb: round(peakMemoryMb, 1),
      mask_us_median: mask.reason ? null : round(mask.median, 1),
      mask_us_p99: mask.reason ? null : round(mask.p99, 1),
      mask_us_demo_catalogue: catalogueMask.reason ? null
        : { median: round(catalogueMask.median, 1), p99: round(catalogueMask.p99, 1) },
      constrained_decode_tps: constrained.reason ? null
        : { constrained: round(constrained.constrained), unconstrained: round(constrained.unconstrained) },
      command_ms: command.reason ? null : { median: round(command.median, 1), p90: round(command.p90, 1) },
      command_tokens: command.reason ? null : command.tokens,
      demo_command_ms: demoCommand.reason ? null : { median: round(demoCommand.median, 1), p90: round(demoCommand.p90, 1) },
      abort_ms: abortMs,
      conversation_turn_ms: conversation,
      wasm_bytes: await wasmSizes(),
      decode_tps_ctx64_by_variant: variants,
      needle3,
      host: {
        ...host(variant, features), threads: threadsInfo, nulls, quick,
        archive: { file: String(source instanceof URL ? source.pathname : source), ...Object.fromEntries(geometry) },
        method: {
          decode: `median of ${opts.decodeRuns} runs of ${opts.decodeSteps} single-token feeds with logits`,
          threads: 't1 and t2 measured alternately in one run, t1 on the default single-threaded variant',
          stage_share: 'decode steps at 256 tokens of context, needle_session_profile',
          busy: `decode at 256 tokens of context while ${os.cpus().length} other threads spin (one per core), t1 and t2 alternated`,
          gemv: `needle_bench_gemv, group ${GEMV_GROUP}, activation rotated outside the timing`,
          peak_memory: 'wasm memory high-water mark after a 1000-token prompt and decode steps',
          needle3: `${quick ? 'the tiny Needle 3' : 'the released Needle 3 geometry with random weights'}, needle3 and needle3-threads modules, as decode, prefill and peak_memory`,
          mask: `${mask.count ?? 0} masks over random logits on a new grammar of two tools, and of the demo's 18 (mask_us_demo_catalogue)`,
          command: `complete() to envelope on this archive, greedy, 1 thread, ${command.count ?? 0} queries of ${COMMAND.queryTokens} random pieces, maxNewTokens ${COMMAND.maxNewTokens}, one required call of a tool with an enum and a boolean, tools block prefilled (command_tokens: median tokens per part)`,
          demo_command: `complete() to envelope on dist/demo.cact, greedy, 1 thread, tools block prefilled at create, ${demoCommand.count ?? 0} held-out commands`,
          abort: `the longest needle_agent_step (an abort waits at most one) of a ${opts.abortQueryTokens}-token query with the 18 demo tools declared, and of a ${opts.abortTurns}-turn conversation over them, on this archive, 1 thread`,
          conversation: `complete() of commands cycling through the demo tools' domains in one conversation of ${opts.conversationTurns} turns on dist/demo.cact, 1 thread: medians of turns 5-14 and of the last ten`,
        },
        duration_s: round((performance.now() - started) / 1000, 1),
      },
    };
  } finally {
    await threaded?.free();
    await model.free();
  }
}

const num = (v, w = 9) => (v === null || v === undefined ? 'n/a' : String(v)).padStart(w);

/** The human-readable table of a result. */
export function formatBench(r) {
  const h = r.host;
  const lines = [
    `needle-wasm bench: ${h.archive.file} (${h.quick ? 'QUICK smoke run, not a measurement' : 'full'})`,
    `host: node ${h.node} (V8 ${h.v8}), ${h.cpu}, ${h.cores} cores, engine variant ${h.variant}; `
      + `2 threads: ${h.threads?.t2?.count ? `variant ${h.threads.t2.variant}` : 'n/a'}`,
    '',
    `decode tok/s        ${num('1 thread', 10)} ${num('2 threads', 10)}`,
    ...Object.entries(r.decode_tps).map(([k, v]) => `  context ${k.slice(3).padEnd(10)} ${num(v.t1, 10)} ${num(v.t2, 10)}`),
    'prefill tok/s',
    ...Object.entries(r.prefill_tps).map(([k, v]) => `  prompt ${k.slice(1).padEnd(11)} ${num(v.t1, 10)} ${num(v.t2, 10)}`),
    '',
    'decode step by stage (context 256)   share   ms/token',
    ...Object.entries(r.stage_share).map(([k, v]) =>
      `  ${k.padEnd(32)} ${num(`${(v * 100).toFixed(1)}%`, 7)} ${num(r.stage_ms_per_token[k], 10)}`),
    '',
    `GEMV GMAC/s (x f32) ${Object.keys(r.gemv_gmacs.f32).map((s) => s.padStart(18)).join('')}`,
    ...Object.entries(r.gemv_gmacs).map(([k, v]) => `  ${k.padEnd(17)} ${Object.entries(v).map(([s, g]) =>
      `${g.toFixed(2)}${r.gemv_speedup_vs_f32[k] ? ` (x${r.gemv_speedup_vs_f32[k][s].toFixed(2)})` : ''}`.padStart(18)).join('')}`),
    '',
    `decode tok/s at context 256 while every core runs another thread: ${num(r.busy_decode_tps.t1, 0)} on 1 thread, ${num(r.busy_decode_tps.t2, 0)} on 2`,
    `peak wasm memory, 1000-token conversation: ${r.peak_memory_mb} MB`,
    `grammar mask: median ${num(r.mask_us_median, 0)} us, p99 ${num(r.mask_us_p99, 0)} us; `
      + `18-tool catalogue: median ${num(r.mask_us_demo_catalogue?.median, 0)} us, p99 ${num(r.mask_us_demo_catalogue?.p99, 0)} us`,
    `greedy decode tok/s at context 64: constrained ${num(r.constrained_decode_tps?.constrained, 1)}, unconstrained ${num(r.constrained_decode_tps?.unconstrained, 1)}`,
    `command (complete() to envelope; tokens of query / reasoning / call: ${r.command_tokens ? Object.values(r.command_tokens).join(' / ') : 'n/a'}): `
      + `median ${num(r.command_ms?.median, 0)} ms, p90 ${num(r.command_ms?.p90, 0)} ms`,
    `command on the demo model (complete() to envelope): median ${num(r.demo_command_ms?.median, 0)} ms, p90 ${num(r.demo_command_ms?.p90, 0)} ms`,
    `longest engine step (what an abort waits): ${num(r.abort_ms?.long_query, 0)} ms in a long query, ${num(r.abort_ms?.long_conversation, 0)} ms in a long conversation`,
    `a late turn of a long conversation on the demo model: ${num(r.conversation_turn_ms?.late, 0)} ms against ${num(r.conversation_turn_ms?.early, 0)} ms early (x${r.conversation_turn_ms?.ratio})`,
    `wasm modules: ${Object.entries(r.wasm_bytes).map(([f, b]) => `${f} ${b} bytes`).join(', ')}`,
    `decode tok/s at context 64 by engine variant: ${Object.entries(r.decode_tps_ctx64_by_variant)
      .map(([v, tps]) => `${v} ${tps}`).join(', ')}`,
    '',
    `Needle 3 tok/s      ${num('1 thread', 10)} ${num('2 threads', 10)}`,
    ...Object.entries(r.needle3.decode_tps).map(([k, v]) => `  decode, context ${k.slice(3).padEnd(4)} ${num(v.t1, 8)} ${num(v.t2, 10)}`),
    ...Object.entries(r.needle3.prefill_tps).map(([k, v]) => `  prefill, prompt ${k.slice(1).padEnd(4)} ${num(v.t1, 8)} ${num(v.t2, 10)}`),
    `  peak wasm memory, 1000-token conversation: ${r.needle3.peak_memory_mb} MB `
      + `(${r.needle3.beyond_archive_mb} MB beyond the ${r.needle3.archive_mb} MB archive)`,
    `  command (the same recipe; tokens of query / reasoning / call: ${r.needle3.command_ms
      ? Object.values(r.needle3.command_ms.tokens).join(' / ') : 'n/a'}): median ${num(r.needle3.command_ms?.median, 0)} ms, `
      + `p90 ${num(r.needle3.command_ms?.p90, 0)} ms`,
  ];
  for (const [what, why] of Object.entries(h.nulls)) lines.push(`n/a ${what}: ${why}`);
  lines.push(`(${h.duration_s} s)`);
  return lines.join('\n');
}
