// What `needle-wasm serve` (js/openai-server.js) refuses, so that the web
// pages the user visits cannot drive it (issue 46): a body that is not
// application/json (415: a page sends text/plain without asking first), a
// Host that is a foreign DNS name (403: DNS rebinding), a foreign Origin
// (403, unless --cors names it: then CORS headers and a preflight answer),
// request targets that are not a path (400, here and in web/serve.js), more
// than 256 messages (400 naming `messages`), a body over 1 MB (413); none of
// them makes the model work. A client that hangs up stops its turn within a
// step or two and the next request is answered as if alone. Needs dist/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import OpenAI, { APIError } from 'openai';
import { loadModel, openai } from '../../js/index.js';
import { serveOpenAI } from '../../js/openai-server.js';
import { startServer } from '../../web/serve.js';

const TOOLS = JSON.parse(readFileSync(new URL('../../dist/demo-tools.json', import.meta.url), 'utf8'))
  .map((fn) => ({ type: 'function', function: fn }));
const APP = 'https://app.example';
const ask = (query, extra = {}) => ({ model: 'demo', messages: [{ role: 'user', content: query }], tools: TOOLS, ...extra });

let model;
let facade;
let server;
let api;
let steps = 0; // engine steps of every agent turn
let onStep = null; // called before each step
let begun = []; // steps counted when each turn began
let creates = 0; // requests handed to the facade

before(async () => {
  model = await loadModel(undefined, { worker: false });
  // Counts needle_agent_step calls: the agent reads engine.x on every step.
  const exports = model.engine.x;
  model.engine.x = { ...exports,
    needle_agent_step: (...args) => { steps++; onStep?.(); return exports.needle_agent_step(...args); },
    needle_agent_begin: (...args) => { begun.push(steps); return exports.needle_agent_begin(...args); } };
  facade = await openai({ model });
  const counted = { models: facade.models, chat: { completions: { create: (params) => { creates++; return facade.chat.completions.create(params); } } } };
  server = await serveOpenAI(counted, { port: 0, cors: [APP] });
  api = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server.close();
  await facade.free();
  await model.free();
});

/** One raw HTTP exchange: { status, headers, body (parsed when JSON) }. The
 *  path goes out as written and headers as given (Host included). */
