// The agent on a Needle 3 archive renders Needle 3's chat format
// (needle3-model.md section 8) as the makers' engine does (needle3-engine.md
// sections 1-2): the system text as given, the tools as json.dumps(...,
// ensure_ascii=False) writes them (non-ASCII characters as themselves),
// "<think>" its own encode call; the reasoning is free text under the engine's
// masks, and comes back stripped of its newlines. The rendered tools and the
// raw envelope are read as text (JSON.parse would hide the escapes), and the
// agent's greedy reasoning equals a greedy decode of the prompt rendered here,
// fed to a bare session. The archives' reasoning ends early, as a trained
// model's does (short-reasoning.js), so that calls fit the engine's budget.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeTestTokenizerBlob, syntheticPieces, CHAT_MARKERS3 } from '../../js/cact-writer.js';
import { writeCact3 } from '../../js/cact3-writer.js';
import { TINY3_GEOMETRY } from '../../js/cact3-format.js';
import { Model } from '../../js/model.js';
import { Needle } from '../../js/agent.js';
import { STATUS } from '../../js/errors.js';
import { postprocessCalls } from '../../js/postprocess.js';
import { shortReasoningModel } from './short-reasoning.js';

const tokenizer = makeTestTokenizerBlob(syntheticPieces(400, CHAT_MARKERS3));

const TOOLS = [{
  name: 'set_heating', description: 'Règle la température (°C) d’une pièce',
  parameters: { type: 'object', properties: { pièce: { enum: ['salon', 'séjour'] }, degrés: { type: 'integer' } },
    required: ['pièce'] },
}];
const SYSTEM = '  date: 2026-07-21\n';
const QUERY = 'chauffe le séjour à 21';
const MAX_NEW = 160; // the engine closes the reasoning with 32 steps left
const model = await shortReasoningModel({ geometry: TINY3_GEOMETRY, seed: 5, bits: 2, group: 32, tokenizer }, TOOLS, QUERY);

// The greedy reasoning a bare session gives for the spec's rendering.
function referenceReasoning(model) {
  const prompt = `<|im_start|>system\n${SYSTEM}<|im_end|>\n<|im_start|>user\n<tools>${JSON.stringify(TOOLS)}`
    + `</tools>\n${QUERY}<|im_end|>\n<|im_start|>assistant\n`;
  const rendered = model.tokenize(prompt);
  const ids = [model.pieceId('<s>'), ...rendered, ...model.tokenize('<think>')];
  const sinks = 1 + rendered.indexOf(model.pieceId('</tools>')) + 1;
  // The engine's base bans and <think>, <tool_call>, </tool_call>, and the turn's ends since a call is
  // required; closed with 32 steps left.
  const banned = [4, 8, 9, 12, 13, ...['<think>', '<tool_call>', '</tool_call>', '<|im_end|>', '</s>'].map((p) => model.pieceId(p))];
  const session = model.session({ exact: true, sinks });
  let logits = session.feed(ids)[0];
  const reasoning = [];
  while (reasoning.length < MAX_NEW - 33) {
    for (const id of banned) logits[id] = -Infinity;
    const next = logits.indexOf(Math.max(...logits));
    if (next === model.pieceId('</think>')) break;
    reasoning.push(next);
    logits = session.feed([next])[0];
  }
  session.free();
  return model.detokenize(reasoning);
}

