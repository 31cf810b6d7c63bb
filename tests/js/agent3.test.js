// The agent on a Needle 3 archive renders Needle 3's chat format
// (needle3-model.md section 8): the system text stripped, the tools as
// json.dumps(..., ensure_ascii=False) writes them (non-ASCII characters as
// themselves), "<think>" its own encode call; the reasoning is free text that
// never holds a marker but </think>, and comes back stripped of its newlines.
// The rendered tools and the raw envelope are read as text (JSON.parse would
// hide the escapes), and the agent's greedy reasoning equals a greedy decode
// of the prompt rendered here from the spec, fed to a bare session.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeTestTokenizerBlob, syntheticPieces, CHAT_MARKERS3 } from '../../js/cact-writer.js';
import { writeCact3 } from '../../js/cact3-writer.js';
import { TINY3_GEOMETRY } from '../../js/cact3-format.js';
import { Model } from '../../js/model.js';
import { Needle } from '../../js/agent.js';
import { STATUS } from '../../js/errors.js';
import { postprocessCalls } from '../../js/postprocess.js';

const tokenizer = makeTestTokenizerBlob(syntheticPieces(400, CHAT_MARKERS3));
const model = await Model.fromBytes(writeCact3({ geometry: TINY3_GEOMETRY, seed: 5, bits: 2, group: 32, tokenizer }),
  { wasm: 'needle3' });

const TOOLS = [{
  name: 'set_heating', description: 'Règle la température (°C) d’une pièce',
  parameters: { type: 'object', properties: { pièce: { enum: ['salon', 'séjour'] }, degrés: { type: 'integer' } },
    required: ['pièce'] },
}];
const SYSTEM = '  date: 2026-07-21\n';
const QUERY = 'chauffe le séjour à 21';
const MAX_NEW = 160; // a reasoning budget of 40 tokens, the rest for the call

// The greedy reasoning a bare session gives for the spec's rendering.
function referenceReasoning() {
  const prompt = `<|im_start|>system\n${SYSTEM.trim()}<|im_end|>\n<|im_start|>user\n<tools>${JSON.stringify(TOOLS)}`
    + `</tools>\n${QUERY}<|im_end|>\n<|im_start|>assistant\n`;
  const rendered = model.tokenize(prompt);
  const ids = [model.pieceId('<s>'), ...rendered, ...model.tokenize('<think>')];
  const sinks = 1 + rendered.indexOf(model.pieceId('</tools>')) + 1;
  const banned = ['<pad>', '</s>', '<s>', '<unk>', ...CHAT_MARKERS3.filter((m) => m !== '</think>')].map((p) => model.pieceId(p));
  const session = model.session({ exact: true, sinks });
  let logits = session.feed(ids)[0];
  const reasoning = [];
  while (reasoning.length < MAX_NEW / 4) {
    for (const id of banned) logits[id] = -Infinity;
    const next = logits.indexOf(Math.max(...logits));
    if (next === model.pieceId('</think>')) break;
    reasoning.push(next);
    logits = session.feed([next])[0];
  }
  session.free();
  return model.detokenize(reasoning);
}

