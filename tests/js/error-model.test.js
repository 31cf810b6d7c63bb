// Issue 46, finding 6: inputs that used to leak a RangeError or TypeError,
// pass silently or reject with the wrong code, now each a NeedleError with a
// documented code, in this thread and in a worker alike: tool results nested
// 5,000 deep, BigInt or circular; tools that are no array; a system that is
// no string; free() during a turn (an AbortError); detokenize() of ids that
// are not token ids (2**32 + 5 used to wrap to <|im_end|>). The agent stays
// usable after each refusal. Needs dist/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { loadModel, Needle, NeedleError, STATUS, openai, tool } from '../../js/index.js';

const TOOLS = JSON.parse(readFileSync(new URL('../../dist/demo-tools.json', import.meta.url), 'utf8')).slice(0, 3);

const isArgument = (pattern) => (error) => {
  assert.ok(error instanceof NeedleError, `${error?.constructor?.name}: ${error?.message}`);
  assert.equal(error.code, STATUS.ARGUMENT);
  assert.match(error.message, pattern);
  return true;
};
const isAbort = (error) => {
  assert.ok(error instanceof NeedleError, `${error?.constructor?.name}: ${error?.message}`);
  assert.equal(error.name, 'AbortError');
  assert.equal(error.code, STATUS.ABORTED);
  return true;
};

/** value nested n deep: [[[...1...]]] or {a:{a:...}}. */
function nested(n, wrap) {
  let value = 1;
  for (let i = 0; i < n; i++) value = wrap(value);
  return value;
}