function exchange(base, { method = 'GET', path, headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = request(base, { method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (part) => { text += part; }).on('end', () => {
        const json = /json/.test(res.headers['content-type'] ?? '');
        resolve({ status: res.statusCode, headers: res.headers, body: json && text ? JSON.parse(text) : text });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const json = { 'Content-Type': 'application/json' };
const small = JSON.stringify(ask('set a timer for 10 minutes'));

/** Asserts an OpenAI error body with `status` and `code`; returns its message. */
function refused(answer, status, code) {
  assert.equal(answer.status, status, JSON.stringify(answer.body));
  assert.deepEqual(Object.keys(answer.body.error).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(answer.body.error.type, 'invalid_request_error');
  assert.equal(answer.body.error.code, code);
  return answer.body.error.message;
}

/** Call ids differ run to run. */
const stable = (value) => JSON.parse(JSON.stringify(value), (key, v) => (key === 'id' ? '*' : v));

/** Runs fn and asserts the model did no work meanwhile. */
async function noWork(fn) {
  const before = { steps, creates };
  await fn();
  assert.deepEqual({ steps, creates }, before, 'the model did no work');
}

test('a POST that is not application/json gets 415, and the model does no work', async () => {
  await noWork(async () => {
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const answer = await exchange(server.url, { method: 'POST', path: '/v1/chat/completions', headers: { 'Content-Type': type }, body: small });
      assert.match(refused(answer, 415, 'unsupported_media_type'), /Content-Type: application\/json/, type);
    }
    const none = await exchange(server.url, { method: 'POST', path: '/v1/chat/completions', body: small });
    assert.match(refused(none, 415, 'unsupported_media_type'), /without one/);
  });
  // What a page's fetch sends by default for a string body.
  await noWork(async () => {
    const response = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', body: small });
    assert.equal(response.status, 415);
  });
  // Parameters after the type are fine.
  const answer = await exchange(server.url, { method: 'POST', path: '/v1/chat/completions', headers: { 'Content-Type': 'Application/JSON; charset=utf-8' }, body: small });
  assert.equal(answer.status, 200);
  assert.equal(answer.body.object, 'chat.completion');
});

test('a Host that is a foreign DNS name gets 403 (DNS rebinding); loopback names and IP addresses pass', async () => {
  await noWork(async () => {
    for (const host of ['evil.example', `evil.example:${server.port}`, 'localhost.evil.example', '127.0.0.1.nip.io']) {
      const answer = await exchange(server.url, { path: '/v1/models', headers: { Host: host } });
      assert.match(refused(answer, 403, 'host_not_allowed'), /DNS rebinding/, host);
      const post = await exchange(server.url, { method: 'POST', path: '/v1/chat/completions', headers: { ...json, Host: host }, body: small });
      refused(post, 403, 'host_not_allowed');
    }
  });
  for (const host of [`localhost:${server.port}`, `LOCALHOST:${server.port}`, `127.0.0.1:${server.port}`, `[::1]:${server.port}`, 'localhost', '192.168.1.20:8000']) {
    const answer = await exchange(server.url, { path: '/v1/models', headers: { Host: host } });
    assert.equal(answer.status, 200, host);
  }
});

test('a foreign Origin gets 403; one --cors names gets CORS headers and a preflight answer', async () => {
  await noWork(async () => {
    for (const origin of ['https://evil.example', 'null', `http://localhost:${server.port + 1}`]) {
      const answer = await exchange(server.url, { method: 'POST', path: '/v1/chat/completions', headers: { ...json, Origin: origin }, body: small });
      assert.match(refused(answer, 403, 'origin_not_allowed'), /--cors/, origin);
      assert.equal(answer.headers['access-control-allow-origin'], undefined);
      refused(await exchange(server.url, { path: '/v1/models', headers: { Origin: origin } }), 403, 'origin_not_allowed');
      refused(await exchange(server.url, { method: 'OPTIONS', path: '/v1/chat/completions', headers: { Origin: origin } }), 403, 'origin_not_allowed');
    }
  });
  // The server's own origin is no foreign one.
  const own = await exchange(server.url, { path: '/v1/models', headers: { Origin: server.url } });
  assert.equal(own.status, 200);
  // The --cors origin: a preflight, then the answer with its CORS headers, through the official client.
  const preflight = await exchange(server.url, { method: 'OPTIONS', path: '/v1/chat/completions', headers: {
    Origin: APP, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type, x-stainless-os',
    'Access-Control-Request-Private-Network': 'true',
  } });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers['access-control-allow-origin'], APP);
  assert.match(preflight.headers['access-control-allow-methods'], /POST/);
  assert.equal(preflight.headers['access-control-allow-headers'], 'authorization, content-type, x-stainless-os');
  assert.equal(preflight.headers['access-control-allow-private-network'], 'true');
  assert.equal(preflight.headers.vary, 'Origin');
  const page = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: { Origin: APP } });
  const { data, response } = await page.chat.completions.create(ask('set a timer for 10 minutes')).withResponse();
  assert.equal(response.headers.get('access-control-allow-origin'), APP);
  assert.equal(data.choices[0].message.tool_calls[0].function.name, 'set_timer');
  // Its errors carry the header too, so the page can read them.
  const bad = await exchange(server.url, { method: 'POST', path: '/v1/chat/completions', headers: { 'Content-Type': 'text/plain', Origin: APP }, body: small });
  assert.equal(bad.status, 415);
  assert.equal(bad.headers['access-control-allow-origin'], APP);
});

test('cors takes origins only', async () => {
  for (const cors of ['app.example', 'https://app.example/path', 'https://app.example/?q', '*', 'file:///x']) {
    await assert.rejects(serveOpenAI(facade, { port: 0, cors }), (error) => {
      assert.equal(error.name, 'NeedleError');
      assert.match(error.message, /option cors .* is not an origin/);
      return true;
    }, cors);
  }
});

test('request targets that are not a path get 400, in serve and in web/serve.js', async () => {
  const web = await startServer({ port: 0 });
  try {
    for (const path of ['//', '//v1/chat/completions', '//v1/models', '/\\v1/models', '//evil.example/v1/models']) {
      const post = path.includes('chat');
      const answer = await exchange(server.url, { path, ...(post ? { method: 'POST', headers: json, body: small } : {}) });
      assert.match(refused(answer, 400, 'invalid_request_target'), /is not a path: it must start with one "\/"/, path);
      const page = await exchange(web.url, { path });
      assert.equal(page.status, 400, `web/serve.js ${path}`);
    }
    assert.equal((await exchange(web.url, { path: '/' })).status, 200);
  } finally {
    await new Promise((resolve) => web.server.close(resolve));
  }
});

test('more than 256 messages get 400 naming messages, before any work', async () => {
  const messages = Array.from({ length: 257 }, () => ({ role: 'user', content: 'set a timer for 10 minutes' }));
  const before = steps;
  await assert.rejects(api.chat.completions.create({ model: 'demo', messages, tools: TOOLS }), (error) => {
    assert.ok(error instanceof APIError);
    assert.equal(error.status, 400);
    assert.equal(error.param, 'messages');
    assert.match(error.message, /257 messages: at most 256/);
    return true;
  });
  assert.equal(steps, before);
  // 256 are fine (consecutive user messages are one query).
  assert.equal((await api.chat.completions.create({ model: 'demo', messages: messages.slice(1), tools: TOOLS, max_tokens: 8 })).object, 'chat.completion');
});

test('a body over 1 MB gets 413 before the model does any work', async () => {
  await noWork(async () => {
    await assert.rejects(api.chat.completions.create(ask('x'.repeat(1100000))), (error) => error.status === 413);
  });
});

test('tool results nested 5,000 deep get 400 naming the message, not a 500', async () => {
  const first = await api.chat.completions.create(ask('set a timer for 10 minutes'));
  const { message } = first.choices[0];
  const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`;
  const messages = [{ role: 'user', content: 'set a timer for 10 minutes' }, message, { role: 'tool', tool_call_id: message.tool_calls[0].id, content: deep }];
  await assert.rejects(api.chat.completions.create({ model: 'demo', messages, tools: TOOLS }), (error) => {
    assert.equal(error.status, 400);
    assert.match(error.param, /^\/messages\/2\/content\/0\/0/);
    assert.match(error.message, /nested deeper than 256 levels/);
    return true;
  });
});

test('a client that hangs up mid-turn stops the turn within a step or two; the next request is answered promptly', async () => {
  const query = 'what is the weather in Paris tomorrow '.repeat(60); // a long prefill: about 100 steps
  let started = performance.now();
  let count = steps;
  const alone = await api.chat.completions.create(ask(query));
  const aloneMs = performance.now() - started;
  const aloneSteps = steps - count;
  for (const stream of [false, true]) {
    const req = request(`${server.url}/v1/chat/completions`, { method: 'POST', headers: json });
    req.on('error', () => {}); // ECONNRESET: ours
    // Hang up at the 20th step of the turn, from inside it.
    const hangUp = steps + 20;
    const gone = new Promise((resolve) => {
      onStep = () => { if (steps === hangUp) { onStep = null; req.destroy(); resolve(); } };
    });
    req.end(JSON.stringify(ask(query, { stream })));
    await gone;
    begun = [];
    started = performance.now();
    const models = await api.models.list();
    const modelsMs = performance.now() - started;
    const next = await api.chat.completions.create(ask(query));
    const nextMs = performance.now() - started;
    const after = begun[0] - hangUp; // the hung-up turn's steps, up to the next turn's start
    console.log(`stream ${stream}: a turn alone ${aloneSteps} steps, ${aloneMs.toFixed(0)} ms; after the hang-up GET /v1/models `
      + `in ${modelsMs.toFixed(0)} ms, the next turn in ${nextMs.toFixed(0)} ms; ${after} steps of the hung-up turn ran after it`);
    assert.equal(models.data.length, 1);
    assert.deepEqual(stable(next.choices), stable(alone.choices));
    assert.ok(after >= 0 && after <= 5, `${after} steps ran after the hang-up`);
  }
});

test('needle-wasm serve --cors ORIGIN: that origin is let in, others refused', async () => {
  const cli = fileURLToPath(new URL('../../js/cli.js', import.meta.url));
  const child = spawn(process.execPath, [cli, 'serve', '--port', '0', '--cors', APP], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const url = await new Promise((resolve, reject) => {
      let printed = '';
      child.stdout.setEncoding('utf8').on('data', (text) => {
        printed += text;
        const found = /(http:\/\/\S+)\/v1\b/.exec(printed);
        if (found) resolve(found[1]);
      });
      child.once('exit', (code) => reject(new Error(`serve exited (${code}): ${printed}`)));
    });
    const allowed = await exchange(url, { path: '/v1/models', headers: { Origin: APP } });
    assert.equal(allowed.status, 200);
    assert.equal(allowed.headers['access-control-allow-origin'], APP);
    assert.equal((await exchange(url, { path: '/v1/models', headers: { Origin: 'https://evil.example' } })).status, 403);
  } finally {
    child.kill();
  }
});
