// The agent in a worker (protocol.js 'agent' messages, over Node
// worker_threads: the client and worker code a page uses): the same
// envelopes and pieces as the in-thread agent for the same seed, pieces
// streamed as produced, an abort within one piece that loses nothing, run()
// executing the JS tools in this thread, extract, reset, and errors
// re-thrown with their name, message and code. Needs dist/needle.wasm.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModel, Needle, NeedleError, STATUS, tool } from '../../js/index.js';
import { WorkerNeedle } from '../../js/client.js';
import { writeCact, TINY_GEOMETRY } from '../../js/cact-writer.js';
import { tokenizerBlobFromModel } from '../../js/sentencepiece-model.js';
import { TOOL_SETS } from './agent-schemas.js';

const dir = mkdtempSync(join(tmpdir(), 'needle-agent-worker-'));
const path = join(dir, 'tiny.cact');
const TIMING = ['prefill_tps', 'decode_tps', 'peak_ram_mb'];
const SMART_HOME = TOOL_SETS.find((s) => s.name === 'smart home').tools;
let local;
let remote;

before(async () => {
  const tokenizer = tokenizerBlobFromModel(readFileSync(new URL('../fixtures/tokenizer/needle-test-bpe.model', import.meta.url)));
  writeFileSync(path, writeCact({ geometry: TINY_GEOMETRY, seed: 11, bits: 2, group: 32, heads: true, tokenizer }));
  local = await loadModel(path, { worker: false });
  remote = await loadModel(path, { worker: true });
});
after(async () => { local.free(); await remote.free(); rmSync(dir, { recursive: true, force: true }); });

/** An envelope without the timing fields, which differ run to run. */
const content = (envelope) => Object.fromEntries(Object.entries(envelope).filter(([key]) => !TIMING.includes(key)));

async function turn(agent, text, options = {}) {
  const pieces = [];
  const envelope = await agent.complete(text, { maxNewTokens: 400, ...options, onToken: (p) => pieces.push(p) });
  return { envelope, pieces };
}

test('in the worker: the same pieces and envelopes as in this thread, turn after turn', async () => {
  let compared = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const options = { tools: SMART_HOME, temperature: 1, seed, system: 'date: 2026-07-21' };
    const here = await Needle.create({ model: local, ...options });
    const there = await Needle.create({ model: remote, ...options });
    assert.ok(there instanceof WorkerNeedle);
    assert.deepEqual(there.renderedTools(), here.renderedTools());
    for (const [text, kind] of [['dim the kitchen to 10', 'query'], [{ ok: true }, 'tool_result'], ['all off', 'query']]) {
      const a = await turn(here, text, { kind });
      const b = await turn(there, text, { kind });
      assert.deepEqual(content(b.envelope), content(a.envelope));
      assert.deepEqual(b.pieces, a.pieces);
      assert.ok(b.pieces.every((p) => ['reasoning', 'call', 'marker'].includes(p.kind)));
      assert.equal(there.prefillCount, here.prefillCount);
      if (b.envelope.success) assert.ok(b.pieces.length > 0 && b.envelope.peak_ram_mb > 0 && b.envelope.decode_tps > 0);
      if (b.pieces.length) compared++;
    }
    await there.reset();
    here.reset();
    const a = await turn(here, 'turn the heating up');
    const b = await turn(there, 'turn the heating up');
    assert.deepEqual(content(b.envelope), content(a.envelope));
    assert.equal(there.prefillCount, here.prefillCount);
    here.free();
    await there.free();
  }
  assert.ok(compared >= 10, `only ${compared} turns generated`);
});

test('an abort stops the turn within one piece; the next turn is what a fresh agent gives', async () => {
  const agent = await Needle.create({ model: remote, tools: SMART_HOME });
  const controller = new AbortController();
  let seen = 0;
  await assert.rejects(agent.complete('do it', {
    maxNewTokens: 2000, signal: controller.signal,
    onToken: () => { if (++seen === 3) controller.abort(); },
  }), (e) => e instanceof NeedleError && e.name === 'AbortError' && e.code === STATUS.ABORTED);
  assert.equal(seen, 3, 'no piece may arrive after the abort');
  const after = await agent.complete('do it', { maxNewTokens: 400 });
  const fresh = await Needle.create({ model: local, tools: SMART_HOME });
  const want = await fresh.complete('do it', { maxNewTokens: 400 });
  assert.deepEqual(content(after), content(want));
  // A signal aborted before the call rejects the same way.
  await assert.rejects(agent.complete('do it', { signal: AbortSignal.abort() }),
    (e) => e instanceof NeedleError && e.name === 'AbortError' && e.code === STATUS.ABORTED);
  fresh.free();
  await agent.free();
});