for (const worker of [false, true]) {
  const where = worker ? 'in a worker' : 'in this thread';

  test(`tool results JSON cannot hold are refused naming where, ${where}`, async () => {
    const model = await loadModel(undefined, { worker, threads: 1 });
    try {
      const agent = await Needle.create({ model, tools: TOOLS });
      const result = (value) => agent.complete(value, { kind: 'tool_result', maxNewTokens: 8 });
      await assert.rejects(result(nested(5000, (v) => [v])), isArgument(/^the tool result at \/0\/0\/0\/0\/0\/0\/0\/0\/… is nested deeper than 256 levels$/));
      await assert.rejects(result(nested(5000, (v) => ({ a: v }))), isArgument(/nested deeper than 256 levels/));
      await assert.rejects(result({ ok: true, count: 12n }), isArgument(/^the tool result at \/count is a BigInt, which JSON cannot hold/));
      const circular = { items: [{ name: 'x' }] };
      circular.items[0].owner = circular;
      await assert.rejects(result(circular), isArgument(/^the tool result at \/items\/0\/owner refers back to the top: a circular value/));
      await assert.rejects(result(undefined), isArgument(/^the tool result is undefined: not a JSON value$/));
      await assert.rejects(result({ toJSON() { throw new Error('no'); } }), isArgument(/^the tool result cannot be written as JSON: no$/));
      // 256 levels are fine; so is a shared (not circular) value.
      const shared = { a: 1 };
      for (const fine of [nested(256, (v) => [v]), [shared, { shared }]]) {
        await agent.reset();
        assert.equal(typeof (await agent.complete(fine, { kind: 'tool_result', maxNewTokens: 8 })).success, 'boolean');
      }
      await agent.reset();
      assert.equal((await agent.complete('set a timer for 5 minutes', { maxNewTokens: 64 })).success, true, 'still usable');
      await agent.free();
    } finally {
      await model.free();
    }
  });

  test(`tools that are no array, schemas JSON cannot hold and a system that is no string are refused, ${where}`, async () => {
    const model = await loadModel(undefined, { worker, threads: 1 });
    try {
      for (const tools of ['abc', 5, { name: 'x' }, null]) {
        await assert.rejects(Needle.create({ model, tools }), isArgument(/^option tools is .*: must be an array of tool declarations/));
      }
      await assert.rejects(Needle.create({ model, tools: [function lonely() {}] }), isArgument(/tool function lonely has no schema/));
      const deep = { name: 'deep', parameters: { type: 'object', properties: { a: nested(5000, (v) => ({ items: v })) } } };
      await assert.rejects(Needle.create({ model, tools: [TOOLS[0], deep] }), isArgument(/^tools\[1\] at \/parameters\/properties\/a\/items.* is nested deeper than 256 levels$/));
      const loop = { name: 'loop', parameters: { type: 'object', properties: {} } };
      loop.parameters.properties.self = loop.parameters;
      await assert.rejects(Needle.create({ model, tools: [loop] }), isArgument(/^tools\[0\] at \/parameters\/properties\/self refers back to \/parameters/));
      for (const system of [5, null, { date: 'today' }, ['a']]) {
        await assert.rejects(Needle.create({ model, system }), isArgument(/^option system is .*: must be a string$/));
      }
      const agent = await Needle.create({ model, tools: [tool(() => 1, TOOLS[0])], system: 'date: 2026-07-21' });
      assert.equal((await agent.complete('set a timer for 5 minutes', { maxNewTokens: 64 })).success, true);
      await agent.free();
    } finally {
      await model.free();
    }
  });

  test(`free() during a turn ends it with an AbortError, ${where}`, async () => {
    for (const what of ['agent', 'model']) {
      const model = await loadModel(undefined, { worker, threads: 1 });
      const agent = await Needle.create({ model, tools: TOOLS });
      let freeing = null;
      const free = () => { freeing ??= what === 'agent' ? agent.free() : model.free(); };
      await assert.rejects(agent.complete('set a timer for 10 minutes', { maxNewTokens: 128, onToken: free }), isAbort, what);
      await freeing;
      await assert.rejects(Promise.resolve().then(() => agent.complete('hi')), isArgument(/freed/), `${what}: later calls`);
      await model.free();
    }
  });

  test(`detokenize() refuses what is not a token id, naming the index and the value, ${where}`, async () => {
    const model = await loadModel(undefined, { worker, threads: 1 });
    try {
      const last = model.vocabulary - 1;
      const text = await model.detokenize(await model.tokenize('hello world'));
      assert.equal(text, 'hello world');
      for (const [ids, pattern] of [
        [[2 ** 32 + 5], /^detokenize\(\): ids\[0\] is 4294967301, not a token id \(an integer from 0 to \d+\)$/],
        [[17, -1], /ids\[1\] is -1,/],
        [[17, 18, 1.5], /ids\[2\] is 1\.5,/],
        [[model.vocabulary], new RegExp(`ids\\[0\\] is ${model.vocabulary},.*0 to ${last}\\)`)],
        [['5'], /ids\[0\] is "5",/],
        [[NaN], /ids\[0\] is NaN,/],
        ['abc', /^detokenize\(\) takes an array of token ids, not "abc"$/],
        [7, /takes an array of token ids, not 7$/],
        [{ length: -1 }, /not an object$/],
        [[3n], /ids\[0\] is 3n,/],
      ]) {
        await assert.rejects(Promise.resolve().then(() => model.detokenize(ids)), isArgument(pattern), String(ids));
      }
      assert.equal(typeof await model.detokenize(new Int32Array([last])), 'string');
    } finally {
      await model.free();
    }
  });
}

test('openai(): a request JSON cannot hold is refused naming the param, before any work', async () => {
  const client = await openai();
  try {
    const circular = { type: 'object', properties: {} };
    circular.properties.me = circular;
    const cases = [
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: circular } }] }, '/tools/0/function/parameters/properties/me', /refers back to \/tools\/0\/function\/parameters/],
      [{ seed: 5n }, '/seed', /is a BigInt/],
      [{ tools: 'abc' }, 'tools', /must be an array/],
      [{ messages: Array.from({ length: 300 }, () => ({ role: 'user', content: 'hi' })) }, 'messages', /300 messages: at most 256/],
    ];
    for (const [extra, param, pattern] of cases) {
      await assert.rejects(client.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }], ...extra }), (error) => {
        isArgument(pattern)(error);
        assert.equal(error.param, param);
        return true;
      }, param);
    }
  } finally {
    await client.free();
  }
});
