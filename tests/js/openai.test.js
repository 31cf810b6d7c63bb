// The OpenAI facade (js/openai.js) on the demo model and its 18 tools: answers
// in OpenAI's chat.completion shape that say what the agent's own complete()
// says for the same input; the same answers in this thread and over a worker
// model; the reasoning as reasoning_content, the content null when the turn
// calls; streamed chunks in OpenAI's chunk shapes that fold into the whole
// answer; tool_choice; tool-result turns, replayed or continued, with earlier
// answers sent back as returned or trimmed; response_format json_schema as an
// extraction; requests refused naming the option or the message's JSON
// pointer; aborts. The demo model is small and often wrong, so this checks
// shapes and agreement, not accuracy. Needs dist/ (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { loadModel, Needle, NeedleError, STATUS, openai } from '../../js/index.js';
import { CallScanner } from '../../js/openai-chunks.js';

const DECLARATIONS = JSON.parse(readFileSync(new URL('../../dist/demo-tools.json', import.meta.url), 'utf8'));
const TOOLS = DECLARATIONS.map((fn) => ({ type: 'function', function: fn }));
const QUERIES = ['set a timer for 10 minutes', 'what is the weather in Paris tomorrow', 'order a pizza',
  'lock the front door and set the heating to 21 degrees'];
const REFUSED = 'order a pizza'; // the demo model calls nothing for it (checked below)
const MULTI = 'lock the front door and set the heating to 21 degrees'; // it makes several calls

let model;
let workerModel;
let client;
let remote;

before(async () => {
  model = await loadModel(undefined, { worker: false });
  workerModel = await loadModel(undefined, { worker: true });
  client = await openai({ model });
  remote = await openai({ model: workerModel });
});
after(async () => {
  await client.free();
  await remote.free();
  await model.free();
  await workerModel.free();
});

const ask = (query, extra = {}) => ({ model: 'demo', messages: [{ role: 'user', content: query }], tools: TOOLS, ...extra });

/** An answer without what differs run to run: ids and timestamps. */
function stable(value) {
  return JSON.parse(JSON.stringify(value), function (key, v) {
    if (key === 'created') return 0;
    if (key === 'id' && typeof v === 'string') return v.replace(/^(chatcmpl-|call_).*/, '$1*');
    return v;
  });
}

/** tool_calls as the agent's function_calls. */
const callsOf = (message) => (message.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) }));

/** What the agent itself answers: a fresh agent, the same turns. */
async function agentAnswers(turns, options = {}) {
  const agent = await Needle.create({ model, tools: DECLARATIONS, ...options });
  try {
    const envelopes = [];
    for (const [text, kind] of turns) envelopes.push(await agent.complete(text, { kind }));
    return envelopes;
  } finally {
    agent.free();
  }
}

function assertCompletionShape(r) {
  assert.deepEqual(Object.keys(r).sort(), ['choices', 'created', 'id', 'model', 'object', 'usage']);
  assert.match(r.id, /^chatcmpl-[0-9a-f]{24}$/);
  assert.equal(r.object, 'chat.completion');
  assert.ok(Number.isInteger(r.created));
  assert.equal(r.model, 'demo');
  assert.equal(r.choices.length, 1);
  const [choice] = r.choices;
  assert.equal(choice.index, 0);
  assert.equal(choice.logprobs, null);
  assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason));
  assert.equal(choice.message.role, 'assistant');
  assert.equal(choice.message.refusal, null);
  const { content, reasoning_content: reasoning, tool_calls: calls } = choice.message;
  assert.ok(reasoning === null || (typeof reasoning === 'string' && reasoning.length > 0));
  // A turn that calls has no content; one that does not says what it wrote, its reasoning.
  assert.equal(content, calls ? null : reasoning);
  for (const call of choice.message.tool_calls ?? []) {
    assert.deepEqual(Object.keys(call), ['id', 'type', 'function']);
    assert.match(call.id, /^call_[0-9a-f]{24}$/);
    assert.equal(call.type, 'function');
    assert.equal(typeof call.function.name, 'string');
    assert.equal(typeof call.function.arguments, 'string');
  }
  if (choice.message.tool_calls) assert.ok(choice.message.tool_calls.length > 0);
  const { prompt_tokens: p, completion_tokens: c, total_tokens: t } = r.usage;
  assert.ok(p > 0 && c > 0 && t === p + c, JSON.stringify(r.usage));
}

