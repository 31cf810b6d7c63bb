// Hostile and careless callers of the public JS API: each case a user or an
// attacker hit (freed models and agents, long texts, aborts during prefill,
// bad options, huge integers, saved embeddings, limits). Every one ends in a
// NeedleError naming what is wrong, or in the right behaviour; never a trap,
// a hang or a silent change.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { Model } from '../../js/model.js';
import { Needle, NeedleError, STATUS, loadModel, loadModelInThread } from '../../js/index.js';
import { parseExactJson } from '../../js/exact-json.js';

const DEMO = new URL('../../dist/demo.cact', import.meta.url);
const RELEASED = new URL('../../dist/released-random.cact', import.meta.url);
const TOOLS = JSON.parse(readFileSync(new URL('../../web/tools.json', import.meta.url), 'utf8'));
const setLight = TOOLS.find((t) => t.name === 'set_light');
const demoBytes = readFileSync(DEMO);

const isNeedleError = (code, pattern) => (error) => {
  assert.ok(error instanceof NeedleError, `${error?.name}: ${error?.message}`);
  assert.equal(error.code, code, error.message);
  if (pattern) assert.match(error.message, pattern);
  return true;
};

test('a freed model refuses every call; free() twice is harmless', async () => {
  const model = await Model.fromBytes(demoBytes, { threads: 1 });
  const session = model.session();
  const first = model.free();
  assert.equal(model.free(), first);
  await first;
  for (const call of [() => model.tokenize('hi'), () => model.detokenize([5]), () => model.logits([2]),
    () => model.inspect(), () => model.session(), () => session.feed([2]), () => session.position]) {
    assert.throws(call, isNeedleError(STATUS.ARGUMENT, /freed/));
  }
  await assert.rejects(model.generate('hi').next(), isNeedleError(STATUS.ARGUMENT, /freed/));
});

test('freeing the model during a turn ends the turn with an AbortError; its agents refuse afterwards', async () => {
  const model = await Model.fromBytes(demoBytes, { threads: 1 });
  const agent = await Needle.create({ model, tools: [setLight] });
  const turn = agent.complete('turn on the kitchen lights', {
    onToken: () => { if (model.handle) model.free(); },
  });
  await assert.rejects(turn, (error) => error.name === 'AbortError' && error.code === STATUS.ABORTED);
  for (const call of [() => agent.renderedTools(), () => agent.prefillCount, () => agent.toolEmbeddings(),
    () => agent.envelope(), () => agent.reset()]) {
    assert.throws(call, isNeedleError(STATUS.ARGUMENT, /freed/));
  }
  await assert.rejects(agent.complete('hi'), isNeedleError(STATUS.ARGUMENT, /freed/));
  agent.free(); // harmless
});

test('a freed agent refuses every call', async () => {
  const model = await Model.fromBytes(demoBytes, { threads: 1 });
  try {
    const agent = await Needle.create({ model, tools: [setLight] });
    agent.free();
    agent.free();
    for (const call of [() => agent.renderedTools(), () => agent.prefillCount, () => agent.toolEmbeddings()]) {
      assert.throws(call, isNeedleError(STATUS.ARGUMENT, /freed/));
    }
    assert.equal(model.dependents.size, 0);
  } finally {
    await model.free();
  }
});

for (const worker of [false, true]) {
  test(`an abort during a long prefill takes effect within 50 ms and leaves the conversation as it was (${worker ? 'worker' : 'in-thread'})`, async () => {
    const model = await loadModel(RELEASED, { threads: 1, worker });
    try {
      const agent = await Needle.create({ model, tools: [setLight] });
      const query = 'please switch the lights in the living room on and make them bright '.repeat(40);
      const controller = new AbortController();
      const started = performance.now();
      let abortedAt = 0;
      setTimeout(() => { abortedAt = performance.now(); controller.abort(); }, 100);
      await assert.rejects(agent.complete(query, { signal: controller.signal }),
        (e) => e instanceof NeedleError && e.name === 'AbortError' && e.code === STATUS.ABORTED);
      const ended = performance.now();
      assert.ok(abortedAt > 0, `the prefill ended before the abort (${ended - started} ms)`);
      assert.ok(ended - abortedAt < 50, `the abort took ${ended - abortedAt} ms`);
      const done = await agent.complete('turn on the kitchen lights', { maxNewTokens: 48 });
      assert.equal(done.success, true, done.error);
      await agent.free();
    } finally {
      await model.free();
    }
  });
}

