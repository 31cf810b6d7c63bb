// The demo model's warning (js/demo-model.js): the built-in demo model was
// trained on the 18 tools of dist/demo-tools.json only, so an agent over it
// that declares another tool (another name, or the same name with another
// description or other parameters) carries `warnings` in every envelope: complete() and run(), in
// this thread and in a worker, and in openai()'s answers. The demo tools, or
// any other archive, give none (the field is absent). The archive is known by
// its bytes, however it was loaded, and the constants match dist/.
// Needs dist/ (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { loadModel, Needle, openai, tool } from '../../js/index.js';
import { DEMO_ARCHIVE_FNV, DEMO_TOOLS, fnv1a64, declarationHash } from '../../js/demo-model.js';

const DEMO_BYTES = readFileSync(new URL('../../dist/demo.cact', import.meta.url));
const DEMO = JSON.parse(readFileSync(new URL('../../dist/demo-tools.json', import.meta.url), 'utf8'));
// The catalogue's set_light takes room, state and brightness; this one room and level.
const SET_LIGHT = {
  name: 'set_light', description: 'Set the lights of a room.',
  parameters: { type: 'object', required: ['room'], properties: { room: { type: 'string' }, level: { type: 'integer', minimum: 0, maximum: 100 } } },
};
const QUERY = 'dim the kitchen lights to 10';

let model;
let workerModel;

before(async () => {
  model = await loadModel(undefined, { worker: false });
  workerModel = await loadModel(undefined, { worker: true });
});
after(async () => {
  await model.free();
  await workerModel.free();
});

/** Asserts the one warning, naming the foreign tools and a way to a real model. */
function assertWarns(envelope, names) {
  assert.equal(envelope.warnings?.length, 1, JSON.stringify(envelope));
  const [warning] = envelope.warnings;
  assert.match(warning, /^The built-in demo model was trained on its 18 tools only \(dist\/demo-tools\.json\)/);
  assert.ok(warning.includes(`not on ${names.join(', ')} as declared here`), warning);
  assert.ok(warning.includes('loadNeedle2()') && warning.includes('Needle.create({ model })'), warning);
}

async function firstEnvelope(options, text = QUERY) {
  const agent = await Needle.create(options);
  try {
    return await agent.complete(text, { maxNewTokens: 64 });
  } finally {
    await agent.free();
  }
}

const reversed = (object) => Object.fromEntries(Object.entries(object).reverse());

test('the constants are those of dist/: the archive\'s FNV-1a 64 and each demo tool\'s declaration', () => {
  assert.equal(fnv1a64(DEMO_BYTES), DEMO_ARCHIVE_FNV);
  assert.equal(DEMO.length, 18);
  assert.deepEqual(DEMO_TOOLS, Object.fromEntries(DEMO.map((t) => [t.name, declarationHash(t)])));
  // Key order aside, a declaration hashes the same; any other change does not.
  const timer = DEMO.find((t) => t.name === 'set_timer');
  assert.equal(declarationHash(reversed({ ...timer, parameters: reversed(timer.parameters) })), DEMO_TOOLS.set_timer);
  assert.notEqual(declarationHash({ ...timer, parameters: { ...timer.parameters, required: [] } }), DEMO_TOOLS.set_timer);
  assert.notEqual(declarationHash({ ...timer, description: `${timer.description} ` }), DEMO_TOOLS.set_timer);
});

test('the demo tools, all or some, in any key order, give no warning', async () => {
  const timer = DEMO.find((t) => t.name === 'set_timer');
  const asFunction = tool(() => ({ ok: true }), { ...timer, parameters: reversed(timer.parameters) });
  for (const tools of [DEMO, DEMO.slice(2, 5), [asFunction], []]) {
    const envelope = await firstEnvelope({ model, tools });
    assert.equal(envelope.success, true);
    assert.equal('warnings' in envelope, false, tools.map((t) => t.name).join());
  }
  const agent = await Needle.create({ model, tools: [asFunction] });
  const ran = await agent.run('set a timer for 10 minutes');
  assert.deepEqual(ran.results.map((r) => r.name), ['set_timer']);
  assert.equal('warnings' in ran, false);
  agent.free();
});