test('Needle 3: the agent renders the Needle 3 chat format (stripped system, ensure_ascii=False tools, markers banned)', async () => {
  const agent = await Needle.create({ model, tools: TOOLS, system: SYSTEM, exact: true, requireCall: true });
  assert.equal(agent.readText(agent.engine.x.needle_agent_rendered_tools), JSON.stringify(TOOLS));
  const envelope = await agent.complete(QUERY, { maxNewTokens: MAX_NEW });
  assert.equal(envelope.success, true, envelope.error);
  // The grammar writes names, keys and enum values as the tools block does.
  const raw = agent.readText(agent.engine.x.needle_agent_envelope);
  assert.match(raw, /"function_calls":\[\{"name":"set_heating","arguments":\{[^}]*"pièce":"(salon|séjour)"/);
  const want = referenceReasoning();
  assert.ok(want.trim().length > 0, 'the reference reasoning is empty: the check would be vacuous');
  assert.equal(envelope.reasoning, want.trim());
  for (const marker of CHAT_MARKERS3) assert.ok(!envelope.reasoning.includes(marker), marker);
  agent.free();
});

test('Needle 3: more than five tools are narrowed by an embedding head, and all rendered without one', async () => {
  const tools = Array.from({ length: 7 }, (_, i) => ({ name: `tool_${i}`, description: `does thing ${i}`,
    parameters: { type: 'object', properties: { n: { type: 'integer' } } } }));
  const withHead = await Model.fromBytes(writeCact3({ geometry: TINY3_GEOMETRY, seed: 6, bits: 2, group: 32, tokenizer,
    heads: [{ kind: 'embedding', probes: 2, queries: 2 }, { kind: 'confidence', probes: 2, queries: 2 }] }), { wasm: 'needle3' });
  for (const [archive, rendered] of [[model, 7], [withHead, 5]]) {
    const agent = await Needle.create({ model: archive, tools });
    const envelope = await agent.complete('do thing 3', { maxNewTokens: MAX_NEW });
    assert.equal(envelope.success, true, envelope.error);
    assert.equal(agent.renderedTools().length, rendered);
    assert.equal(agent.toolEmbeddings() === null, rendered === 7);
    assert.equal(envelope.confidence === null, archive === model, 'the confidence head scores the call');
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

test('Needle 3: the envelope holds suppressed_calls, validation by the makers\' rules and confidence_head; a call under confidence 0.1 is withheld unless required', async () => {
  const tools = [{ name: 'send_message', description: 'Send a message',
    parameters: { type: 'object', properties: { to: { enum: ['Ann', 'Bob'] }, text: { type: 'string', maxLength: 8 } },
      required: ['to', 'text'] } }];
  const queries = ['text ANN hello', 'don’t text ANN, NEVER'];
  const seen = { grounded: 0, ungrounded: 0, withheld: 0, delivered: 0, negated: 0, plain: 0 };
  for (const bias of [0, -30]) { // a confidence head whose bias makes every call unsure
    const archive = await Model.fromBytes(writeCact3({ geometry: TINY3_GEOMETRY, seed: 8, bits: 2, group: 32, tokenizer,
      heads: [{ kind: 'confidence', probes: 2, queries: 2 }],
      weights: (name) => (name === 'confidence_head.bias' ? [bias] : undefined) }), { wasm: 'needle3' });
    // Random weights mostly refuse when no call is required: sample until a refused one came with a call.
    for (let seed = 1; seed <= 12 || (bias && !seen.withheld && seed <= 400); seed++) {
      const requireCall = seed % 2 === 0; // a required call (an extraction) is never withheld
      const agent = await Needle.create({ model: archive, tools, temperature: 1, seed, requireCall });
      const query = queries[Math.floor(seed / 2) % 2];
      const envelope = await agent.complete(query, { maxNewTokens: MAX_NEW });
      assert.equal(envelope.success, true, envelope.error);
      assert.equal(envelope.confidence < 0.1, bias !== 0, `confidence ${envelope.confidence}`);
      assert.equal(typeof envelope.confidence_head, 'number');
      agent.free();
      const withheld = envelope.suppressed_calls.length > 0;
      const calls = withheld ? envelope.suppressed_calls : envelope.function_calls;
      if (requireCall) assert.equal(withheld, false, 'a required call was withheld');
      if (bias && !requireCall && calls.length) assert.equal(withheld, true, 'an unsure call was delivered');
      if (!calls.length) { assert.equal(envelope.validation, undefined); continue; } // a refusal
      const want = ungrounded(calls, `\n${query}`, ['to']);
      assert.deepEqual(envelope.validation, { ungrounded: want, negation: negation(query) });
      seen[want.length ? 'ungrounded' : 'grounded']++;
      seen[withheld ? 'withheld' : 'delivered']++;
      seen[negation(query) ? 'negated' : 'plain']++;
    }
    archive.free();
  }
  console.log(`# ${JSON.stringify(seen)}`);
  for (const [what, count] of Object.entries(seen)) assert.ok(count > 0, `no call ${what} among the sampled turns`);
});

test('Needle 3: a turn delivers its calls as the makers\' post-processor leaves them', async () => {
  const door = { type: 'object', properties: { door: { type: 'string' } }, required: ['door'] };
  const tools = [{ name: 'lock_door', description: 'Lock a door', parameters: door },
    { name: 'unlock_door', description: 'Unlock a door', parameters: door }];
  const archive = await Model.fromBytes(writeCact3({ geometry: TINY3_GEOMETRY, seed: 9, bits: 2, group: 32, tokenizer }),
    { wasm: 'needle3' });
  const query = 'unlock the front door';
  let changed = 0;
  for (let seed = 1; seed <= 16; seed++) {
    const agent = await Needle.create({ model: archive, tools, temperature: 1, seed, requireCall: true });
    let written = ''; // the calls as the model wrote them
    const envelope = await agent.complete(query, { maxNewTokens: MAX_NEW, onToken: ({ kind, text }) => { if (kind === 'call') written += text; } });
    agent.free();
    written = written.slice(written.indexOf('[')); // the stream's first piece may carry the marker's leftover byte
    const want = await postprocessCalls({ tools, system: '', request: query, conversation: `\n${query}`, calls: written });
    assert.deepEqual(envelope.function_calls, JSON.parse(want.calls), `seed ${seed}: the model wrote ${written}`);
    if (want.calls !== written) changed++;
  }
  archive.free();
  assert.ok(changed > 0, 'no turn was changed by the post-processor: the test shows nothing');
});