test('the call scanner cuts the call array into names and argument text, however it is split', () => {
  const text = '[{"name":"a\\"b","arguments":{"s":"}{,:\\"]","n":[1,{"x":2}],"e":{}}},{"name":"c","arguments":{}}]';
  const want = JSON.parse(text).map((c) => ({ name: c.name, arguments: JSON.stringify(c.arguments) }));
  const cut = (pieces) => {
    const scanner = new CallScanner();
    const calls = [];
    for (const event of pieces.flatMap((piece) => scanner.push(piece))) {
      if (event.name !== undefined) calls[event.index] = { name: event.name, arguments: '' };
      else calls[event.index].arguments += event.arguments;
    }
    return calls;
  };
  assert.deepEqual(cut([text]), want);
  assert.deepEqual(cut([...text]), want);
  for (let i = 1; i < text.length; i++) assert.deepEqual(cut([text.slice(0, i), text.slice(i)]), want, `split at ${i}`);
  assert.deepEqual(cut(['[', ']']), []);
});

test('answers in chat.completion shape with what the agent\'s complete() says', async () => {
  for (const query of QUERIES) {
    const r = await client.chat.completions.create(ask(query));
    assertCompletionShape(r);
    const [envelope] = await agentAnswers([[query, 'query']]);
    const { message, finish_reason: reason } = r.choices[0];
    assert.deepEqual(callsOf(message), envelope.function_calls, query);
    assert.equal(message.reasoning_content, envelope.reasoning || null, query);
    assert.equal(message.content, envelope.function_calls.length ? null : envelope.reasoning || null, query);
    assert.equal(reason, envelope.function_calls.length ? 'tool_calls' : 'stop', query);
    assert.equal(r.warnings, undefined, 'the demo model\'s own tools: no warning');
  }
  const refused = await client.chat.completions.create(ask(REFUSED));
  assert.equal(refused.choices[0].message.tool_calls, undefined);
  assert.ok(refused.choices[0].message.content.length > 0, 'a turn that calls nothing answers with its text');
  const multi = await client.chat.completions.create(ask(MULTI));
  assert.ok(multi.choices[0].message.tool_calls.length > 1);
  assert.deepEqual(multi.choices[0].message.tool_calls.map((c) => c.id).length, new Set(multi.choices[0].message.tool_calls.map((c) => c.id)).size);
});

test('a system message is the agent\'s system facts; a max_tokens too small for the call is refused', async () => {
  const system = 'date: 2026-07-21; home: Lisbon';
  const r = await client.chat.completions.create({ ...ask(QUERIES[1]), messages: [{ role: 'system', content: system }, { role: 'user', content: QUERIES[1] }] });
  const [envelope] = await agentAnswers([[QUERIES[1], 'query']], { system });
  assert.deepEqual(callsOf(r.choices[0].message), envelope.function_calls);
  const send = { tool_choice: { type: 'function', function: { name: 'send_message' } } };
  const query = 'send a message to Bob saying I will be late';
  await assert.rejects(client.chat.completions.create(ask(query, { ...send, max_tokens: 40 })), (error) => {
    assert.equal(error.code, STATUS.CONTEXT);
    assert.equal(error.param, 'max_tokens');
    assert.match(error.message, /^option max_tokens is 40: too small for the call/);
    return true;
  });
  const fits = await client.chat.completions.create(ask(query, { ...send, max_tokens: 96 }));
  assert.ok(fits.usage.completion_tokens <= 96);
  assert.deepEqual(callsOf(fits.choices[0].message).map((c) => c.name), ['send_message']);
});

