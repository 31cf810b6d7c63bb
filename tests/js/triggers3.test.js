// Needle 3's tool triggers as the makers' engine acts on them
// (needle3-engine.md section 4): a tool's "triggers" are ECMAScript regular
// expressions matched case-insensitively against the raw request; in a user
// turn without a negation cue the matched tools are the only names the call
// may take, the list cannot be empty, and it is withheld only by a cross-call
// gate (not by the confidence floor or a per-call gate). Each case runs the
// same greedy turn on random tiny archives with and without the triggers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeTestTokenizerBlob, syntheticPieces, CHAT_MARKERS3 } from '../../js/cact-writer.js';
import { TINY3_GEOMETRY } from '../../js/cact3-format.js';
import { readFileSync } from 'node:fs';
import { Needle } from '../../js/agent.js';
import { Model } from '../../js/model.js';
import { STATUS } from '../../js/engine.js';
import { postprocessCalls } from '../../js/postprocess.js';
import { openai } from '../../js/openai.js';
import { shortReasoningModel } from './short-reasoning.js';

const tokenizer = makeTestTokenizerBlob(syntheticPieces(400, CHAT_MARKERS3));
const TOOLS = [
  { name: 'set_light', description: 'Switch the lights of a room', triggers: ['\\blights?\\b'],
    parameters: { type: 'object', properties: { room: { enum: ['kitchen'] } }, required: ['room'] } },
  { name: 'add_item', description: 'Add an item to a list', triggers: ['(', '^add\\b'], // '(' does not compile: left out
    parameters: { type: 'object', properties: { item: { enum: ['milk', 'eggs'] } }, required: ['item'] } },
  { name: 'set_timer', description: 'Start a timer',
    parameters: { type: 'object', properties: { minutes: { type: 'integer' } }, required: ['minutes'] } },
];
const UNTRIGGERED = TOOLS.map(({ triggers, ...tool }) => tool);
const SEEDS = [21, 22, 23];

async function withModels(fn) {
  for (const seed of SEEDS) {
    const model = await shortReasoningModel({ geometry: TINY3_GEOMETRY, seed, bits: 2, group: 32, tokenizer }, UNTRIGGERED, 'add milk');
    try {
      await fn(model, seed);
    } finally {
      model.free();
    }
  }
}

/** One agent's envelope for one greedy turn. */
async function envelope(model, tools, query) {
  const agent = await Needle.create({ model, tools });
  try {
    return await agent.complete(query, { maxNewTokens: 256 });
  } finally {
    agent.free();
  }
}

const outcome = ({ success, function_calls: calls, suppressed_calls: suppressed, reasoning, confidence }) =>
  ({ success, calls, suppressed, reasoning, confidence });

test('Needle 3: a matched trigger makes the call one of the matched tools, delivered', async () => {
  const cases = [['add milk', ['add_item']], ['ADD eggs to it', ['add_item']], ['kitchen LIGHTS please', ['set_light']],
    ['add something', ['add_item']], ['add a light', ['set_light', 'add_item']]];
  await withModels(async (model, seed) => {
    for (const [query, names] of cases) {
      const turn = await envelope(model, TOOLS, query);
      assert.equal(turn.success, true, `seed ${seed}, ${query}: ${turn.error}`);
      assert.ok(turn.function_calls.length, `seed ${seed}, ${query}: no call delivered (${JSON.stringify(turn.suppressed_calls)})`);
      assert.deepEqual(turn.suppressed_calls, []);
      for (const call of turn.function_calls) assert.ok(names.includes(call.name), `seed ${seed}, ${query}: ${call.name}`);
    }
  });
});

