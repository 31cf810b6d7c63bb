// The OpenAI facade over Needle 3 archives: Needle 3's engine post-processes
// the calls after the turn (repairs, dedupes, withholds: the envelope's
// function_calls), so the answer's tool_calls, whole or streamed, are the
// envelope's, not the text the model streamed; and a conversation that sends
// those calls back goes on. Random tiny archives, greedy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeTestTokenizerBlob, syntheticPieces, CHAT_MARKERS3 } from '../../js/cact-writer.js';
import { TINY3_GEOMETRY } from '../../js/cact3-format.js';
import { Needle } from '../../js/agent.js';
import { openai } from '../../js/openai.js';
import { foldChunks } from '../../js/openai-chunks.js';
import { shortReasoningModel } from './short-reasoning.js';

const tokenizer = makeTestTokenizerBlob(syntheticPieces(400, CHAT_MARKERS3));
const DECLARATIONS = [
  { name: 'set_light', description: 'Switch the lights of a room',
    parameters: { type: 'object', properties: { room: { enum: ['kitchen'] } }, required: ['room'] } },
  { name: 'add_item', description: 'Add an item to a list',
    parameters: { type: 'object', properties: { item: { enum: ['milk', 'eggs'] } }, required: ['item'] } },
];
const TOOLS = DECLARATIONS.map((fn) => ({ type: 'function', function: fn }));
const QUERIES = ['add milk', 'add milk and eggs', 'kitchen lights please'];
const ask = (messages, extra = {}) => ({ messages, tools: TOOLS, max_tokens: 256, temperature: 0, ...extra });
const callsOf = (message) => (message.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) }));

test('Needle 3 through the OpenAI facade: the tool_calls are the envelope\'s post-processed calls', async () => {
  let differed = 0; // turns whose streamed call text the post-processor changed
  for (const seed of [21, 22, 23]) {
    const model = await shortReasoningModel({ geometry: TINY3_GEOMETRY, seed, bits: 2, group: 32, tokenizer }, DECLARATIONS, 'add milk');
    const client = await openai({ model });
    try {
      for (const query of QUERIES) {
        const agent = await Needle.create({ model, tools: DECLARATIONS });
        let streamed = '';
        const envelope = await agent.complete(query, { maxNewTokens: 256, onToken: ({ kind, text }) => { if (kind === 'call') streamed += text; } });
        agent.free();
        if (streamed !== JSON.stringify(envelope.function_calls)) differed++;
        const user = [{ role: 'user', content: query }];
        const whole = (await client.chat.completions.create(ask(user))).choices[0];
        assert.deepEqual(callsOf(whole.message), envelope.function_calls, `seed ${seed}, ${query}`);
        if (!envelope.function_calls.length) assert.notEqual(whole.finish_reason, 'tool_calls', `seed ${seed}, ${query}`);
        const chunks = [];
        for await (const chunk of await client.chat.completions.create(ask(user, { stream: true }))) chunks.push(chunk);
        assert.deepEqual(callsOf(foldChunks(chunks).choices[0].message), envelope.function_calls, `seed ${seed}, ${query}, streamed`);
        if (!whole.message.tool_calls) continue;
        // The calls sent back as returned: the conversation goes on with their results.
        const results = whole.message.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: '{"ok":true}' }));
        const next = await client.chat.completions.create(ask([...user, whole.message, ...results]));
        assert.equal(next.object, 'chat.completion');
      }
    } finally {
      await client.free();
      model.free();
    }
  }
  assert.ok(differed >= 1, 'no turn whose calls the post-processor changed: the test shows nothing');
});