/** A short session of requests: queries, a tool-result turn, tool_choice, a stream. */
async function session(c) {
  const out = [];
  for (const query of QUERIES) out.push(await c.chat.completions.create(ask(query)));
  const first = out[0].choices[0].message;
  const messages = [{ role: 'user', content: QUERIES[0] }, first, { role: 'tool', tool_call_id: first.tool_calls[0].id, content: '{"ok":true}' }];
  out.push(await c.chat.completions.create({ ...ask(''), messages }));
  out.push(await c.chat.completions.create(ask(REFUSED, { tool_choice: 'required' })));
  out.push(await c.chat.completions.create(ask(QUERIES[0], { temperature: 1, seed: 5, top_p: 0.9 })));
  const chunks = [];
  for await (const chunk of await c.chat.completions.create(ask(MULTI, { stream: true, stream_options: { include_usage: true } }))) chunks.push(chunk);
  out.push(chunks);
  return stable(out);
}

test('in this thread and over a worker model: the same answers', async () => {
  const fresh = [await openai({ model }), await openai({ model: workerModel })];
  const [here, there] = [await session(fresh[0]), await session(fresh[1])];
  assert.deepEqual(there, here);
  for (const c of fresh) await c.free();
  // Clients that served other requests before: the same answers (usage aside: what was cached differs).
  const choices = (answers) => answers.map((r) => (Array.isArray(r) ? r.map((c) => c.choices) : r.choices));
  assert.deepEqual(choices(await session(client)), choices(here));
  assert.deepEqual(choices(await session(remote)), choices(here));
});

/** Folds chunks as an OpenAI client does, checking each chunk's shape on the way.
 *  extraction: the content streams as the JSON is written, not once at the end. */
function foldStream(chunks, { usage, extraction = false }) {
  const first = chunks[0];
  assert.deepEqual(first.choices[0].delta, { role: 'assistant', content: '' });
  let content = '';
  let reasoning = '';
  let finish = null;
  const calls = [];
  for (const [i, chunk] of chunks.entries()) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.equal(chunk.id, first.id);
    assert.equal(chunk.model, 'demo');
    if (!chunk.choices.length) { // the usage chunk, last
      assert.ok(usage && i === chunks.length - 1);
      continue;
    }
    assert.equal(chunk.usage, usage ? null : undefined);
    const [{ delta, finish_reason: reason, index, logprobs }] = chunk.choices;
    assert.equal(index, 0);
    assert.equal(logprobs, null);
    assert.equal(finish, null, 'nothing after the finish_reason chunk but usage');
    finish = reason;
    if (reason) assert.deepEqual(delta, {});
    // The content of a turn that calls nothing comes once, whole, after its reasoning streamed.
    if (delta.content && !extraction) assert.equal(content, '', 'content comes once');
    if (delta.content && !extraction) assert.equal(delta.content, reasoning);
    assert.equal(delta.content !== undefined && delta.reasoning_content !== undefined, false);
    content += delta.content ?? '';
    reasoning += delta.reasoning_content ?? '';
    for (const t of delta.tool_calls ?? []) {
      if (!calls[t.index]) { // a call's first delta: index, id, type, name
        assert.equal(t.index, calls.length);
        assert.deepEqual(Object.keys(t), ['index', 'id', 'type', 'function']);
        assert.equal(t.function.arguments, '');
        calls[t.index] = { id: t.id, type: t.type, function: { name: t.function.name, arguments: '' } };
      } else {
        assert.deepEqual(Object.keys(t), ['index', 'function']);
        assert.deepEqual(Object.keys(t.function), ['arguments']);
        calls[t.index].function.arguments += t.function.arguments;
      }
    }
  }
  const message = { role: 'assistant', content: content || null, reasoning_content: reasoning || null, refusal: null, ...(calls.length ? { tool_calls: calls } : {}) };
  return { message, finish_reason: finish, usage: usage ? chunks.at(-1).usage : undefined };
}

test('streamed chunks are OpenAI\'s chunk shapes and fold into the whole answer', async () => {
  for (const query of QUERIES) {
    const whole = await client.chat.completions.create(ask(query));
    const chunks = [];
    for await (const chunk of await client.chat.completions.create(ask(query, { stream: true, stream_options: { include_usage: true } }))) chunks.push(chunk);
    const folded = foldStream(chunks, { usage: true });
    assert.deepEqual(stable(folded.message), stable(whole.choices[0].message), query);
    assert.equal(folded.finish_reason, whole.choices[0].finish_reason);
    assert.equal(folded.usage.completion_tokens, whole.usage.completion_tokens);
    assert.ok(chunks.filter((c) => c.choices[0]?.delta.reasoning_content).length > 1, 'the reasoning streams piece by piece');
    const plain = [];
    for await (const chunk of await client.chat.completions.create(ask(query, { stream: true }))) plain.push(chunk);
    assert.deepEqual(stable(foldStream(plain, { usage: false }).message), stable(whole.choices[0].message));
  }
});

