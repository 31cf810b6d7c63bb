// Needle 3's call as the makers' engine decodes it (needle3-engine.md
// sections 2-3; src/agent/value_search.c, call_prob.c), against a plain
// reference of each mechanism written here from engine-rules.md: a greedy
// replay of the turn on a bare session with the public grammar API that
// - at an argument value's start runs the lookahead: the four likeliest
//   tokens the grammar allows, each continued greedily until the value closes
//   (as the JSON text says, not the engine's grammar) or 24 tokens, the best
//   mean log probability (2 less when unfinished) committed whole;
// - right after the opening quote of an enum value scores each option the
//   request names, teacher-forced with its closing quote, and commits the
//   likeliest;
// - scores each call token the slow way (every candidate sorted) for the
//   confidence: the least engine probability of the call's tokens, from the
//   step's sparse logits and the sampler's visit.
// The agent's call text and envelope must agree with it, and its searches
// take a step for each forward pass (an abort waits for one).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeTestTokenizerBlob, syntheticPieces, CHAT_MARKERS3 } from '../../js/cact-writer.js';
import { TINY3_GEOMETRY } from '../../js/cact3-format.js';
import { Needle } from '../../js/agent.js';
import { shortReasoningModel } from './short-reasoning.js';

const PIECES = syntheticPieces(400, CHAT_MARKERS3);
const tokenizer = makeTestTokenizerBlob(PIECES);
// hours has an explicit bound: the reference's grammar (needle_grammar_new) lacks Needle 3's implied
// ranges, and with "at least 0" implied the agent's candidates at hours' start differ from it.
const TOOLS = [{ name: 'set_mode', description: 'Set the mode of the heater',
  parameters: { type: 'object', properties: { mode: { enum: ['eco', 'boost', 'quiet'] }, on: { type: 'boolean' },
    hours: { type: 'integer', minimum: 0 } }, required: ['mode', 'hours'] } }];
const QUERY = 'put the heater on boost for 2 hours';
const MAX_NEW = 200;

/** The first byte of each token's text, as the engine reads it. */
const FIRST_BYTE = PIECES.map((p) => {
  const piece = typeof p === 'string' ? p : p.piece;
  const byte = /^<0x([0-9A-F]{2})>$/.exec(piece);
  if (byte) return parseInt(byte[1], 16);
  if (['<pad>', '</s>', '<s>', '<unk>'].includes(piece)) return -1;
  return new TextEncoder().encode(piece.replace(/\u2581/g, ' '))[0];
});

const BASE_BANS = [4, 8, 9, 12, 13];

/** The logits the engine holds at a call step: only the tokens whose first
 *  byte a fitting token starts with when those are under half the vocabulary
 *  (unless `dense`: after a commit the engine fed with full logits), `keep`
 *  always; its base bans. Unscored entries are -Infinity. */
function engineStep(logits, fits, keep, dense) {
  const next = new Set(FIRST_BYTE.filter((b, i) => b >= 0 && fits[i] > -Infinity));
  const scored = FIRST_BYTE.filter((b) => b >= 0 && next.has(b)).length;
  const sparse = !dense && 2 * scored < logits.length;
  return Array.from(logits, (l, i) => (BASE_BANS.includes(i) || (sparse && !next.has(FIRST_BYTE[i]) && !keep.includes(i))
    ? -Infinity : l));
}

/** Softmax probability of token t over x (-Infinity entries left out). */
function softmaxProb(x, t) {
  let z = 0;
  for (const v of x) if (v > -Infinity) z += Math.exp(v - x[t]);
  return 1 / z;
}

/** The engine's probability of `token` by the confidence rule. */
function engineProb(logits, fits, token, keep, dense) {
  const step = engineStep(logits, fits, keep, dense);
  const live = [...step.keys()].filter((i) => step[i] > -Infinity);
  const max = Math.max(...live.map((i) => step[i]));
  const z = live.reduce((s, i) => s + Math.exp(step[i] - max), 0);
  live.sort((a, b) => step[b] - step[a] || a - b);
  let mass = 0, valid = 0, mine = 0, found = false, more = 0;
  for (const c of live) {
    if (found) {
      if (mass >= 0.99 || more >= 24) break;
      more++;
    }
    const p = Math.exp(step[c] - max) / z;
    mass += p;
    if (fits[c] > -Infinity) valid += p;
    if (c === token) found = true, mine = p;
  }
  return mine / valid;
}