test('a tool the demo model was not trained on: every envelope warns, run() included', async () => {
  assertWarns(await firstEnvelope({ model, tools: [SET_LIGHT] }), ['set_light']);
  const openWindow = { name: 'open_window', parameters: { type: 'object', properties: { room: { type: 'string' } } } };
  assertWarns(await firstEnvelope({ model, tools: [...DEMO.slice(1, 3), openWindow, SET_LIGHT] }), ['open_window', 'set_light']);
  // A demo tool reworded: the model reads descriptions too (demo-model.js has what rewording costs).
  const reworded = DEMO.slice(1, 3).map((t, i) => (i ? t : { ...t, description: `Use this to ${t.description.toLowerCase()}` }));
  assertWarns(await firstEnvelope({ model, tools: reworded }), [DEMO[1].name]);
  const agent = await Needle.create({ model, tools: [tool(() => ({ ok: true }), SET_LIGHT)] });
  try {
    const first = await agent.complete(QUERY);
    assertWarns(first, ['set_light']);
    assertWarns(await agent.complete({ ok: true }, { kind: 'tool_result' }), ['set_light']);
    first.warnings.push('changed by the caller'); // each envelope has its own copy
    assertWarns(await agent.run(QUERY), ['set_light']);
    // A turn that fails still says so: a query over the limit.
    const failed = await agent.complete('lights '.repeat(5000));
    assert.equal(failed.success, false);
    assertWarns(failed, ['set_light']);
  } finally {
    agent.free();
  }
});

test('known by its bytes: the demo archive loaded from bytes warns, another archive never does', async () => {
  const fromBytes = await loadModel(new Uint8Array(DEMO_BYTES), { worker: false });
  assertWarns(await firstEnvelope({ model: fromBytes, tools: [SET_LIGHT] }), ['set_light']);
  await fromBytes.free();
  const other = await loadModel(new URL('../../dist/tiny.cact', import.meta.url), { worker: false });
  assert.equal('warnings' in await firstEnvelope({ model: other, tools: [SET_LIGHT] }, 'hi'), false);
  await other.free();
});

test('in a worker: the same warnings, and none for the demo tools', async () => {
  assertWarns(await firstEnvelope({ model: workerModel, tools: [SET_LIGHT] }), ['set_light']);
  assert.equal('warnings' in await firstEnvelope({ model: workerModel, tools: DEMO }), false);
  const agent = await Needle.create({ model: workerModel, tools: [tool(() => ({ ok: true }), SET_LIGHT)] });
  assertWarns(await agent.run(QUERY), ['set_light']);
  await agent.free();
});

test('openai(): a top-level warnings field, whole or on the streamed finish_reason chunk', async () => {
  const ask = (tools, extra = {}) => ({ messages: [{ role: 'user', content: QUERY }], tools: tools.map((fn) => ({ type: 'function', function: fn })), ...extra });
  for (const m of [model, workerModel]) {
    const client = await openai({ model: m });
    try {
      assertWarns(await client.chat.completions.create(ask([SET_LIGHT])), ['set_light']);
      assert.equal('warnings' in await client.chat.completions.create(ask(DEMO)), false);
      const chunks = [];
      for await (const chunk of await client.chat.completions.create(ask([SET_LIGHT], { stream: true }))) chunks.push(chunk);
      const warned = chunks.filter((c) => c.warnings);
      assert.equal(warned.length, 1);
      assert.ok(warned[0].choices[0].finish_reason);
      assertWarns(warned[0], ['set_light']);
      // An extraction declares its schema as a tool: a schema the model never saw warns too.
      const format = { type: 'json_schema', json_schema: { name: 'light', schema: SET_LIGHT.parameters } };
      assertWarns(await client.chat.completions.create({ messages: [{ role: 'user', content: QUERY }], response_format: format }), ['light']);
    } finally {
      await client.free();
    }
  }
});