test('tool_choice: none calls nothing, required calls, a named function is the only one called', async () => {
  for (const query of QUERIES) {
    const none = await client.chat.completions.create(ask(query, { tool_choice: 'none' }));
    assert.equal(none.choices[0].message.tool_calls, undefined);
    assert.equal(none.choices[0].finish_reason, 'stop');
    const required = await client.chat.completions.create(ask(query, { tool_choice: 'required' }));
    assert.ok(callsOf(required.choices[0].message).length >= 1, query);
    const [envelope] = await agentAnswers([[query, 'query']], { requireCall: true });
    assert.deepEqual(callsOf(required.choices[0].message), envelope.function_calls);
    const named = await client.chat.completions.create(ask(query, { tool_choice: { type: 'function', function: { name: 'get_weather' } } }));
    const calls = callsOf(named.choices[0].message);
    assert.ok(calls.length >= 1 && calls.every((c) => c.name === 'get_weather'), JSON.stringify(calls));
  }
  const auto = await client.chat.completions.create(ask(REFUSED, { tool_choice: 'auto' }));
  assert.equal(auto.choices[0].message.tool_calls, undefined, 'the demo model refuses this one by itself');
});

test('tool messages are the tool-result turn: continued or replayed, the agent\'s own answer', async () => {
  for (const query of [QUERIES[0], MULTI]) {
    const first = (await client.chat.completions.create(ask(query))).choices[0].message;
    const results = first.tool_calls.map((call, i) => ({ ok: true, n: i }));
    // The results in another order than the calls: matched by tool_call_id.
    const tools = first.tool_calls.map((call, i) => ({ role: 'tool', tool_call_id: call.id, content: JSON.stringify(results[i]) })).reverse();
    const messages = [{ role: 'user', content: query }, first, ...tools];
    const continued = await client.chat.completions.create({ ...ask(''), messages });
    const replayed = await client.chat.completions.create({ ...ask(''), messages }); // after another request: the turns are fed again
    const fresh = await openai({ model });
    const cold = await fresh.chat.completions.create({ ...ask(''), messages });
    await fresh.free();
    const [, envelope] = await agentAnswers([[query, 'query'], [results.length === 1 ? results[0] : results, 'tool_result']]);
    for (const r of [continued, replayed, cold]) {
      assertCompletionShape(r);
      assert.deepEqual(callsOf(r.choices[0].message), envelope.function_calls);
      assert.equal(r.choices[0].message.reasoning_content, envelope.reasoning || null);
    }
    // The agent held the conversation, so the first follow-up fed only the results.
    assert.ok(replayed.usage.prompt_tokens > continued.usage.prompt_tokens);
  }
  // A tool result in plain text is fed back as a JSON string.
  const first = (await client.chat.completions.create(ask(QUERIES[0]))).choices[0].message;
  const text = await client.chat.completions.create({ ...ask(''), messages: [{ role: 'user', content: QUERIES[0] }, first, { role: 'tool', tool_call_id: first.tool_calls[0].id, content: [{ type: 'text', text: 'timer started' }] }] });
  const [, envelope] = await agentAnswers([[QUERIES[0], 'query'], ['timer started', 'tool_result']]);
  assert.deepEqual(callsOf(text.choices[0].message), envelope.function_calls);
});

