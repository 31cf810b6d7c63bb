// The request becomes a prompt as the makers' engine renders it
// (needle3-engine.md section 1; src/agent/toolset.c, src/agent/system_facts.c):
// an OpenAI-wrapped camelCase tool is unwrapped, snake_cased and its type
// aliases mapped; a JSON system text becomes facts; a tool result is a `tool`
// turn, compacted, an object wrapped in a list; calls come back in the
// caller's names. The prompt's ids are checked through the public API: the
// turn's prefill count, and the agent's greedy reasoning against a greedy
// decode by the engine's rule of the prompt rendered here, on a bare session.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeTestTokenizerBlob, syntheticPieces, CHAT_MARKERS3 } from '../../js/cact-writer.js';
import { writeCact3 } from '../../js/cact3-writer.js';
import { TINY3_GEOMETRY } from '../../js/cact3-format.js';
import { Model } from '../../js/model.js';
import { Needle } from '../../js/agent.js';
import { shortReasoningModel } from './short-reasoning.js';

const tokenizer = makeTestTokenizerBlob(syntheticPieces(400, CHAT_MARKERS3));
const model = await Model.fromBytes(writeCact3({ geometry: TINY3_GEOMETRY, seed: 5, bits: 2, group: 32, tokenizer }),
  { wasm: 'needle3' });

const TOOLS = [{ type: 'function', function: {
  name: 'setRoomTemp', description: 'Set the temperature of a room',
  parameters: { type: 'object', properties: { roomName: { enum: ['kitchen', 'hall'] }, targetTemp: { type: 'int', maximum: 30.0 } },
    required: ['roomName'] },
} }];
// What the engine renders of them: unwrapped, snake_cased, `int` an integer, compact.
const RENDERED = '[{"name":"set_room_temp","description":"Set the temperature of a room","parameters":{"type":"object",'
  + '"properties":{"room_name":{"enum":["kitchen","hall"]},"target_temp":{"type":"integer","maximum":30}},'
  + '"required":["room_name"]}}]';
const SYSTEM = JSON.stringify({ user: 'Ann', date: '2026-09-26T08:15:00Z', theme: 'dark' });
const FACTS = 'date: 2026-09-26 Sat 08:15; user: Ann';
const QUERY = 'set the kitchen to 21';
const MAX_NEW = 200;
const PROMPT = `<|im_start|>system\n${FACTS}<|im_end|>\n<|im_start|>user\n<tools>${RENDERED}</tools>\n${QUERY}`
  + '<|im_end|>\n<|im_start|>assistant\n';

/** The greedy reasoning a bare session gives for ids, by the engine's rule
 *  (needle3-engine.md section 2: its bans; ended by </think>, </s> or
 *  <|im_end|>, or with 32 steps left). */
function referenceReasoning(ids, sinks) {
  const id = (piece) => model.pieceId(piece);
  const banned = [4, 8, 9, 12, 13, id('<think>'), id('<tool_call>'), id('</tool_call>')];
  const ends = [id('</think>'), id('</s>'), id('<|im_end|>')];
  const session = model.session({ exact: true, sinks });
  let logits = session.feed(ids)[0];
  const reasoning = [];
  while (reasoning.length < MAX_NEW - 33) {
    for (const b of banned) logits[b] = -Infinity;
    const next = logits.indexOf(Math.max(...logits));
    if (ends.includes(next)) break;
    reasoning.push(next);
    logits = session.feed([next])[0];
  }
  session.free();
  return model.detokenize(reasoning).trim();
}

/** The calls the envelope hands out, delivered or withheld. */
const callsOf = (envelope) => [...envelope.function_calls, ...envelope.suppressed_calls];

test('Needle 3: a wrapped camelCase tool and a JSON system text render as the engine renders them', async () => {
  const agent = await Needle.create({ model, tools: TOOLS, system: SYSTEM, exact: true });
  assert.equal(agent.readText(agent.engine.x.needle_agent_rendered_tools), RENDERED);
  // Whatever the turn makes of a random archive, its prompt is what is checked.
  const envelope = await agent.complete(QUERY, { maxNewTokens: MAX_NEW });
  const prefilled = agent.prefillCount;
  agent.free();
  // The ids: the turn prefills what follows </tools>, then <think>; the
  // whole prompt leads to the greedy reasoning a bare session gives.
  const rendered = model.tokenize(PROMPT);
  const sinks = 1 + rendered.indexOf(model.pieceId('</tools>')) + 1;
  const think = model.tokenize('<think>');
  assert.equal(prefilled, rendered.length - (sinks - 1) + think.length);
  const want = referenceReasoning([model.pieceId('<s>'), ...rendered, ...think], sinks);
  assert.ok(want.length > 0, 'the reference reasoning is empty: the check would be vacuous');
  assert.equal(envelope.reasoning, want);
});