test('Needle 3: the untriggered turn withholds what the triggered one delivers (confidence floor, per-call gates)', async () => {
  // "add something" names no option of the required enum: a per-call gate, which a trigger overrides.
  let withheld = 0;
  await withModels(async (model) => {
    const triggered = await envelope(model, TOOLS, 'add something');
    const plain = await envelope(model, UNTRIGGERED, 'add something');
    assert.ok(triggered.function_calls.length);
    if (plain.suppressed_calls.length) withheld++;
    const { withhold } = await postprocessCalls({ tools: TOOLS, request: 'add something', conversation: '\nadd something',
      calls: JSON.stringify(triggered.function_calls) });
    assert.equal(withhold, true, 'the gate fired on the triggered call too');
  });
  assert.ok(withheld >= 1, 'no archive withheld the untriggered turn');
});

test('Needle 3: a cross-call gate still withholds a triggered call', async () => {
  const query = 'turn on the lights except the kitchen';
  await withModels(async (model, seed) => {
    const turn = await envelope(model, TOOLS, query);
    assert.deepEqual(turn.function_calls, [], `seed ${seed}`);
    assert.deepEqual(turn.suppressed_calls, [{ name: 'set_light', arguments: { room: 'kitchen' } }]);
    const { strong } = await postprocessCalls({ tools: TOOLS, request: query, conversation: `\n${query}`,
      calls: JSON.stringify(turn.suppressed_calls) });
    assert.equal(strong, true);
  });
});

test('Needle 3: no trigger acts on a negated request or an unmatched one', async () => {
  await withModels(async (model, seed) => {
    for (const query of ["don't turn the lights on", 'never turn the lights on', 'start a timer']) {
      const triggered = await envelope(model, TOOLS, query);
      const plain = await envelope(model, UNTRIGGERED, query);
      assert.deepEqual(outcome(triggered), outcome(plain), `seed ${seed}, ${query}`);
    }
  });
});

test('Needle 3: triggers of an OpenAI function wrapper act as a bare tool\'s', async () => {
  const wrapped = TOOLS.map((fn) => ({ type: 'function', function: fn }));
  await withModels(async (model, seed) => {
    for (const [query, name] of [['add milk', 'add_item'], ['kitchen LIGHTS please', 'set_light']]) {
      const bare = await envelope(model, TOOLS, query);
      const openai = await envelope(model, wrapped, query);
      assert.deepEqual(outcome(openai), outcome(bare), `seed ${seed}, ${query}`);
      assert.ok(openai.function_calls.length && openai.function_calls.every((c) => c.name === name), `seed ${seed}, ${query}`);
    }
  });
});

test('Needle 3: triggers in the OpenAI-compatible client\'s tools act as in the agent', async () => {
  const wrapped = TOOLS.map((fn) => ({ type: 'function', function: fn }));
  await withModels(async (model, seed) => {
    const client = await openai({ model });
    for (const [query, name] of [['add milk', 'add_item'], ['kitchen LIGHTS please', 'set_light']]) {
      const answer = await client.chat.completions.create({ messages: [{ role: 'user', content: query }], tools: wrapped,
        max_tokens: 256, temperature: 0 });
      const names = (answer.choices[0].message.tool_calls ?? []).map((c) => c.function.name);
      assert.ok(names.length && names.every((n) => n === name), `seed ${seed}, ${query}: ${names}`);
    }
    await client.free();
  });
});

test('Needle 2 keeps its own contract (tools rendered as given): its engine refuses triggers', async () => {
  const model = await Model.fromBytes(readFileSync(new URL('../../dist/tiny.cact', import.meta.url)), { wasm: 'simd' });
  try {
    const agent = await Needle.create({ model, tools: TOOLS });
    assert.equal((await agent.complete('add milk')).success, true);
    const { engine } = model;
    const ptr = engine.malloc(4);
    const status = engine.x.needle_agent_trigger(agent.handle, ptr, 1, engine.err);
    engine.x.free(ptr);
    assert.equal(status, STATUS.ARGUMENT);
    assert.match(engine.lastError(status).message, /Needle 3's engine; this is Needle 2/);
    agent.free();
  } finally {
    model.free();
  }
});