test('earlier answers are taken back as returned, without reasoning_content, or with content', async () => {
  // A turn that calls: content null and reasoning_content, as answered.
  const first = (await client.chat.completions.create(ask(QUERIES[0]))).choices[0].message;
  assert.equal(first.content, null);
  assert.ok(first.reasoning_content.length > 0);
  const result = { role: 'tool', tool_call_id: first.tool_calls[0].id, content: '{"ok":true}' };
  const sent = (message) => client.chat.completions.create({ ...ask(''), messages: [{ role: 'user', content: QUERIES[0] }, message, result] });
  const asReturned = await sent(first);
  const { reasoning_content: _, ...trimmed } = first;
  const withContent = { ...first, content: first.reasoning_content }; // as this facade answered before reasoning_content
  for (const message of [trimmed, withContent, { role: 'assistant', tool_calls: first.tool_calls }]) {
    assert.deepEqual(stable((await sent(message)).choices), stable(asReturned.choices));
  }
  // A turn that calls nothing: its text as content, and reasoning_content.
  const declined = (await client.chat.completions.create(ask(REFUSED))).choices[0].message;
  assert.equal(declined.tool_calls, undefined);
  assert.equal(declined.content, declined.reasoning_content);
  const next = (message) => client.chat.completions.create({ ...ask(''), messages: [{ role: 'user', content: REFUSED }, message, { role: 'user', content: QUERIES[0] }] });
  const [, envelope] = await agentAnswers([[REFUSED, 'query'], [QUERIES[0], 'query']]);
  for (const message of [declined, { role: 'assistant', content: declined.content }]) {
    const r = await next(message);
    assertCompletionShape(r);
    assert.deepEqual(callsOf(r.choices[0].message), envelope.function_calls);
  }
});

const WEATHER = DECLARATIONS.find((d) => d.name === 'get_weather');
// The demo model extracts well under the name and description it was trained on.
const jsonSchema = (extra = {}) => ({
  type: 'json_schema', json_schema: { name: WEATHER.name, description: WEATHER.description, schema: WEATHER.parameters, strict: true, ...extra },
});

test('response_format json_schema: the extraction\'s JSON as the content, streamed or whole, here and in a worker', async () => {
  const system = 'date: 2026-07-21';
  const agent = await Needle.create({ model, system });
  const extract = (query) => agent.extract(query, WEATHER.parameters, { name: WEATHER.name, description: WEATHER.description });
  const asked = (query, extra = {}) => ({ messages: [{ role: 'system', content: system }, { role: 'user', content: query }], response_format: jsonSchema(), ...extra });
  try {
    for (const query of ['what is the weather in Paris tomorrow', 'weather for Lisbon today', 'forecast for Berlin']) {
      const r = await client.chat.completions.create(asked(query));
      const [{ message, finish_reason: reason }] = r.choices;
      assert.equal(reason, 'stop', query);
      assert.equal(message.tool_calls, undefined);
      assert.deepEqual(JSON.parse(message.content), await extract(query), query);
      assert.ok(message.reasoning_content.length > 0);
      assert.ok(r.usage.completion_tokens > 0 && r.usage.prompt_tokens > 0);
      assert.equal(r.warnings, undefined, 'a demo tool\'s schema under its own name');
      const chunks = [];
      for await (const chunk of await client.chat.completions.create(asked(query, { stream: true }))) chunks.push(chunk);
      assert.deepEqual(stable(foldStream(chunks, { usage: false, extraction: true }).message), stable(message));
      assert.ok(chunks.filter((c) => c.choices[0]?.delta.content).length > 1, 'the JSON streams as it is written');
      const there = await remote.chat.completions.create(asked(query));
      assert.deepEqual(stable(there.choices), stable(r.choices));
    }
    const paris = await client.chat.completions.create(asked('what is the weather in Paris tomorrow'));
    assert.deepEqual(JSON.parse(paris.choices[0].message.content), { city: 'Paris', day: 'tomorrow' });
    // Tools with tool_choice 'none' are not declared, so they may come along.
    const none = await client.chat.completions.create({ ...asked(QUERIES[1]), tools: TOOLS, tool_choice: 'none' });
    assert.deepEqual(JSON.parse(none.choices[0].message.content), await extract(QUERIES[1]));
  } finally {
    agent.free();
  }
  // { type: 'text' } is the default.
  assert.deepEqual(stable((await client.chat.completions.create(ask(QUERIES[0], { response_format: { type: 'text' } }))).choices),
    stable((await client.chat.completions.create(ask(QUERIES[0]))).choices));
});