/** Where the call's JSON text stands: the open containers, inside a string
 *  or not, the last key, and what the text last ended (a key, a string
 *  value, a literal, a container, or a structural byte). */
function where(text) {
  const stack = [];
  let inString = false, escaped = false, isKey = false, keyStart = 0, key = null, last = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') {
        inString = false;
        last = isKey ? 'key' : 'string';
        if (isKey) key = JSON.parse(text.slice(keyStart, i + 1));
      }
      continue;
    }
    if (c === '"') {
      inString = true, isKey = stack.at(-1) === '{' && (last === '{' || last === ','), keyStart = i;
      continue;
    }
    if (c === '{' || c === '[') stack.push(c);
    if (c === '}' || c === ']') stack.pop();
    last = /[a-z0-9.-]/.test(c) ? 'literal' : c;
  }
  return { depth: stack.length, top: stack.at(-1), inString, key, last, text };
}

// Depths: the list 1, a call 2, its arguments 3.
const valueStart = (w) => !w.inString && w.depth === 3 && w.last === ':';
const valueClosed = (w) => w.depth < 3 || (w.depth === 3 && !w.inString
  && (w.last === 'string' || w.last === '}' || w.last === ']' || /(true|false|null)$/.test(w.text)));
const enumOf = (key) => TOOLS[0].parameters.properties[key]?.enum;

/** engine-rules.md's "names an option": lowercased ASCII words. */
const words = (s) => ` ${s.toLowerCase().replace(/[^a-z0-9]+/g, ' ').trim()} `.replace(/^ {2}$/, ' ');
function named(conversation, option) {
  const o = words(option).trim();
  return o.length > 0 && words(conversation).includes(o.length < 5 ? ` ${o} ` : o);
}

/** The token that would start a seventh repeat of a cycle of 1-4 tokens
 *  ending the call, or -1 (the engine's cycle ban). */
function cycleBan(ids) {
  for (let p = 1; p <= 4 && ids.length >= 6 * p; p++) {
    const tail = ids.slice(-6 * p);
    if (tail.every((t, i) => i < p || t === tail[i - p])) return tail[0];
  }
  return -1;
}

/** A greedy turn replayed on a bare session as the engine decodes it: the
 *  call's text, its confidence by the rule, and how many values the
 *  lookahead and the option scoring decided; null when the calls run past
 *  `limit` characters (the agent's budget ended its list: budget3.test.js
 *  covers that). */
