// The agent contract (spec sections 7-8) on random-weight archives: whatever
// the weights, sampling at temperature 1, every call parses and validates
// against its schemas (checked by ajv, an independent validator); turns reuse
// the KV cache; reset rewinds to the tools block; retrieval renders five tools.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { writeCact, TINY_GEOMETRY } from '../../js/cact-writer.js';
import { tokenizerBlobFromModel } from '../../js/sentencepiece-model.js';
import { Model } from '../../js/model.js';
import { Needle, tool } from '../../js/agent.js';
import { NeedleError } from '../../js/errors.js';
import { TOOL_SETS, TWELVE_TOOLS } from './agent-schemas.js';

const SAMPLES = 20;
// The turn budget: the budget guard forces the shortest valid completion when
// it runs low, so every turn ends with a valid call (and the file runs fast).
const MAX_NEW = 160;
const tokenizer = tokenizerBlobFromModel(readFileSync(new URL('../fixtures/tokenizer/needle-test-bpe.model', import.meta.url)));
const archive = writeCact({ geometry: TINY_GEOMETRY, seed: 11, bits: 2, group: 32, heads: true, tokenizer });
const model = await Model.fromBytes(archive);

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);

function assertValidCalls(envelope, tools) {
  assert.equal(envelope.success, true, `turn failed: ${envelope.error}`);
  assert.ok(Array.isArray(envelope.function_calls));
  for (const call of envelope.function_calls) {
    assert.deepEqual(Object.keys(call), ['name', 'arguments'], JSON.stringify(call));
    const declared = tools.find((t) => t.name === call.name);
    assert.ok(declared, `undeclared tool ${call.name}`);
    const validate = ajv.compile(declared.parameters);
    assert.ok(validate(call.arguments), `${call.name} ${JSON.stringify(call.arguments)}: ${ajv.errorsText(validate.errors)}`);
  }
}

test(`${TOOL_SETS.length} tool sets x ${SAMPLES} sampled calls parse and validate`, async () => {
  assert.ok(TOOL_SETS.length >= 40);
  for (const set of TOOL_SETS) {
    for (let seed = 1; seed <= SAMPLES; seed++) {
      const agent = await Needle.create({ model, tools: set.tools, temperature: 1, seed });
      const envelope = await agent.complete(set.query, { maxNewTokens: MAX_NEW });
      assertValidCalls(envelope, set.tools);
      assert.equal(envelope.type, 'call');
      agent.free();
    }
  }
});

test('multi-turn: query, call, tool result, reply; reset; query again reuses the cache', async () => {
  const tools = TOOL_SETS.find((s) => s.name === 'smart home').tools;
  // Find a seed whose first turn calls a tool (random weights may refuse with []).
  let agent, first;
  for (let seed = 1; ; seed++) {
    agent = await Needle.create({ model, tools, temperature: 1, seed, system: 'date: 2026-07-21' });
    first = await agent.complete('dim the kitchen to 10', { maxNewTokens: MAX_NEW });
    if (first.function_calls.length) break;
    agent.free();
  }
  assertValidCalls(first, tools);
  assert.equal(first.type, 'call');
  for (const field of ['prefill_tps', 'decode_tps', 'peak_ram_mb']) assert.ok(first[field] > 0, field);
  assert.ok(first.confidence === null || (first.confidence >= 0 && first.confidence <= 1));

  const result = { ok: true, brightness: 10 };
  const second = await agent.complete(result, { maxNewTokens: MAX_NEW });
  assertValidCalls(second, tools);
  assert.equal(second.type, second.function_calls.length ? 'call' : 'respond');
  // The second turn prefilled only its own tokens: the tool-result turn and "▁<think>".
  const turn = `\n<|im_start|>user\n<tool_result>${JSON.stringify(result)}</tool_result><|im_end|>\n<|im_start|>assistant\n`;
  assert.equal(agent.prefillCount, model.tokenize(turn).length + model.tokenize('<think>').length);

  agent.reset();
  const again = await agent.complete('turn everything off', { maxNewTokens: MAX_NEW });
  assertValidCalls(again, tools);
  const continuation = model.tokenize('</tools>\nturn everything off<|im_end|>\n<|im_start|>assistant\n');
  const afterMarker = continuation.slice(continuation.indexOf(model.pieceId('</tools>')) + 1);
  assert.equal(agent.prefillCount, afterMarker.length + model.tokenize('<think>').length);
  agent.free();
});

