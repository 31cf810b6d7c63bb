// openai-server.js: an OpenAI-compatible HTTP endpoint over an openai()
// client (openai.js), on node:http alone: POST /v1/chat/completions (JSON,
// or server-sent events with stream: true) and GET /v1/models. The client
// answers one request at a time (one engine) and queues the rest; a request
// whose connection closes is aborted. Binds 127.0.0.1 unless told otherwise:
// the endpoint has no authentication. Node only (the CLI's `serve`).
//
//   const server = await serveOpenAI(await openai(), { port: 8000 });
//   // new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused' })

import { createServer } from 'node:http';
import { STATUS } from './errors.js';

export const BODY_LIMIT = 1 << 20;
const DRAIN_LIMIT = 16 << 20; // past this a too-large body is cut off, not read to its end

/** An error with the HTTP status and OpenAI error fields it answers with. */
function httpError(status, message, { type = 'invalid_request_error', param = null, code = null } = {}) {
  return Object.assign(new Error(message), { status, type, param, code });
}

/** OpenAI's { error: { message, type, param, code } } and its status for any error. */
export function errorResponse(error) {
  if (error.status && error.type) {
    return { status: error.status, body: { error: { message: error.message, type: error.type, param: error.param, code: error.code } } };
  }
  // NeedleErrors: a bad request, a schema the grammar refuses, a text over a limit are the caller's.
  const client = [STATUS.ARGUMENT, STATUS.SCHEMA, STATUS.CONTEXT].includes(error.code);
  const name = Object.keys(STATUS).find((key) => STATUS[key] === error.code);
  const code = error.code === STATUS.CONTEXT ? 'context_length_exceeded' : (name ?? error.code ?? null);
  return {
    status: client ? 400 : 500,
    body: { error: { message: error.message, type: client ? 'invalid_request_error' : 'server_error', param: error.param ?? null, code: code === null ? null : String(code).toLowerCase() } },
  };
}

function sendJson(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

/** The request body as text; over `limit` bytes a 413 (the rest is read and dropped up to a cap). */
function readBody(req, limit) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    req.on('data', (part) => {
      size += part.length;
      if (size <= limit) parts.push(part);
      else if (size > DRAIN_LIMIT) req.destroy();
    });
    req.on('end', () => (size > limit
      ? reject(httpError(413, `the request body is ${size} bytes, over the limit of ${limit}`, { code: 'request_too_large' }))
      : resolve(Buffer.concat(parts).toString('utf8'))));
    req.on('error', reject);
  });
}

/** The JSON object of a POST body, or a 400. */
function parseParams(text) {
  let params;
  try {
    params = JSON.parse(text);
  } catch (error) {
    throw httpError(400, `the request body is not JSON: ${error.message}`);
  }
  if (!params || typeof params !== 'object' || Array.isArray(params)) throw httpError(400, 'the request body must be a JSON object');
  return params;
}

/** POST /v1/chat/completions: the answer as JSON, or as SSE events ending in [DONE]. */
async function completions(client, req, res, limit) {
  const params = parseParams(await readBody(req, limit));
  const controller = new AbortController();
  res.on('close', () => { if (!res.writableFinished) controller.abort(); }); // the caller hung up
  const answer = await client.chat.completions.create({ ...params, signal: controller.signal });
  if (!params.stream) return sendJson(res, 200, answer);
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
  try {
    for await (const chunk of answer) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
    res.write('data: [DONE]\n\n');
  } catch (error) {
    // Headers are gone: OpenAI sends a failure mid-stream as an error event.
    if (!controller.signal.aborted) res.write(`data: ${JSON.stringify(errorResponse(error).body)}\n\n`);
  }
  res.end();
}

async function route(client, req, res, limit) {
  const path = new URL(req.url, 'http://localhost').pathname.replace(/\/+$/, '');
  const allow = { '/v1/chat/completions': 'POST', '/v1/models': 'GET' }[path];
  if (!allow) throw httpError(404, `no route ${req.method} ${path}: this server answers POST /v1/chat/completions and GET /v1/models`, { code: 'not_found' });
  if (req.method !== allow) throw httpError(405, `${path} takes ${allow}, not ${req.method}`, { code: 'method_not_allowed' });
  if (allow === 'GET') return sendJson(res, 200, await client.models.list());
  return completions(client, req, res, limit);
}

/**
 * Serves client (from openai()) over HTTP. options: port (default 8000; 0
 * picks a free one), host (default 127.0.0.1), bodyLimit (bytes, 1 MB).
 * Resolves once listening to { url, port, close() }; close() does not free the client.
 */
export async function serveOpenAI(client, { port = 8000, host = '127.0.0.1', bodyLimit = BODY_LIMIT } = {}) {
  const server = createServer((req, res) => {
    route(client, req, res, bodyLimit).catch((error) => {
      if (res.headersSent || res.destroyed) return res.destroy();
      const { status, body } = errorResponse(error);
      if (status === 413) res.setHeader('Connection', 'close');
      sendJson(res, status, body);
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const bound = server.address().port;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${bound}`,
    port: bound,
    close: () => new Promise((resolve) => { server.close(() => resolve()); server.closeAllConnections?.(); }),
  };
}