function replay(model, limit) {
  const { engine } = model;
  const { x } = engine;
  const id = (piece) => model.pieceId(piece);
  const afterMarker = (text) => { // the ids of text right after a marker (no dummy prefix)
    const ids = model.tokenize(`</tools>${text}`);
    return ids.slice(ids.indexOf(id('</tools>')) + 1);
  };
  const rendered = model.tokenize(`<|im_start|>user\n<tools>${JSON.stringify(TOOLS)}</tools>\n${QUERY}<|im_end|>\n<|im_start|>assistant\n`);
  const session = model.session({ exact: true, sinks: 1 + rendered.indexOf(id('</tools>')) + 1 });
  let logits = session.feed([id('<s>'), ...rendered, ...model.tokenize('<think>')])[0];
  // The engine's reasoning: its base bans and <think>, <tool_call>, </tool_call> masked, closed with 32 steps left.
  const banned = [...BASE_BANS, id('<think>'), id('<tool_call>'), id('</tool_call>')];
  let spent = 4; // the markers the engine forces: <think>, </think>, the newline, <tool_call>
  for (let generated = 0; generated < MAX_NEW - 33; generated++, spent++) {
    for (const b of banned) logits[b] = -Infinity;
    const next = logits.indexOf(Math.max(...logits));
    if (next === id('</think>')) { spent++; break; }
    assert.ok(next !== id('</s>') && next !== id('<|im_end|>'), 'the reasoning ended the turn: no call to score');
    logits = session.feed([next])[0];
  }
  logits = session.feed(afterMarker('</think>\n<tool_call>'))[0];
  const end = id('</tool_call>');
  const keep = [end, id('<|im_end|>')];
  const valueBans = [id('<|im_end|>'), id('<think>'), id('</think>'), id('<tool_call>'), end];
  const maxSequence = model.geometry('maximumSequence');
  const buffer = engine.malloc(logits.length * 4);
  const grammarOf = (ids) => {
    const g = engine.withString(JSON.stringify(TOOLS), (ptr, len) => x.needle_grammar_new(model.tokenizer, ptr, len, end, engine.err));
    for (const t of ids) engine.check(x.needle_grammar_accept(g, t, engine.err));
    return g;
  };
  const masked = (g, l) => {
    engine.f32(buffer, l.length).set(l);
    x.needle_grammar_mask(g, buffer);
    return Float32Array.from(engine.f32(buffer, l.length));
  };
  /** The likeliest tokens of x with text that g allows, bans aside (the lower id first on a tie). */
  const likeliest = (g, x, count) => {
    const m = masked(g, x);
    return [...m.keys()].filter((i) => m[i] > -Infinity && FIRST_BYTE[i] >= 0 && !valueBans.includes(i))
      .sort((a, b) => x[b] - x[a] || a - b).slice(0, count);
  };
  const rewind = (position) => engine.check(x.needle_session_rewind(session.handle, position, engine.err));
  const grammar = grammarOf([]);
  const calls = [], searched = { lookahead: 0, options: 0, feeds: 0 };
  let least = 1, dense = false;
  const commit = (ids, probs) => {
    for (let i = 0; i < ids.length; i++) {
      least = Math.min(least, probs[i]);
      calls.push(ids[i]);
      logits = session.feed([ids[i]])[0];
    }
    dense = true;
  };
  const lookahead = (step) => {
    const candidates = likeliest(grammar, step, 4);
    if (candidates.length < 2 || softmaxProb(step, candidates[0]) >= 0.95) return false;
    const at = session.position;
    let best = null;
    for (const first of candidates) {
      const g = grammarOf(calls), ids = [first], probs = [softmaxProb(step, first)];
      engine.check(x.needle_grammar_accept(g, first, engine.err));
      let closed = valueClosed(where(model.detokenize([...calls, ...ids])));
      while (!closed && ids.length < 24) {
        const l = session.feed([ids.at(-1)])[0];
        searched.feeds++;
        const [t] = likeliest(g, l, 1);
        if (t === undefined) break;
        engine.check(x.needle_grammar_accept(g, t, engine.err));
        ids.push(t), probs.push(softmaxProb(l, t));
        closed = valueClosed(where(model.detokenize([...calls, ...ids])));
      }
      x.needle_grammar_free(g);
      rewind(at);
      const score = probs.reduce((s, p) => s + Math.log(p), 0) / ids.length - (closed ? 0 : 2);
      if (!best || score > best.score) best = { score, ids, probs };
    }
    searched.lookahead++;
    commit(best.ids, best.probs);
    return true;
  };
  const scoreOptions = (options, step) => {
    const at = session.position;
    const scored = options.filter((o) => named(`\n${QUERY}`, o)).map((option) => {
      const ids = [...afterMarker(option), ...afterMarker('"')];
      let logp = Math.log(softmaxProb(step, ids[0]));
      for (let i = 1; i < ids.length; i++, searched.feeds++) logp += Math.log(softmaxProb(session.feed([ids[i - 1]])[0], ids[i]));
      rewind(at);
      return { ids, logp };
    });
    if (!scored.length) return false;
    const best = scored.reduce((a, b) => (b.logp > a.logp ? b : a));
    const z = scored.reduce((s, o) => s + Math.exp(o.logp - best.logp), 0);
    searched.options++;
    commit(best.ids, best.ids.map((_, i) => (i ? 1 : 1 / z)));
    return true;
  };
  try {
    for (;;) {
      const fits = masked(grammar, logits);
      // A required call: the list cannot close at once (the agent's grammar holds at least one call).
      if (calls.length === 1) fits.forEach((_, i) => { if (FIRST_BYTE[i] === 0x5d) fits[i] = -Infinity; });
      const ban = cycleBan(calls);
      if (ban >= 0 && fits.filter((l) => l > -Infinity).length > 1) fits[ban] = -Infinity;
      const text = model.detokenize(calls), w = where(text);
      const before = calls.length;
      if (w.inString && text.endsWith('"') && valueStart(where(text.slice(0, -1))) && enumOf(w.key)) {
        scoreOptions(enumOf(w.key), engineStep(logits, fits, keep, true)); // inside a string: every token scored
      } else if (valueStart(w) && !enumOf(w.key) && MAX_NEW - spent - calls.length >= 29
        && session.position + 32 < maxSequence) {
        lookahead(engineStep(logits, fits, keep, dense));
      }
      if (calls.length > before) {
        for (const t of calls.slice(before)) engine.check(x.needle_grammar_accept(grammar, t, engine.err));
        if (model.detokenize(calls).length > limit) return null;
        continue;
      }
      const token = fits.indexOf(Math.max(...fits));
      engine.check(x.needle_grammar_accept(grammar, token, engine.err));
      if (token === end) break;
      if (model.detokenize(calls).length > limit) return null;
      least = Math.min(least, engineProb(logits, fits, token, keep, dense));
      dense = false;
      calls.push(token);
      logits = session.feed([token])[0];
    }
  } finally {
    x.free(buffer);
    x.needle_grammar_free(grammar);
    session.free();
  }
  return { calls: model.detokenize(calls), confidence: least, searched };
}