test('Needle 3: calls are reported in the caller\'s tool and property names', async () => {
  let reported = 0;
  for (const seed of [2, 6, 11]) {
    const archive = await shortReasoningModel({ geometry: TINY3_GEOMETRY, seed, bits: 2, group: 32, tokenizer },
      JSON.parse(RENDERED), QUERY);
    const agent = await Needle.create({ model: archive, tools: TOOLS, system: SYSTEM, exact: true, requireCall: true });
    let written = ''; // the calls as the model wrote them: in the rendered names
    const envelope = await agent.complete(QUERY, { maxNewTokens: MAX_NEW,
      onToken: ({ kind, text }) => { if (kind === 'call') written += text; } });
    agent.free();
    archive.free();
    assert.equal(envelope.success, true, `seed ${seed}: ${envelope.error}`);
    assert.match(written, /"name":"set_room_temp"/);
    for (const call of callsOf(envelope)) {
      assert.equal(call.name, 'setRoomTemp');
      for (const key of Object.keys(call.arguments)) assert.ok(['roomName', 'targetTemp'].includes(key), key);
      reported += 'roomName' in call.arguments;
    }
  }
  assert.ok(reported > 0, 'no call reported a renamed argument: the check saw nothing');
});

test('Needle 3: a tool result is its own `tool` turn, compacted, an object wrapped in a list', async () => {
  const archive = await shortReasoningModel({ geometry: TINY3_GEOMETRY, seed: 11, bits: 2, group: 32, tokenizer },
    JSON.parse(RENDERED), QUERY);
  const agent = await Needle.create({ model: archive, tools: TOOLS, system: SYSTEM, exact: true, requireCall: true });
  const first = await agent.complete(QUERY, { maxNewTokens: MAX_NEW });
  assert.equal(first.success, true, first.error);
  assert.ok(callsOf(first).length > 0, 'the first turn made no call: no tool result can follow');
  const result = { ok: true, temp: 21.5, note: 'set  to 21' };
  await agent.complete(result, { kind: 'tool_result', maxNewTokens: MAX_NEW });
  const prefilled = agent.prefillCount;
  agent.free();
  const count = (text) => archive.tokenize(text).length;
  const compact = JSON.stringify(result);
  const turn = count(`\n<|im_start|>tool\n<tool_result>[${compact}]</tool_result><|im_end|>\n<|im_start|>assistant\n`);
  const userTurn = count(`\n<|im_start|>user\n<tool_result>${compact}</tool_result><|im_end|>\n<|im_start|>assistant\n`);
  const think = count('<think>');
  archive.free();
  assert.ok(userTurn < turn, 'the user-role rendering is not shorter: the check could not tell them apart');
  // The turn's text and no <think>: after a tool result the model opens the turn itself.
  assert.ok(think > 0);
  assert.equal(prefilled, turn, `prefilled ${prefilled}, the turn is ${turn}`);
});

test('Needle 3: after a tool result the model opens the turn: <think> reasons, <tool_call> calls, prose answers with no call', async () => {
  const archive = await shortReasoningModel({ geometry: TINY3_GEOMETRY, seed: 11, bits: 2, group: 32, tokenizer },
    JSON.parse(RENDERED), QUERY);
  // A random archive opens a hot turn with <tool_call> a few times in 400, with <think> never in
  // 400 here: the turns run until a call and a prose opening were both seen (<think> is checked if it comes).
  const seen = { think: 0, call: 0, prose: 0 };
  for (let seed = 1; seed <= 400 && (!seen.call || !seen.prose); seed++) {
    const agent = await Needle.create({ model: archive, tools: TOOLS, system: SYSTEM, exact: true, requireCall: true });
    const first = await agent.complete(QUERY, { maxNewTokens: MAX_NEW });
    assert.ok(callsOf(first).length > 0, 'the first turn made no call: no tool result can follow');
    const pieces = []; // a hot opening, so that every way of opening comes up
    const envelope = await agent.complete({ ok: true }, { kind: 'tool_result', maxNewTokens: 80, temperature: 4, seed,
      onToken: (piece) => pieces.push(piece) });
    agent.free();
    const opened = pieces[0];
    if (opened.kind === 'marker' && opened.text === '<think>') {
      seen.think++;
      assert.equal(pieces.filter((p) => p.kind === 'marker' && p.text.includes('<think>')).length, 1);
    } else if (opened.kind === 'marker' && opened.text === '<tool_call>') {
      seen.call++;
      assert.ok(pieces.every((p) => p.kind !== 'reasoning'), 'a turn opened with <tool_call> has no reasoning');
      assert.equal(envelope.reasoning, '');
      assert.ok(envelope.success ? envelope.type === 'call' : envelope.error_code === 'truncated', JSON.stringify(envelope));
    } else {
      seen.prose++; // prose answers: it is the turn's reasoning, and no call or marker follows it
      assert.equal(opened.kind, 'reasoning', JSON.stringify(opened));
      assert.ok(pieces.every((p) => p.kind === 'reasoning'), JSON.stringify(pieces.filter((p) => p.kind !== 'reasoning')));
      assert.equal(envelope.type, 'respond');
      assert.deepEqual(envelope.function_calls, []);
      const streamed = pieces.map((p) => p.text).join('').trim(); // the stream holds back a last partial character
      assert.ok(streamed.length > 0 && envelope.reasoning.startsWith(streamed), `${envelope.reasoning} / ${streamed}`);
    }
  }
  archive.free();
  console.log(`# ${JSON.stringify(seen)}`);
  assert.ok(seen.call > 0 && seen.prose > 0, `openings seen: ${JSON.stringify(seen)}`);
});