test('Needle 3: the agent renders the Needle 3 chat format (system as given, ensure_ascii=False tools, the engine\'s masks)', async () => {
  // The grammar writes names, keys and enum values as the tools block does (an archive whose reasoning ends at once).
  const agent = await Needle.create({ model, tools: TOOLS, system: SYSTEM, exact: true, requireCall: true });
  assert.equal(agent.readText(agent.engine.x.needle_agent_rendered_tools), JSON.stringify(TOOLS));
  const envelope = await agent.complete(QUERY, { maxNewTokens: MAX_NEW });
  assert.equal(envelope.success, true, envelope.error);
  const raw = agent.readText(agent.engine.x.needle_agent_envelope);
  assert.match(raw, /"function_calls":\[\{"name":"set_heating","arguments":\{[^}]*"pièce":"(salon|séjour)"/);
  agent.free();
  // The reasoning of a plain random archive runs to the budget: the prompt and masks decide every piece of it.
  const plain = await Model.fromBytes(writeCact3({ geometry: TINY3_GEOMETRY, seed: 5, bits: 2, group: 32, tokenizer }),
    { wasm: 'needle3' });
  const free = await Needle.create({ model: plain, tools: TOOLS, system: SYSTEM, exact: true, requireCall: true });
  const long = await free.complete(QUERY, { maxNewTokens: MAX_NEW });
  const want = referenceReasoning(plain);
  assert.ok(want.trim().length > 0, 'the reference reasoning is empty: the check would be vacuous');
  assert.equal(long.reasoning, want.trim());
  for (const marker of ['<|im_start|>', '<tools>', '</tools>', '<tool_result>', '</tool_result>', '<think>', '<tool_call>', '</tool_call>']) {
    assert.ok(!long.reasoning.includes(marker), marker);
  }
  free.free();
  plain.free();
});

test('Needle 3: more than five tools are narrowed by an embedding head, and all rendered without one', async () => {
  const tools = Array.from({ length: 7 }, (_, i) => ({ name: `tool_${i}`, description: `does thing ${i}`,
    parameters: { type: 'object', properties: { n: { type: 'integer' } } } }));
  const withHead = await Model.fromBytes(writeCact3({ geometry: TINY3_GEOMETRY, seed: 6, bits: 2, group: 32, tokenizer,
    heads: [{ kind: 'embedding', probes: 2, queries: 2 }, { kind: 'confidence', probes: 2, queries: 2 }] }), { wasm: 'needle3' });
  for (const [archive, rendered] of [[model, 7], [withHead, 5]]) {
    const agent = await Needle.create({ model: archive, tools });
    const envelope = await agent.complete('do thing 3', { maxNewTokens: MAX_NEW });
    assert.ok(envelope.success || envelope.error_code === 'truncated', envelope.error); // random reasoning runs long
    assert.equal(agent.renderedTools().length, rendered);
    assert.equal(agent.toolEmbeddings() === null, rendered === 7);
    assert.equal(typeof envelope.confidence, 'number', 'Needle 3\'s confidence needs no head');
    assert.equal(envelope.confidence_head === undefined, archive === model, 'the head\'s own score, where there is one');
    agent.free();
  }
  withHead.free();
});

test('Needle 3: embed() is the vector retrieval compares, of unit norm; refused without an embedding head', async () => {
  const tools = Array.from({ length: 6 }, (_, i) => ({ name: `tool_${i}`, description: `does thing ${i}` }));
  const withHead = await Model.fromBytes(writeCact3({ geometry: TINY3_GEOMETRY, seed: 7, bits: 2, group: 32, tokenizer,
    heads: [{ kind: 'embedding', probes: 2, queries: 2 }] }), { wasm: 'needle3' });
  const agent = await Needle.create({ model: withHead, tools });
  const { vectors } = agent.toolEmbeddings();
  tools.forEach((t, i) => assert.deepEqual(withHead.embed(JSON.stringify(t)), Float32Array.from(vectors.slice(i * 128, (i + 1) * 128))));
  const v = withHead.embed('do thing 3');
  assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-5);
  agent.free();
  withHead.free();
  assert.throws(() => model.embed('do thing 3'), (e) => e.code === STATUS.ARGUMENT && /no probe head/.test(e.message));
});

test('Needle 3: an embedding head of another width (an export with embedding_dim 64) loads, embeds and retrieves', async () => {
  const tools = Array.from({ length: 6 }, (_, i) => ({ name: `tool_${i}`, description: `does thing ${i}` }));
  const narrow = await Model.fromBytes(writeCact3({ geometry: TINY3_GEOMETRY, seed: 7, bits: 2, group: 32, tokenizer,
    heads: [{ kind: 'embedding', probes: 2, queries: 2, outputs: 64 }] }), { wasm: 'needle3' });
  const v = narrow.embed('do thing 3');
  assert.equal(v.length, 64);
  assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-5);
  const agent = await Needle.create({ model: narrow, tools });
  const { vectors } = agent.toolEmbeddings();
  assert.equal(vectors.length, 6 * 64);
  assert.equal(agent.renderedTools().length, 5);
  agent.free();
  narrow.free();
  // A width past the engine's 1024 is refused, naming the tensor.
  await assert.rejects(Model.fromBytes(writeCact3({ geometry: TINY3_GEOMETRY, seed: 7, bits: 2, group: 32, tokenizer,
    heads: [{ kind: 'embedding', probes: 2, queries: 1, outputs: 1025 }] }), { wasm: 'needle3' }),
  (e) => e.code === STATUS.FORMAT && /proj.*shape\[0\] is 1025, expected 2\.\.1024 \(embedding\)/.test(e.message));
});

// The envelope's validation by the makers' rules (src/agent/pp_validation.c):
// the tool.key of each string argument over two bytes whose squashed form
// (ASCII lower case, no spaces, hyphens or underscores) the squashed
// conversation does not hold, enum parameters exempt; and whether the request
// holds a negation cue.
const squash = (s) => s.toLowerCase().replace(/[ _-]/g, '');
const ungrounded = (calls, conversation, enums) => calls.flatMap((c) => Object.entries(c.arguments)
  .filter(([k, v]) => typeof v === 'string' && !enums.includes(k) && squash(v).length > 2 && !squash(conversation).includes(squash(v)))
  .map(([k]) => `${c.name}.${k}`));