test('the same seed gives the same answer at temperature 1, whatever ran before', async () => {
  const request = ask(QUERIES[1], { temperature: 1, seed: 11 });
  const a = await client.chat.completions.create(request);
  await client.chat.completions.create(ask(QUERIES[0], { temperature: 1, seed: 3 }));
  const b = await client.chat.completions.create(request);
  assert.deepEqual(stable(b.choices), stable(a.choices));
  const [envelope] = await agentAnswers([[QUERIES[1], 'query']], { temperature: 1, seed: 11 });
  assert.deepEqual(callsOf(a.choices[0].message), envelope.function_calls);
});

/** Asserts create(params) rejects with a NeedleError whose param is `param`. */
async function refuses(params, param, pattern) {
  await assert.rejects(client.chat.completions.create(params), (error) => {
    assert.ok(error instanceof NeedleError, String(error));
    assert.equal(error.code, STATUS.ARGUMENT, error.message);
    assert.equal(error.param, param, error.message);
    assert.ok(error.message.includes(param), error.message);
    if (pattern) assert.match(error.message, pattern);
    return true;
  });
}

test('bad options and unmappable conversations are refused, naming the option or /messages/N', async () => {
  await refuses(ask('x', { temperature: 3 }), 'temperature', /finite number in \[0, 2\]/);
  await refuses(ask('x', { top_p: 0 }), 'top_p');
  await refuses(ask('x', { seed: -1 }), 'seed');
  await refuses(ask('x', { seed: 2 ** 32 }), 'seed');
  await refuses(ask('x', { max_tokens: 0 }), 'max_tokens');
  await refuses(ask('x', { max_tokens: 10, max_completion_tokens: 20 }), 'max_completion_tokens');
  await refuses(ask('x', { n: 2 }), 'n');
  await refuses(ask('x', { stream: 'yes' }), 'stream');
  await refuses(ask('x', { stream_options: { include_usage: true } }), 'stream_options');
  await refuses(ask('x', { frequency_penalty: 0.5 }), 'frequency_penalty', /unknown option/);
  await refuses(ask('x', { temprature: 1 }), 'temprature', /did you mean temperature/);
  await refuses(ask('x', { tool_choice: 'always' }), 'tool_choice');
  await refuses(ask('x', { tool_choice: { type: 'function', function: { name: 'fly' } } }), 'tool_choice', /"fly"/);
  await refuses({ ...ask('x'), tools: undefined, tool_choice: 'required' }, 'tool_choice');
  await refuses(ask('x', { tools: [{ type: 'custom', custom: { name: 'x' } }] }), '/tools/0');
  await refuses(ask('x', { tools: [{ type: 'function', function: { name: '' } }] }), '/tools/0/function/name');
  const only = { messages: [{ role: 'user', content: 'x' }] };
  await refuses({ ...only, response_format: { type: 'json_object' } }, 'response_format', /json_object.*json_schema/);
  await refuses({ ...only, response_format: { type: 'xml' } }, 'response_format', /"xml"/);
  await refuses({ ...only, response_format: 'json' }, 'response_format');
  await refuses({ ...only, response_format: { type: 'json_schema' } }, 'response_format', /json_schema must be/);
  await refuses({ ...only, response_format: jsonSchema({ name: '' }) }, 'response_format', /json_schema.name/);
  await refuses({ ...only, response_format: jsonSchema({ schema: undefined }) }, 'response_format', /json_schema.schema/);
  await refuses({ ...only, response_format: jsonSchema({ schmea: {} }) }, 'response_format', /did you mean schema/);
  await refuses(ask('x', { response_format: jsonSchema() }), 'response_format', /tools/);
  await refuses({ model: 'demo' }, 'messages');
  await refuses({ messages: [] }, 'messages');
  const user = { role: 'user', content: 'set a timer for 10 minutes' };
  const call = { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'set_timer', arguments: '{"minutes":10}' } }] };
  await refuses({ messages: [user, { role: 'assistant', content: 'done' }] }, '/messages/1', /nothing|no user or tool message/);
  await refuses({ messages: [user, { role: 'system', content: 'late' }] }, '/messages/1', /system facts/);
  await refuses({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, '/messages/0/content/0');
  await refuses({ messages: [{ role: 'tool', tool_call_id: 'x', content: '1' }] }, '/messages/0');
  await refuses({ messages: [{ role: 'function', name: 'f', content: '1' }] }, '/messages/0/role');
  await refuses({ messages: [user, call, { role: 'tool', tool_call_id: 'call_2', content: '{}' }] }, '/messages/2/tool_call_id');
  await refuses({ messages: [user, call, { role: 'tool', tool_call_id: 'call_1', content: '{}' }, { role: 'tool', tool_call_id: 'call_1', content: '{}' }] }, '/messages/3/tool_call_id');
  const two = { ...call, tool_calls: [...call.tool_calls, { id: 'call_2', type: 'function', function: { name: 'set_timer', arguments: '{"minutes":5}' } }] };
  await refuses({ messages: [user, two, { role: 'tool', tool_call_id: 'call_1', content: '{}' }] }, '/messages/1/tool_calls/1', /no tool message/);
  await refuses({ messages: [user, { ...call, tool_calls: [{ ...call.tool_calls[0], function: { name: 'set_timer', arguments: '{minutes' } }] }, { role: 'user', content: 'x' }] },
    '/messages/1/tool_calls/0/function/arguments');
  await refuses({ messages: [user, call, { role: 'tool', tool_call_id: 'call_1', content: '{}' }, { role: 'user', content: 'and now?' }] }, '/messages/3');
  await refuses({ messages: [user, { role: 'assistant', content: '{}' }, user], response_format: jsonSchema() }, '/messages/1', /one query/);
  // An assistant turn this model would not write: it cannot be told what it said.
  const wrong = { ...call, tool_calls: [{ ...call.tool_calls[0], function: { name: 'set_timer', arguments: '{"minutes":99}' } }] };
  await refuses({ messages: [user, wrong, { role: 'tool', tool_call_id: 'call_1', content: '{}' }], tools: TOOLS }, '/messages/1', /regenerates/);
  // The client still answers after every refusal.
  assertCompletionShape(await client.chat.completions.create(ask(QUERIES[0])));
});