/** The turn through the C API's steps: how many of the call's steps gave no
 *  piece (the value search's forward passes, one a step). */
function silentCallSteps(agent, query) {
  const { engine } = agent, x = engine.x;
  engine.withString(query, (ptr, len) => engine.check(x.needle_agent_begin(agent.handle, ptr, len, 1, MAX_NEW, engine.err)));
  const out = engine.malloc(256), len = engine.malloc(8);
  let inCall = false, silent = 0;
  for (let kind; (kind = x.needle_agent_step(agent.handle, out, 256, len)) > 0;) {
    if (kind === 2) inCall = true;
    else if (kind === 4 && inCall) silent++;
  }
  x.free(out), x.free(len);
  return silent;
}

test('Needle 3: the call and its confidence are those a plain reference of the engine\'s decoding replays', async () => {
  let compared = 0;
  const searched = { lookahead: 0, options: 0 };
  for (const seed of [11, 12, 13, 14, 15, 16]) {
    const model = await shortReasoningModel({ geometry: { ...TINY3_GEOMETRY, maximumSequence: 1024 }, seed, bits: 2, group: 32, tokenizer,
      heads: [{ kind: 'confidence', probes: 2, queries: 2 }] }, TOOLS, QUERY);
    const agent = await Needle.create({ model, tools: TOOLS, exact: true, requireCall: true });
    let written = '';
    const envelope = await agent.complete(QUERY, { maxNewTokens: MAX_NEW, onToken: ({ kind, text }) => { if (kind === 'call') written += text; } });
    agent.reset();
    const silent = silentCallSteps(agent, QUERY);
    agent.free();
    assert.equal(envelope.success, true, envelope.error);
    written = written.slice(written.indexOf('['));
    const want = replay(model, written.length);
    model.free();
    if (!want) continue;
    compared++;
    searched.lookahead += want.searched.lookahead, searched.options += want.searched.options;
    // A pass a step: a search's last pass may share its step with the pick's first token.
    const searches = want.searched.lookahead + want.searched.options;
    assert.ok(silent + searches >= want.searched.feeds,
      `seed ${seed}: ${want.searched.feeds} forward passes of ${searches} searches in ${silent} steps with no piece`);
    assert.equal(written, want.calls, `seed ${seed}: the replay wrote other calls`);
    assert.ok(Math.abs(envelope.confidence - want.confidence) <= 1e-5 * want.confidence,
      `seed ${seed}: confidence ${envelope.confidence}, the rule gives ${want.confidence} for ${want.calls}`);
    assert.notEqual(envelope.confidence, envelope.confidence_head, 'the head is not the rule');
  }
  assert.ok(compared >= 3, `${compared} turns ended within the budget: too few to compare`);
  assert.ok(searched.lookahead >= 2 && searched.options >= 2, `values decided by a search: ${JSON.stringify(searched)}`);
});
