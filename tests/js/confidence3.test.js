// Needle 3's confidence by the makers' rule (needle3-engine.md section 3;
// src/agent/call_prob.c): the least engine probability of the call's tokens,
// each from the step's sparse logits and the sampler's visit. The reference
// here replays a greedy turn on a bare session with the public grammar API and
// scores each call token the slow way (every candidate sorted); the agent's
// envelope must agree.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeTestTokenizerBlob, syntheticPieces, CHAT_MARKERS3 } from '../../js/cact-writer.js';
import { TINY3_GEOMETRY } from '../../js/cact3-format.js';
import { Needle } from '../../js/agent.js';
import { shortReasoningModel } from './short-reasoning.js';

const PIECES = syntheticPieces(400, CHAT_MARKERS3);
const tokenizer = makeTestTokenizerBlob(PIECES);
const TOOLS = [{ name: 'set_mode', description: 'Set the mode of the heater',
  parameters: { type: 'object', properties: { mode: { enum: ['eco', 'boost', 'quiet'] }, on: { type: 'boolean' } },
    required: ['mode'] } }];
const QUERY = 'put the heater on boost';
const MAX_NEW = 200;

/** The first byte of each token's text, as the engine reads it. */
const FIRST_BYTE = PIECES.map((p) => {
  const piece = typeof p === 'string' ? p : p.piece;
  const byte = /^<0x([0-9A-F]{2})>$/.exec(piece);
  if (byte) return parseInt(byte[1], 16);
  if (['<pad>', '</s>', '<s>', '<unk>'].includes(piece)) return -1;
  return new TextEncoder().encode(piece.replace(/\u2581/g, ' '))[0];
});

/** The engine's probability of `token`, written from engine-rules.md. */
function engineProb(logits, fits, token, keep) {
  const next = new Set(FIRST_BYTE.filter((b, i) => b >= 0 && fits[i] > -Infinity));
  const scored = FIRST_BYTE.filter((b) => b >= 0 && next.has(b)).length;
  const sparse = 2 * scored < logits.length;
  const live = [...logits.keys()].filter((i) => ![4, 8, 9, 12, 13].includes(i)
    && (!sparse || next.has(FIRST_BYTE[i]) || keep.includes(i)));
  const max = Math.max(...live.map((i) => logits[i]));
  const z = live.reduce((s, i) => s + Math.exp(logits[i] - max), 0);
  live.sort((a, b) => logits[b] - logits[a] || a - b);
  let mass = 0, valid = 0, mine = 0, found = false, more = 0;
  for (const c of live) {
    if (found) {
      if (mass >= 0.99 || more >= 24) break;
      more++;
    }
    const p = Math.exp(logits[c] - max) / z;
    mass += p;
    if (fits[c] > -Infinity) valid += p;
    if (c === token) found = true, mine = p;
  }
  return mine / valid;
}

/** A greedy turn replayed on a bare session: the call's text and its
 *  confidence by the rule; null when the calls run past `limit` characters
 *  (the agent's budget ended its list: budget3.test.js covers that). */
function replay(model, limit) {
  const { engine } = model;
  const { x } = engine;
  const id = (piece) => model.pieceId(piece);
  const rendered = model.tokenize(`<|im_start|>user\n<tools>${JSON.stringify(TOOLS)}</tools>\n${QUERY}<|im_end|>\n<|im_start|>assistant\n`);
  const session = model.session({ exact: true, sinks: 1 + rendered.indexOf(id('</tools>')) + 1 });
  let logits = session.feed([id('<s>'), ...rendered, ...model.tokenize('<think>')])[0];
  // The engine's reasoning: its base bans and <think>, <tool_call>, </tool_call> masked, closed with 32 steps left.
  const banned = [4, 8, 9, 12, 13, id('<think>'), id('<tool_call>'), id('</tool_call>')];
  for (let generated = 0; generated < MAX_NEW - 33; generated++) {
    for (const b of banned) logits[b] = -Infinity;
    const next = logits.indexOf(Math.max(...logits));
    if (next === id('</think>')) break;
    assert.ok(next !== id('</s>') && next !== id('<|im_end|>'), 'the reasoning ended the turn: no call to score');
    logits = session.feed([next])[0];
  }
  const forced = model.tokenize('</think>\n<tool_call>');
  logits = session.feed(forced[0] === id('\u2581') ? forced.slice(1) : forced)[0]; // a continuation: no dummy prefix
  const end = id('</tool_call>');
  const grammar = engine.withString(JSON.stringify(TOOLS), (ptr, len) => x.needle_grammar_new(model.tokenizer, ptr, len, end, engine.err));
  const buffer = engine.malloc(logits.length * 4);
  const calls = [];
  let least = 1;
  try {
    for (;;) {
      engine.f32(buffer, logits.length).set(logits);
      assert.ok(x.needle_grammar_mask(grammar, buffer) > 0, 'the grammar reached a dead end');
      const fits = Float32Array.from(engine.f32(buffer, logits.length));
      // A required call: the list cannot close at once (the agent's grammar holds at least one call).
      if (calls.length === 1) fits.forEach((_, i) => { if (FIRST_BYTE[i] === 0x5d) fits[i] = -Infinity; });
      const token = fits.indexOf(Math.max(...fits));
      engine.check(x.needle_grammar_accept(grammar, token, engine.err));
      if (token === end) break;
      if (model.detokenize(calls).length > limit) return null;
      least = Math.min(least, engineProb(logits, fits, token, [end, id('<|im_end|>')]));
      calls.push(token);
      logits = session.feed([token])[0];
    }
  } finally {
    x.free(buffer);
    x.needle_grammar_free(grammar);
    session.free();
  }
  return { calls: model.detokenize(calls), confidence: least };
}

test('Needle 3: the confidence is the least engine probability of the call\'s tokens, as a plain reference of the rule replays it', async () => {
  let compared = 0;
  for (const seed of [11, 12, 13, 14, 15, 16]) {
    const model = await shortReasoningModel({ geometry: TINY3_GEOMETRY, seed, bits: 2, group: 32, tokenizer,
      heads: [{ kind: 'confidence', probes: 2, queries: 2 }] }, TOOLS, QUERY);
    const agent = await Needle.create({ model, tools: TOOLS, exact: true, requireCall: true });
    let written = '';
    const envelope = await agent.complete(QUERY, { maxNewTokens: MAX_NEW, onToken: ({ kind, text }) => { if (kind === 'call') written += text; } });
    agent.free();
    assert.equal(envelope.success, true, envelope.error);
    written = written.slice(written.indexOf('['));
    const want = replay(model, written.length);
    model.free();
    if (!want) continue;
    compared++;
    assert.equal(written, want.calls, `seed ${seed}: the replay wrote other calls`);
    assert.ok(Math.abs(envelope.confidence - want.confidence) <= 1e-5 * want.confidence,
      `seed ${seed}: confidence ${envelope.confidence}, the rule gives ${want.confidence} for ${want.calls}`);
    assert.notEqual(envelope.confidence, envelope.confidence_head, 'the head is not the rule');
  }
  assert.ok(compared >= 3, `${compared} turns ended within the budget: too few to compare`);
});
