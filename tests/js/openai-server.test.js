// The OpenAI-compatible endpoint (js/openai-server.js) driven by the official
// `openai` npm client: the same answers as the facade it serves, streamed as
// server-sent events the client's own stream helper folds, the reasoning as
// reasoning_content, response_format json_schema read by the client's
// parse(), /v1/models, errors
// in OpenAI's { error: { message, type, param, code } } shape (400, 404, 413),
// requests queued one at a time, and a closed connection aborting its
// request. What it refuses to web pages: serve-guard.test.js. Needs dist/ (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import OpenAI, { APIError } from 'openai';
import { loadModel, openai } from '../../js/index.js';
import { serveOpenAI } from '../../js/openai-server.js';

const DECLARATIONS = JSON.parse(readFileSync(new URL('../../dist/demo-tools.json', import.meta.url), 'utf8'));
const TOOLS = DECLARATIONS.map((fn) => ({ type: 'function', function: fn }));
const ask = (query, extra = {}) => ({ model: 'demo', messages: [{ role: 'user', content: query }], tools: TOOLS, ...extra });

let model;
let facade;
let server;
let api;
const signals = []; // the signal of every request the server made

before(async () => {
  model = await loadModel(undefined, { worker: false });
  facade = await openai({ model });
  const watched = { ...facade, chat: { completions: { create: (params) => { signals.push(params.signal); return facade.chat.completions.create(params); } } } };
  server = await serveOpenAI(watched, { port: 0 });
  api = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server.close();
  await facade.free();
  await model.free();
});

/** What differs run to run: ids and timestamps. */
const stable = (value) => JSON.parse(JSON.stringify(value), (key, v) => {
  if (key === 'created') return 0;
  if (key === 'id' && typeof v === 'string') return v.replace(/^(chatcmpl-|call_).*/, '$1*');
  return v;
});

test('binds 127.0.0.1 by default; GET /v1/models lists the model', async () => {
  assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const page = await api.models.list();
  assert.deepEqual(page.data.map((m) => [m.id, m.object, m.owned_by]), [['demo', 'model', 'needle-wasm']]);
});

test('POST /v1/chat/completions: the facade\'s answer, as JSON', async () => {
  for (const query of ['set a timer for 10 minutes', 'what is the weather in Paris tomorrow', 'tell me a joke']) {
    const over = await api.chat.completions.create(ask(query));
    const direct = await facade.chat.completions.create(ask(query));
    assert.deepEqual(stable(over.choices), stable(direct.choices), query);
    assert.equal(over.object, 'chat.completion');
    assert.equal(over.usage.completion_tokens, direct.usage.completion_tokens);
  }
  // A tool-result turn through the client, as an OpenAI app sends it.
  const first = await api.chat.completions.create(ask('set a timer for 10 minutes'));
  const message = first.choices[0].message;
  const messages = [{ role: 'user', content: 'set a timer for 10 minutes' }, message,
    { role: 'tool', tool_call_id: message.tool_calls[0].id, content: '{"ok":true}' }];
  const next = await api.chat.completions.create({ model: 'demo', messages, tools: TOOLS });
  const direct = await facade.chat.completions.create({ model: 'demo', messages, tools: TOOLS });
  assert.deepEqual(stable(next.choices), stable(direct.choices));
});

test('stream: true: server-sent events the client folds into the same answer', async () => {
  for (const query of ['set a timer for 10 minutes', 'lock the front door and set the heating to 21 degrees']) {
    const whole = await api.chat.completions.create(ask(query));
    const chunks = [];
    for await (const chunk of await api.chat.completions.create(ask(query, { stream: true, stream_options: { include_usage: true } }))) chunks.push(chunk);
    assert.ok(chunks.length > 3 && chunks.every((c) => c.object === 'chat.completion.chunk'));
    assert.deepEqual(chunks.at(-1).choices, []);
    assert.equal(chunks.at(-1).usage.completion_tokens, whole.usage.completion_tokens);
    // The client's own accumulator (ChatCompletionStream) reads our chunk shapes.
    const folded = await api.chat.completions.stream(ask(query)).finalChatCompletion();
    assert.deepEqual(stable(folded.choices[0].message.tool_calls), stable(whole.choices[0].message.tool_calls));
    assert.equal(folded.choices[0].message.content, whole.choices[0].message.content);
    assert.equal(folded.choices[0].finish_reason, whole.choices[0].finish_reason);
  }
  // The wire format itself: data: lines, then data: [DONE].
  const response = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(ask('set a timer for 10 minutes', { stream: true })) });
  assert.equal(response.headers.get('content-type'), 'text/event-stream');
  const events = (await response.text()).split('\n\n');
  assert.equal(events.pop(), '');
  assert.equal(events.pop(), 'data: [DONE]');
  assert.ok(events.every((e) => e.startsWith('data: {')));
});