test('a signal aborts: before the request, during a stream, or by leaving the stream early', async () => {
  const before = await client.chat.completions.create(ask(QUERIES[1]));
  const isAbort = (error) => error instanceof NeedleError && error.name === 'AbortError' && error.code === STATUS.ABORTED;
  await assert.rejects(client.chat.completions.create(ask(QUERIES[1], { signal: AbortSignal.abort() })), isAbort);
  const controller = new AbortController();
  const stream = await client.chat.completions.create(ask(QUERIES[1], { stream: true, signal: controller.signal }));
  let seen = 0;
  await assert.rejects(async () => {
    for await (const chunk of stream) if (chunk.choices[0]?.delta.reasoning_content && ++seen === 2) controller.abort();
  }, isAbort);
  for (const c of [client, remote]) { // leaving early stops the model, here and in the worker
    for await (const chunk of await c.chat.completions.create(ask(QUERIES[1], { stream: true }))) if (chunk.choices[0].delta.reasoning_content) break;
    const after = await c.chat.completions.create(ask(QUERIES[1]));
    assert.deepEqual(stable(after.choices), stable(before.choices), 'an aborted request loses nothing');
  }
  const remoteController = new AbortController();
  const remoteStream = await remote.chat.completions.create(ask(QUERIES[1], { stream: true, signal: remoteController.signal }));
  await assert.rejects(async () => {
    for await (const chunk of remoteStream) if (chunk.choices[0]?.delta.reasoning_content) remoteController.abort();
  }, isAbort);
});

test('openai() loads a source itself and frees only what it loaded', async () => {
  const own = await openai({ name: 'needle-demo' });
  const r = await own.chat.completions.create(ask(QUERIES[0]));
  assert.equal(r.model, 'needle-demo');
  assert.deepEqual((await own.models.list()).data.map((m) => m.id), ['needle-demo']);
  await own.free();
  await own.free(); // twice is harmless
  await assert.rejects(own.chat.completions.create(ask(QUERIES[0])), /freed/);
  await assert.rejects(openai({ model, nmae: 'x' }), /unknown option nmae/);
  const borrowed = await openai({ model });
  await borrowed.free();
  assert.ok(model.tokenize('still here').length > 0); // the model lives on
  assertCompletionShape(await client.chat.completions.create(ask(QUERIES[0])));
});