test('a failed turn loses nothing: after an abort mid-turn the same query gives what a fresh agent gives', async () => {
  const tools = TOOL_SETS[0].tools;
  const agent = await Needle.create({ model, tools });
  const controller = new AbortController();
  let pieces = 0;
  await assert.rejects(agent.complete('do it', {
    maxNewTokens: MAX_NEW, signal: controller.signal,
    onToken: () => { if (++pieces === 3) controller.abort(); },
  }), (e) => e instanceof NeedleError && e.name === 'AbortError' && e.code === 8);
  const after = await agent.complete('do it', { maxNewTokens: MAX_NEW });
  const fresh = await Needle.create({ model, tools });
  const want = await fresh.complete('do it', { maxNewTokens: MAX_NEW });
  assert.equal(after.success, true);
  assert.deepEqual(after.function_calls, want.function_calls);
  assert.equal(after.reasoning, want.reasoning);
  agent.free();
  fresh.free();
});

test('retrieval: of 12 tools only 5 reach the prompt and the grammar', async () => {
  for (let seed = 1; seed <= 5; seed++) {
    const agent = await Needle.create({ model, tools: TWELVE_TOOLS, temperature: 1, seed });
    const envelope = await agent.complete('what is the weather in Lisbon', { maxNewTokens: MAX_NEW });
    const rendered = agent.renderedTools();
    assert.equal(rendered.length, 5);
    const names = TWELVE_TOOLS.map((t) => t.name);
    // Rendered in declaration order.
    assert.deepEqual(rendered.map((t) => t.name), [...rendered.map((t) => t.name)].sort((a, b) => names.indexOf(a) - names.indexOf(b)));
    assertValidCalls(envelope, rendered);
    agent.free();
  }
});

test('retrieval embeddings are saved and reused while archive and tools are unchanged', async () => {
  const first = await Needle.create({ model, tools: TWELVE_TOOLS });
  const saved = first.toolEmbeddings();
  assert.equal(saved.vectors.length, TWELVE_TOOLS.length * saved.dim);
  assert.match(saved.fingerprint, /^[0-9a-f]{16}$/);
  first.free();

  const reused = await Needle.create({ model, tools: TWELVE_TOOLS, toolEmbeddings: saved });
  assert.equal(reused.toolEmbeddingsReused, true);
  assert.deepEqual(reused.toolEmbeddings(), saved);
  reused.free();

  // Given vectors are what retrieval uses: all equal, every tool ties, the first five win.
  const flat = { ...saved, vectors: saved.vectors.map((_, i) => saved.vectors[i % saved.dim]) };
  const tied = await Needle.create({ model, tools: TWELVE_TOOLS, toolEmbeddings: flat });
  await tied.complete('what is the weather in Lisbon', { maxNewTokens: 64 });
  assert.deepEqual(tied.renderedTools().map((t) => t.name), TWELVE_TOOLS.slice(0, 5).map((t) => t.name));
  tied.free();

  const changed = TWELVE_TOOLS.map((t, i) => (i === 3 ? { ...t, description: 'changed' } : t));
  const stale = await Needle.create({ model, tools: changed, toolEmbeddings: saved });
  assert.equal(stale.toolEmbeddingsReused, false);
  assert.notEqual(stale.toolEmbeddings().fingerprint, saved.fingerprint);
  stale.free();
});

test('schema errors name the tool and the JSON pointer at init', async () => {
  const bad = [{ name: 'set_light', parameters: { type: 'object', properties: { level: { type: 'integer', foo: 1 } } } }];
  await assert.rejects(Needle.create({ model, tools: bad }), (error) => {
    assert.equal(error.code, 7);
    assert.match(error.message, /set_light/);
    assert.match(error.message, /\/properties\/level/);
    return true;
  });
});

test('run() executes JS tools and feeds results back; extract() returns arguments', async () => {
  const seen = [];
  const setLight = tool((args) => { seen.push(args); return { ok: true }; }, {
    name: 'set_light', description: 'Switch a light',
    parameters: { type: 'object', properties: { room: { type: 'string', maxLength: 12 }, on: { type: 'boolean' } }, required: ['room', 'on'] },
  });
  for (let seed = 1; seed <= 10; seed++) {
    const agent = await Needle.create({ model, tools: [setLight], temperature: 1, seed });
    const final = await agent.run('switch on the hall light', { maxNewTokens: 200, maxTurns: 2 });
    assert.equal(final.results.length, seen.length);
    for (const r of final.results) assert.deepEqual(r.result, { ok: true });
    seen.length = 0;
    agent.free();
  }
  const schema = { type: 'object', properties: { total: { type: 'number' }, currency: { enum: ['EUR', 'USD'] } }, required: ['total', 'currency'] };
  for (let seed = 1; seed <= 8; seed++) { // the grammar makes every extraction call its tool, even short of tokens
    const agent = await Needle.create({ model, temperature: 1, seed });
    const record = await agent.extract('total 12.50 EUR', schema, { maxNewTokens: seed === 8 ? 90 : 200 });
    assert.ok(ajv.validate(schema, record), `seed ${seed}: ${ajv.errorsText()}`);
    agent.free();
  }
});