const negation = (text) => /don't|dont |do not|never|no longer|must not|mustn't|shouldn't|should not|make sure not/i.test(text);

test('Needle 3: the envelope holds suppressed_calls, validation by the makers\' rules and confidence_head; calls under confidence 0.1 by the makers\' rule, or stopped by a gate, are withheld unless required', async () => {
  const tools = [{ name: 'send_message', description: 'Send a message',
    parameters: { type: 'object', properties: { to: { enum: ['Ann', 'Bob'] }, text: { type: 'string', maxLength: 8 } },
      required: ['to', 'text'] } }];
  const queries = ['text ANN hello', 'don’t text ANN, NEVER'];
  const seen = { grounded: 0, ungrounded: 0, withheld: 0, delivered: 0, negated: 0, plain: 0, unsure: 0 };
  const archive = await shortReasoningModel({ geometry: TINY3_GEOMETRY, seed: 8, bits: 2, group: 32, tokenizer,
    heads: [{ kind: 'confidence', probes: 2, queries: 2 }] }, tools, queries[0]);
  // Random weights mostly refuse when no call is required: sample until every case was seen.
  for (let seed = 1; seed <= 12 || (Object.values(seen).some((n) => !n) && seed <= 400); seed++) {
    const requireCall = seed % 2 === 0; // a required call (an extraction) is never withheld
    const agent = await Needle.create({ model: archive, tools, temperature: 1, seed, requireCall });
    const query = queries[Math.floor(seed / 2) % 2];
    let written = ''; // the calls as the model wrote them
    const envelope = await agent.complete(query, { maxNewTokens: MAX_NEW, onToken: ({ kind, text }) => { if (kind === 'call') written += text; } });
    agent.free();
    if (envelope.error_code === 'truncated') continue; // sampled reasoning ran long (budget3.test.js)
    assert.equal(envelope.success, true, envelope.error);
    assert.ok(envelope.confidence >= 0 && envelope.confidence <= 1, `confidence ${envelope.confidence}`);
    assert.equal(typeof envelope.confidence_head, 'number');
    const withheld = envelope.suppressed_calls.length > 0;
    const calls = withheld ? envelope.suppressed_calls : envelope.function_calls;
    if (!calls.length) { assert.equal(envelope.validation, undefined); continue; } // a refusal
    const gates = await postprocessCalls({ tools, system: '', request: query, conversation: `\n${query}`,
      calls: written.slice(written.indexOf('[')) });
    const unsure = envelope.confidence < 0.1;
    assert.equal(withheld, !requireCall && (unsure || gates.withhold), `seed ${seed}: confidence ${envelope.confidence}, gates ${gates.withhold}`);
    const want = ungrounded(calls, `\n${query}`, ['to']);
    assert.deepEqual(envelope.validation, { ungrounded: want, negation: negation(query) });
    seen[want.length ? 'ungrounded' : 'grounded']++;
    seen[withheld ? 'withheld' : 'delivered']++;
    seen[negation(query) ? 'negated' : 'plain']++;
    seen.unsure += unsure && !gates.withhold && !requireCall;
  }
  archive.free();
  console.log(`# ${JSON.stringify(seen)}`);
  for (const [what, count] of Object.entries(seen)) assert.ok(count > 0, `no call ${what} among the sampled turns`);
});

test('Needle 3: a turn delivers its calls as the makers\' post-processor leaves them', async () => {
  const door = { type: 'object', properties: { door: { type: 'string' } }, required: ['door'] };
  const tools = [{ name: 'lock_door', description: 'Lock a door', parameters: door },
    { name: 'unlock_door', description: 'Unlock a door', parameters: door }];
  const query = 'unlock the front door';
  const archive = await shortReasoningModel({ geometry: TINY3_GEOMETRY, seed: 9, bits: 2, group: 32, tokenizer }, tools, query);
  let changed = 0;
  for (let seed = 1; seed <= 16; seed++) {
    const agent = await Needle.create({ model: archive, tools, temperature: 1, seed, requireCall: true });
    let written = ''; // the calls as the model wrote them
    const envelope = await agent.complete(query, { maxNewTokens: MAX_NEW, onToken: ({ kind, text }) => { if (kind === 'call') written += text; } });
    agent.free();
    if (envelope.error_code === 'truncated') continue; // sampled reasoning ran long (budget3.test.js)
    written = written.slice(written.indexOf('[')); // the stream's first piece may carry the marker's leftover byte
    if (!written.endsWith(']')) continue; // the budget ended the list (budget3.test.js checks what is kept)
    const want = await postprocessCalls({ tools, system: '', request: query, conversation: `\n${query}`, calls: written });
    assert.deepEqual(envelope.function_calls, JSON.parse(want.calls), `seed ${seed}: the model wrote ${written}`);
    if (want.calls !== written) changed++;
  }
  archive.free();
  assert.ok(changed > 0, 'no turn was changed by the post-processor: the test shows nothing');
});
