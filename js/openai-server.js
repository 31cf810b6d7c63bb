// openai-server.js: an OpenAI-compatible HTTP endpoint over an openai()
// client (openai.js), on node:http alone: POST /v1/chat/completions (JSON,
// or server-sent events with stream: true) and GET /v1/models. The client
// answers one request at a time (one engine) and queues the rest; a request
// whose connection closes is aborted. Binds 127.0.0.1 unless told otherwise:
// the endpoint has no authentication. Node only (the CLI's `serve`).
//
// Web pages the user visits can reach 127.0.0.1 too, so the server answers
// no page but those `cors` names: it refuses a foreign Origin, a Host that
// is a DNS name other than localhost or `host` (DNS rebinding: a page whose
// name now points here would send its own), and a POST that is not
// application/json (the one body a page cannot send without asking first).
//
//   const server = await serveOpenAI(await openai(), { port: 8000 });
//   // new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused' })

import { createServer } from 'node:http';
import { isIP } from 'node:net';
import { NeedleError, STATUS } from './errors.js';

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
    req.on('close', () => reject(httpError(400, 'the client closed the connection before the request body ended')));
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
  const controller = new AbortController();
  // The caller hung up, while its body was read, while queued or while answered: its turn stops.
  res.on('close', () => { if (!res.writableFinished) controller.abort(); });
  const params = parseParams(await readBody(req, limit));
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

/** The path of an origin-form request target ("/v1/models?x"), or a 400. A
 *  target starting "//" (or "/\\") is refused, not routed: URL parsers read
 *  it as a host name ("//v1/chat/completions" as host v1), so its meaning
 *  depends on who reads it; it comes from a base URL ending in "/". */
function pathOf(target) {
  if (!/^\/(?![/\\])/.test(target)) {
    throw httpError(400, `the request target ${JSON.stringify(target.slice(0, 100))} is not a path: it must start with one "/"`,
      { code: 'invalid_request_target' });
  }
  return new URL(target, 'http://localhost').pathname.replace(/\/+$/, '');
}

/** The host name of a Host header ("name:port", "[v6]:port" or "name"), lowercased. */
function hostName(header) {
  return /^(\[[^\]]*\]|[^:]*)(?::\d*)?$/.exec(header)?.[1].toLowerCase().replace(/\.$/, '');
}

/** Refuses a Host that names this server by a DNS name other than localhost
 *  or the host it was told to bind: DNS rebinding. An IP address cannot be
 *  rebound, and a request without Host (HTTP/1.0) names nothing. */
function checkHost(req, names) {
  const header = req.headers.host;
  if (header === undefined) return;
  const name = hostName(header);
  if (name && (isIP(name.replace(/^\[(.*)\]$/, '$1')) || names.includes(name))) return;
  throw httpError(403, `the Host header ${JSON.stringify(header)} does not name this server: it answers to ${names.join(', ')} `
    + 'and IP addresses (a guard against DNS rebinding)', { code: 'host_not_allowed' });
}

/** Refuses a page's Origin unless it is this server's own or `cors` names it;
 *  true for a cors origin, whose answers then carry its CORS headers. */
function checkOrigin(req, res, cors) {
  const { origin, host } = req.headers;
  if (origin === undefined || origin.toLowerCase() === `http://${host}`.toLowerCase()) return false;
  if (!cors.includes(origin)) {
    throw httpError(403, `a page at ${origin.slice(0, 100)} may not call this server: serve it with --cors ${origin.slice(0, 100)} to let it`,
      { code: 'origin_not_allowed' });
  }
  res.setHeader('Access-Control-Allow-Origin', origin);
  return true;
}

/** The answer to a cors origin's preflight (OPTIONS): the methods, and the headers it asked for. */
function preflight(req, res) {
  const privateNetwork = req.headers['access-control-request-private-network'] === 'true'; // Chrome's, from a public page
  res.writeHead(204, {
    'Access-Control-Allow-Methods': 'GET, POST',
    'Access-Control-Allow-Headers': req.headers['access-control-request-headers'] ?? '',
    'Access-Control-Max-Age': '600',
    ...(privateNetwork ? { 'Access-Control-Allow-Private-Network': 'true' } : {}),
  });
  res.end();
}

/** Refuses a POST body that does not say it is JSON (charset and other parameters may follow). */
function checkJson(req) {
  const type = req.headers['content-type'];
  if (type?.split(';')[0].trim().toLowerCase() === 'application/json') return;
  throw httpError(415, `the request body must be JSON, sent with Content-Type: application/json, not ${type ? JSON.stringify(type) : 'without one'}`,
    { code: 'unsupported_media_type' });
}

async function route(client, req, res, { limit, names, cors }) {
  const path = pathOf(req.url);
  res.setHeader('Vary', 'Origin');
  checkHost(req, names);
  const crossOrigin = checkOrigin(req, res, cors);
  const allow = { '/v1/chat/completions': 'POST', '/v1/models': 'GET' }[path];
  if (!allow) throw httpError(404, `no route ${req.method} ${path}: this server answers POST /v1/chat/completions and GET /v1/models`, { code: 'not_found' });
  if (crossOrigin && req.method === 'OPTIONS') return preflight(req, res);
  if (req.method !== allow) throw httpError(405, `${path} takes ${allow}, not ${req.method}`, { code: 'method_not_allowed' });
  if (allow === 'GET') return sendJson(res, 200, await client.models.list());
  checkJson(req);
  return completions(client, req, res, limit);
}

/** The origins `cors` names, each checked to be one ("https://app.example"). */
function originsOf(cors) {
  return [cors].flat().map((value) => {
    let url = null;
    try { url = new URL(value); } catch { /* refused below */ }
    if (!url || url.origin === 'null' || url.href !== `${url.origin}/`) {
      throw new NeedleError(`option cors ${JSON.stringify(value)} is not an origin: give scheme://host[:port], e.g. https://app.example`, STATUS.ARGUMENT);
    }
    return url.origin;
  });
}

/**
 * Serves client (from openai()) over HTTP. options: port (default 8000; 0
 * picks a free one), host (default 127.0.0.1), bodyLimit (bytes, 1 MB),
 * cors (an origin, or a list, whose pages may call it: "https://app.example").
 * Resolves once listening to { url, port, close() }; close() does not free the client.
 */
export async function serveOpenAI(client, { port = 8000, host = '127.0.0.1', bodyLimit = BODY_LIMIT, cors = [] } = {}) {
  const names = ['localhost', ...(isIP(host) || host === 'localhost' ? [] : [host.toLowerCase()])];
  const options = { limit: bodyLimit, names, cors: originsOf(cors) };
  const server = createServer((req, res) => {
    route(client, req, res, options).catch((error) => {
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