test('limits: a query or tools block over its limit fails at once, naming the limit', async () => {
  const model = await Model.fromBytes(demoBytes, { threads: 1 });
  try {
    const agent = await Needle.create({ model, tools: [setLight] });
    const started = performance.now();
    const envelope = await agent.complete('lights '.repeat(5000));
    assert.ok(performance.now() - started < 1000);
    assert.equal(envelope.success, false);
    assert.equal(envelope.error_code, STATUS.CONTEXT);
    assert.match(envelope.error, /query is \d+ tokens, over the limit of 4096/);
    agent.free();
    const long = { ...setLight, description: 'a very long description '.repeat(400) };
    await assert.rejects(Needle.create({ model, tools: [long] }), isNeedleError(STATUS.ARGUMENT, /over the limit of 8192/));
    const wide = Array.from({ length: 5 }, (_, i) => ({ ...setLight, name: `set_light_${i}`, description: 'x y '.repeat(300) }));
    await assert.rejects(Needle.create({ model, tools: wide }), isNeedleError(STATUS.CONTEXT, /tools block is \d+ tokens, over the limit of 2048/));
    // Token limits are counted as tools are declared, before any embedding or prefill.
    const tall = { ...setLight, name: 'tall_tool', description: 'q z '.repeat(1100) };
    await assert.rejects(Needle.create({ model, tools: [tall] }),
      isNeedleError(STATUS.ARGUMENT, /tool 0 \("tall_tool"\) is \d+ tokens, over the tools block's limit of 2048/));
    await assert.rejects(Needle.create({ model, tools: [{ ...tall, name: 'tall\n"x' }] }),
      isNeedleError(STATUS.ARGUMENT, /tool 0 \("tall\\u000a\\"x"\) is \d+ tokens/));
    const many = Array.from({ length: 40 }, (_, i) => ({ ...setLight, name: `light_${i}`, description: 'q z '.repeat(120) }));
    await assert.rejects(Needle.create({ model, tools: many }),
      isNeedleError(STATUS.ARGUMENT, /the tools declared are \d+ tokens, over the limit of 8192/));
    assert.equal(model.dependents.size, 0, 'a failed create leaves no agent behind');
  } finally {
    await model.free();
  }
});

test('a string after a call turn is a query, as index.d.ts says for kind auto', async () => {
  const model = await Model.fromBytes(demoBytes, { threads: 1 });
  try {
    const agent = await Needle.create({ model, tools: TOOLS.slice(0, 5) });
    const first = await agent.complete('turn off the kitchen lights');
    assert.equal(first.success, true, first.error);
    const second = await agent.complete('now the hall');
    assert.equal(second.success, true, second.error);
    assert.equal(second.type, 'call');
    agent.free();
  } finally {
    await model.free();
  }
});

test('invalid sampling and turn options are NeedleErrors naming the option', async () => {
  const model = await Model.fromBytes(demoBytes, { threads: 1 });
  try {
    const bad = [['temperature', -1], ['temperature', NaN], ['temperature', Infinity], ['temperature', 'hot'],
      ['topP', 0], ['topP', 2], ['topP', -1], ['topP', NaN], ['minP', 2], ['minP', -1], ['minP', NaN],
      ['repetitionPenalty', 0], ['repetitionPenalty', -2], ['repetitionPenalty', NaN],
      ['topK', -1], ['topK', 1.5], ['topK', 1e12], ['seed', NaN], ['seed', 'abc'], ['seed', 2 ** 40]];
    for (const [name, value] of bad) {
      const pattern = new RegExp(`option ${name} is`);
      await assert.rejects(Needle.create({ model, tools: [setLight], [name]: value }), isNeedleError(STATUS.ARGUMENT, pattern));
      await assert.rejects(model.generate('hi', { [name]: value }).next(), isNeedleError(STATUS.ARGUMENT, pattern));
    }
    const agent = await Needle.create({ model, tools: [setLight] });
    for (const maxNewTokens of [-1, 4294967301, 1.5, 0, NaN]) {
      await assert.rejects(agent.complete('hi', { maxNewTokens }), isNeedleError(STATUS.ARGUMENT, /option maxNewTokens is/));
    }
    await assert.rejects(agent.complete('hi', { kind: 'later' }), isNeedleError(STATUS.ARGUMENT, /option kind is "later"/));
    agent.free();
    const cli = spawnSync(process.execPath, [new URL('../../js/cli.js', import.meta.url).pathname, 'generate', '--prompt', 'hi', '--top-p', '7'], { encoding: 'utf8' });
    assert.equal(cli.status, 1);
    assert.match(cli.stderr, /option topP is 7/);
  } finally {
    await model.free();
  }
});

test('integers beyond 2^53 keep every digit with largeIntegers bigint or string', () => {
  const text = '{"function_calls":[{"name":"n","arguments":{"id":975353535353535353,"small":12,"f":1.5,"s":"975353535353535353"}}]}';
  assert.equal(parseExactJson(text).function_calls[0].arguments.id, 975353535353535400); // JSON.parse, the default
  const { arguments: args } = parseExactJson(text, 'bigint').function_calls[0];
  assert.equal(args.id, 975353535353535353n);
  assert.equal(args.small, 12);
  assert.equal(args.f, 1.5);
  assert.equal(args.s, '975353535353535353');
  assert.equal(parseExactJson(text, 'string').function_calls[0].arguments.id, '975353535353535353');
  assert.deepEqual(parseExactJson('[1,-2,3e2,"\\"x",12345678901234567890]', 'bigint'), [1, -2, 300, '"x', 12345678901234567890n]);
});

test('saved tool embeddings are checked: a missing vector list or a NaN is a NeedleError', async () => {
  const model = await Model.fromBytes(demoBytes, { threads: 1 });
  try {
    const agent = await Needle.create({ model, tools: TOOLS });
    const saved = agent.toolEmbeddings();
    agent.free();
    await assert.rejects(Needle.create({ model, tools: TOOLS, toolEmbeddings: { fingerprint: saved.fingerprint } }),
      isNeedleError(STATUS.ARGUMENT, /toolEmbeddings.vectors/));
    const vectors = Float32Array.from(saved.vectors);
    vectors[3] = NaN;
    await assert.rejects(Needle.create({ model, tools: TOOLS, toolEmbeddings: { ...saved, vectors } }),
      isNeedleError(STATUS.ARGUMENT, /toolEmbeddings.vectors\[3\] is NaN/));
    assert.equal(model.dependents.size, 0);
  } finally {
    await model.free();
  }
});

test('failed loads stop their engine threads at once, not at garbage collection', async () => {
  const threads = () => readdirSync('/proc/self/task').length; // this process's OS threads
  const bytes = new Uint8Array(demoBytes);
  bytes[0] ^= 0xff;
  await assert.rejects(loadModelInThread(bytes, { threads: 2 }), isNeedleError(STATUS.FORMAT)); // warm
  const before = threads();
  for (let i = 0; i < 10; i++) {
    await assert.rejects(loadModelInThread(bytes, { threads: 2 }), isNeedleError(STATUS.FORMAT));
  }
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.ok(threads() <= before + 1, `${threads() - before} more threads after 10 failed loads`);
});

test('needle-wasm inspect | head ends quietly', () => {
  const out = spawnSync('bash', ['-c', `node ${new URL('../../js/cli.js', import.meta.url).pathname} inspect | head -1`], { encoding: 'utf8' });
  assert.equal(out.status, 0);
  assert.doesNotMatch(out.stderr, /EPIPE|Error/);
});

test('hostile schemas: no stack growth, exact oneOf, wide bounds, decided at create, errors that name the tool', async () => {
  const model = await Model.fromBytes(demoBytes, { threads: 1 });
  const declare = (parameters, name = 'hostile') => Needle.create({ model, tools: [{ name, description: 'A tool.', parameters }] });
  const object = (properties, required = Object.keys(properties)) => ({ type: 'object', properties, required });
  try {
    // A required string of 10,000 code points: the shortest completion is
    // built without recursion, so turn after turn neither traps nor leaks.
    const long = await declare(object({ a: { type: 'string', minLength: 10000 } }));
    const memory = () => model.engine.memory.buffer.byteLength;
    let first = 0;
    for (let i = 0; i < 30; i++) {
      const envelope = await long.complete('write it', { maxNewTokens: 32, kind: 'query' });
      assert.ok(envelope.success || envelope.error_code !== undefined);
      if (i === 1) first = memory();
      long.reset();
    }
    assert.ok(memory() <= first, 'memory grew turn after turn');
    long.free();
    for (let i = 0; i < 30; i++) {
      const extractor = await declare(object({ n: { type: 'string' } }));
      await assert.rejects(extractor.extract('x', object({ s: { type: 'string', minLength: 8000 } })),
        isNeedleError(STATUS.CONTEXT, /leaves \d+ tokens for the call, which needs at least \d+/));
      extractor.free();
      if (i === 1) first = memory();
    }
    assert.ok(memory() <= first, 'memory grew extraction after extraction');

    // oneOf means exactly one branch: overlapping branches are refused, naming the tool and the pointer.
    await assert.rejects(declare(object({ k: { oneOf: [{ type: 'integer' }, { type: 'number' }] } })),
      isNeedleError(STATUS.SCHEMA, /tool "hostile".*\/properties\/k\/oneOf: branches 0 and 1 overlap/));
    await assert.rejects(declare(object({ k: { oneOf: [{ const: 1 }, { const: 1 }] } })), isNeedleError(STATUS.SCHEMA, /oneOf/));
    // Recursion without a base case and non-object parameters are decided at create.
    await assert.rejects(declare({ $ref: '#' }), isNeedleError(STATUS.SCHEMA, /tool "hostile"/));
    await assert.rejects(declare({ type: 'object', $defs: { n: object({ next: { $ref: '#/$defs/n' } }) },
      properties: { head: { $ref: '#/$defs/n' } }, required: ['head'] }), isNeedleError(STATUS.SCHEMA, /recursion never ends/));
    await assert.rejects(declare({ type: 'string' }), isNeedleError(STATUS.SCHEMA, /tool "hostile"/));
    // Keys compare whole: "a\u0000b" and "a\u0000c" are two properties, not a duplicate "a".
    (await declare(object({ 'a\u0000b': { type: 'string' }, 'a\u0000c': { type: 'string' } }, []))).free();
    // Bounds a double cannot hold exactly still yield calls inside them.
    const wide = await Needle.create({ model, largeIntegers: 'bigint', tools: [{ name: 'hostile', parameters:
      object({ big: { type: 'integer', minimum: 1e18, maximum: 1e19 }, tiny: { type: 'number', minimum: 1e-7, maximum: 2e-7 } }) }] });
    const { function_calls: calls } = await wide.complete('go', { kind: 'query', maxNewTokens: 96 });
    for (const { arguments: a } of calls) {
      assert.ok(BigInt(a.big) >= 10n ** 18n && BigInt(a.big) <= 10n ** 19n, `big ${a.big}`);
      assert.ok(a.tiny >= 1e-7 && a.tiny <= 2e-7, `tiny ${a.tiny}`);
    }
    wide.free();
  } finally {
    await model.free();
  }
});
