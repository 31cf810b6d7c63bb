// No runaway values (src/agent/agent.c value_cap): a string argument is at
// most 32 bytes longer than all the text the conversation holds. The README's
// set_light on the demo model, which does not know that tool, once wrote a
// 685-character room ("kitchen to 10}}]}}]..."); now it carries the demo
// model's warning and a bounded room. On random archives sampled at
// temperature 1, where values wander freely, no value passes the bound.
// Needs dist/ (./build.sh).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Needle } from '../../js/index.js';
import { writeCact, TINY_GEOMETRY } from '../../js/cact-writer.js';
import { tokenizerBlobFromModel } from '../../js/sentencepiece-model.js';
import { Model } from '../../js/model.js';

const SLACK = 32;
const bytes = (s) => new TextEncoder().encode(s).length;
const SET_LIGHT = { // as the README's API example declares it
  name: 'set_light', description: 'Set the brightness of the lights in a room.',
  parameters: { type: 'object', required: ['room', 'level'],
    properties: { room: { type: 'string' }, level: { type: 'integer', minimum: 0, maximum: 100 } } },
};

/** Every string anywhere in a call's arguments. */
const strings = (v) => (typeof v === 'string' ? [v] : v && typeof v === 'object' ? Object.values(v).flatMap(strings) : []);

test("the README's set_light on the demo model: a warning and a bounded room", async () => {
  const agent = await Needle.create({ tools: [SET_LIGHT] });
  const query = 'dim the kitchen to 10';
  const envelope = await agent.complete(query);
  assert.equal(envelope.warnings?.length, 1, JSON.stringify(envelope));
  for (const call of envelope.function_calls) {
    for (const value of strings(call.arguments)) assert.ok(bytes(value) <= bytes(query) + SLACK, `${bytes(value)} bytes: ${value}`);
  }
  await agent.free();
});

test('sampled calls on random archives keep every string within the bound', async () => {
  const tokenizer = tokenizerBlobFromModel(readFileSync(new URL('../fixtures/tokenizer/needle-test-bpe.model', import.meta.url)));
  const tools = [SET_LIGHT, { name: 'take_note', description: 'Write a note.',
    parameters: { type: 'object', required: ['text', 'tags'], properties: { text: { type: 'string' }, tags: { type: 'array', items: { type: 'string' } } } } }];
  const system = 'date: 2026-07-21';
  let longest = 0;
  for (const seed of [2, 7, 19]) {
    const model = await Model.fromBytes(writeCact({ geometry: TINY_GEOMETRY, seed, bits: 2, group: 32, heads: true, tokenizer }));
    for (let sample = 1; sample <= 8; sample++) {
      const agent = await Needle.create({ model, tools, system, temperature: 1, seed: sample });
      const query = 'note that the kitchen light is on';
      const envelope = await agent.complete(query, { maxNewTokens: 400 });
      assert.equal(envelope.success, true, envelope.error);
      for (const value of envelope.function_calls.flatMap((c) => strings(c.arguments))) {
        longest = Math.max(longest, bytes(value));
        assert.ok(bytes(value) <= bytes(system) + bytes(query) + SLACK, `${bytes(value)} bytes: ${value}`);
      }
      agent.free();
    }
    model.free();
  }
  // The bound was reached: these archives would write longer values without it.
  assert.ok(longest >= bytes(system) + bytes('note that the kitchen light is on') + SLACK - 4, `longest value ${longest} bytes`);
});