test('reasoning_content: the reasoning of every turn; content only for a turn that calls nothing', async () => {
  for (const query of ['set a timer for 10 minutes', 'order a pizza']) {
    const whole = await api.chat.completions.create(ask(query));
    const { message } = whole.choices[0];
    assert.ok(message.reasoning_content.length > 0, query);
    assert.equal(message.content, message.tool_calls ? null : message.reasoning_content, query);
    // Streamed: reasoning_content deltas, and a calling turn's content never.
    let reasoning = '';
    let content = '';
    for await (const chunk of await api.chat.completions.create(ask(query, { stream: true }))) {
      reasoning += chunk.choices[0]?.delta.reasoning_content ?? '';
      content += chunk.choices[0]?.delta.content ?? '';
    }
    assert.equal(reasoning, message.reasoning_content);
    assert.equal(content || null, message.content);
    const folded = await api.chat.completions.stream(ask(query)).finalChatCompletion();
    assert.equal(folded.choices[0].message.content, message.content);
  }
  // The client's answer without a call goes back into the conversation as it is.
  const declined = (await api.chat.completions.create(ask('order a pizza'))).choices[0].message;
  const messages = [{ role: 'user', content: 'order a pizza' }, declined, { role: 'user', content: 'set a timer for 10 minutes' }];
  const next = await api.chat.completions.create({ model: 'demo', messages, tools: TOOLS });
  assert.deepEqual(stable(next.choices), stable((await facade.chat.completions.create({ model: 'demo', messages, tools: TOOLS })).choices));
});

test('response_format json_schema: the JSON the client\'s parse() reads, whole or streamed', async () => {
  const weather = DECLARATIONS.find((d) => d.name === 'get_weather');
  const format = { type: 'json_schema', json_schema: { name: weather.name, description: weather.description, schema: weather.parameters, strict: true } };
  const request = { model: 'demo', messages: [{ role: 'user', content: 'what is the weather in Paris tomorrow' }], response_format: format };
  const parsed = await api.chat.completions.parse(request);
  assert.deepEqual(parsed.choices[0].message.parsed, { city: 'Paris', day: 'tomorrow' });
  assert.equal(parsed.choices[0].message.tool_calls, undefined);
  assert.equal(parsed.choices[0].finish_reason, 'stop');
  assert.equal(parsed.choices[0].message.content, (await facade.chat.completions.create(request)).choices[0].message.content);
  const streamed = await api.chat.completions.stream(request).finalChatCompletion();
  assert.equal(streamed.choices[0].message.content, parsed.choices[0].message.content);
  await fails(api.chat.completions.create({ ...request, response_format: { type: 'json_object' } }), 400, (e) => {
    assert.equal(e.param, 'response_format');
    assert.match(e.message, /json_object/);
  });
  await fails(api.chat.completions.create({ ...request, tools: TOOLS }), 400, (e) => assert.equal(e.param, 'response_format'));
});

/** Asserts the client's request fails with `status` and an OpenAI error body. */
async function fails(promise, status, check) {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof APIError, String(error));
    assert.equal(error.status, status, error.message);
    assert.deepEqual(Object.keys(error.error).sort(), ['code', 'message', 'param', 'type']);
    check?.(error);
    return true;
  });
}

test('errors in OpenAI\'s shape: 400 naming the param, 413 over 1 MB, 404, 405', async () => {
  await fails(api.chat.completions.create(ask('x', { temperature: 9 })), 400, (e) => {
    assert.equal(e.type, 'invalid_request_error');
    assert.equal(e.param, 'temperature');
    assert.equal(e.code, 'argument');
    assert.match(e.message, /temperature is 9/);
  });
  await fails(api.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }), 400,
    (e) => assert.equal(e.param, '/messages/0/content/0'));
  await fails(api.chat.completions.create(ask('x', { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'integer', foo: 1 } } } } }] })), 400,
    (e) => { assert.equal(e.code, 'schema'); assert.match(e.message, /\/properties\/a/); });
  await fails(api.chat.completions.create(ask('x'.repeat(1100000))), 413, (e) => {
    assert.equal(e.code, 'request_too_large');
    assert.match(e.message, /over the limit of 1048576/);
  });
  const notJson = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"model":' });
  assert.equal(notJson.status, 400);
  assert.match((await notJson.json()).error.message, /not JSON/);
  const missing = await fetch(`${server.url}/v2/things`);
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).error.type, 'invalid_request_error');
  assert.equal((await fetch(`${server.url}/v1/chat/completions`)).status, 405);
  // Still serving after every error.
  assert.equal((await api.chat.completions.create(ask('set a timer for 10 minutes'))).object, 'chat.completion');
});

test('requests at once are answered one at a time, each as if alone', async () => {
  const queries = ['set a timer for 10 minutes', 'what is the weather in Paris tomorrow', 'tell me a joke'];
  const alone = [];
  for (const query of queries) alone.push(await api.chat.completions.create(ask(query)));
  const together = await Promise.all(queries.map((query) => api.chat.completions.create(ask(query))));
  assert.deepEqual(stable(together.map((r) => r.choices)), stable(alone.map((r) => r.choices)));
});

test('a client that hangs up aborts its request; the next one is answered as before', async () => {
  const query = 'what is the weather in Paris tomorrow';
  const before = await api.chat.completions.create(ask(query));
  const body = JSON.stringify(ask(query, { stream: true }));
  await new Promise((resolve, reject) => {
    const req = request(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' } }, (res) => {
      res.once('data', () => { req.destroy(); resolve(); }); // the first event, then gone
    });
    req.on('error', (error) => { if (error.code !== 'ECONNRESET') reject(error); });
    req.end(body);
  });
  const signal = signals.at(-1);
  for (let i = 0; i < 100 && !signal.aborted; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(signal.aborted, true);
  const after = await api.chat.completions.create(ask(query));
  assert.deepEqual(stable(after.choices), stable(before.choices));
});