test('run() executes the JS tools in this thread; extract() fills a schema', async () => {
  const calls = [];
  const setLight = tool((args) => { calls.push(args); return { ok: true }; }, {
    name: 'set_light', description: 'Switch a light',
    parameters: { type: 'object', properties: { room: { type: 'string', maxLength: 12 }, on: { type: 'boolean' } }, required: ['room', 'on'] },
  });
  let ran = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const here = await Needle.create({ model: local, tools: [setLight], temperature: 1, seed });
    const there = await Needle.create({ model: remote, tools: [setLight], temperature: 1, seed });
    const a = await here.run('switch on the hall light', { maxNewTokens: 200, maxTurns: 2 });
    const before = calls.length;
    const b = await there.run('switch on the hall light', { maxNewTokens: 200, maxTurns: 2 });
    assert.deepEqual(content(b), content(a));
    assert.equal(calls.length - before, b.results.length);
    ran += b.results.length;
    here.free();
    await there.free();
  }
  assert.ok(ran > 0, 'no seed made a call');
  const schema = { type: 'object', properties: { total: { type: 'number' }, currency: { enum: ['EUR', 'USD'] } }, required: ['total', 'currency'] };
  const here = await Needle.create({ model: local, temperature: 1, seed: 3 });
  const there = await Needle.create({ model: remote, temperature: 1, seed: 3 });
  assert.deepEqual(await there.extract('total 12.50 EUR', schema, { maxNewTokens: 200 }),
    await here.extract('total 12.50 EUR', schema, { maxNewTokens: 200 }));
  here.free();
  await there.free();
});

test('errors cross with their name, message and code; the worker stays usable', async () => {
  const bad = [{ name: 'set_light', parameters: { type: 'object', properties: { level: { type: 'integer', foo: 1 } } } }];
  await assert.rejects(Needle.create({ model: remote, tools: bad }), (error) => {
    assert.ok(error instanceof NeedleError);
    assert.equal(error.code, STATUS.SCHEMA);
    assert.match(error.message, /set_light.*\/properties\/level/);
    assert.match(error.stack, /needle worker/);
    return true;
  });
  const agent = await Needle.create({ model: remote, tools: SMART_HOME });
  // One turn at a time.
  const first = agent.complete('dim the kitchen', { maxNewTokens: 400 });
  await assert.rejects(agent.complete('again'), (e) => e.code === STATUS.ARGUMENT && /turn is running/.test(e.message));
  await assert.rejects(agent.reset(), (e) => e.code === STATUS.ARGUMENT);
  assert.equal((await first).success, true);
  // A call of a tool with no JS function.
  const noFunction = await Needle.create({ model: remote, tools: SMART_HOME, temperature: 1, seed: 1 });
  let unknown = null;
  for (let seed = 1; seed <= 10 && !unknown; seed++) {
    const probe = await Needle.create({ model: remote, tools: SMART_HOME, temperature: 1, seed });
    unknown = await probe.run('dim the kitchen', { maxNewTokens: 400 }).then(() => null, (e) => e);
    await probe.free();
  }
  assert.ok(unknown, 'no seed made a call');
  assert.equal(unknown.code, 'UNKNOWN_TOOL');
  await noFunction.free();
  await agent.free();
  await assert.rejects(agent.complete('x'), (e) => /freed/.test(e.message));
  assert.deepEqual(await remote.tokenize('lights'), local.tokenize('lights'));
});

test('Needle.create from a source with worker: true owns its worker model', async () => {
  const agent = await Needle.create({ model: path, worker: true, tools: SMART_HOME, temperature: 1, seed: 2, load: { onProgress: () => {} } });
  const here = await Needle.create({ model: local, tools: SMART_HOME, temperature: 1, seed: 2 });
  assert.ok(agent instanceof WorkerNeedle);
  assert.deepEqual(content((await turn(agent, 'lights on')).envelope), content((await turn(here, 'lights on')).envelope));
  await agent.free();
  await assert.rejects(agent.model.tokenize('x'), (e) => /freed/.test(e.message));
  here.free();
  const inThread = await Needle.create({ model: path, tools: SMART_HOME });
  assert.ok(inThread instanceof Needle);
  inThread.free();
});

test('retrieval embeddings cross the worker boundary and are reused there', async () => {
  const tools = Array.from({ length: 7 }, (_, i) => ({ name: `tool_${i}`, parameters: { type: 'object', properties: {} } }));
  const inThread = await Needle.create({ model: local, tools });
  const saved = inThread.toolEmbeddings();
  inThread.free();
  const agent = await remote.createAgent({ tools, toolEmbeddings: saved });
  assert.deepEqual(await agent.toolEmbeddings(), saved);
  await agent.free();
});

test('embed() in the worker returns what it returns in this thread', async () => {
  const here = local.embed('dim the kitchen');
  const there = await remote.embed('dim the kitchen');
  assert.equal(there.length, 128);
  assert.deepEqual(there, here);
});
