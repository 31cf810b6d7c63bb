// needle2-host.js: a local stand-in for Hugging Face serving Needle 2, for
// tests (there is no internet here). Like the real host it is two origins:
// the hub (one port) answers /Cactus-Compute/needle2/resolve/main/needle2.cact
// with a 302 to the CDN (another port), which serves the bytes with
// Access-Control-Allow-Origin: *, an ETag (If-None-Match: 304),
// Content-Length and Range requests (206). Both answer CORS preflights.
// Other hub routes (ROUTES): a 404, a 401 and a 403 (gated / private repos),
// a 500, the archive from a CDN that sends no CORS headers, and another
// archive (a wrong file).
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';

const REPO = '/Cactus-Compute/needle2/resolve/main';
export const ROUTES = Object.freeze({
  needle2: `${REPO}/needle2.cact`,
  missing: `${REPO}/missing.cact`,
  unauthorized: '/Cactus-Compute/gated/resolve/main/needle2.cact',
  forbidden: '/Cactus-Compute/private/resolve/main/needle2.cact',
  broken: '/Cactus-Compute/broken/resolve/main/needle2.cact',
  noCors: `${REPO}/no-cors/needle2.cact`,
  wrong: `${REPO}/wrong.cact`,
});
const STATUS = { missing: 404, unauthorized: 401, forbidden: 403, broken: 500 };
const CORS = { 'access-control-allow-origin': '*' };
const EXPOSE = { 'access-control-expose-headers': 'ETag, Content-Range, Accept-Ranges' };
// What the CDN serves under each path: [file, sends CORS headers].
const CDN = { '/needle2.cact': ['archive', true], '/no-cors/needle2.cact': ['archive', false], '/wrong.cact': ['wrong', true] };

function preflight(res) {
  res.writeHead(204, { ...CORS, 'access-control-allow-headers': '*', 'access-control-allow-methods': 'GET, HEAD' });
  res.end();
}

function listen(handler) {
  const server = createServer(handler);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Serves bytes as the CDN does: ETag and 304, Range and 206, Content-Length. */
function sendFile(req, res, bytes, etag, headers, hits) {
  if (req.headers['if-none-match'] === etag) { hits.notModified++; res.writeHead(304, { ...headers, etag }); return res.end(); }
  const common = { ...headers, etag, 'accept-ranges': 'bytes', 'content-type': 'application/octet-stream' };
  const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
  if (range) {
    const start = Number(range[1]);
    const end = Math.min(range[2] ? Number(range[2]) : bytes.length - 1, bytes.length - 1);
    if (start > end) { res.writeHead(416, { ...common, 'content-range': `bytes */${bytes.length}` }); return res.end(); }
    hits.range++;
    res.writeHead(206, { ...common, 'content-length': end - start + 1, 'content-range': `bytes ${start}-${end}/${bytes.length}` });
    return res.end(req.method === 'HEAD' ? undefined : bytes.subarray(start, end + 1));
  }
  hits.full++;
  res.writeHead(200, { ...common, 'content-length': bytes.length });
  if (req.method === 'HEAD') return res.end();
  for (let i = 0; i < bytes.length; i += 1 << 18) res.write(bytes.subarray(i, i + (1 << 18)));
  return res.end();
}

/**
 * Starts the hub and the CDN; archive and wrong are paths of .cact files.
 * Resolves with { url(route), hits, close() }: url(ROUTES.needle2) is the hub
 * address of the archive; hits counts redirects, full bodies, 304s, ranges.
 */
export async function startNeedle2Host({ archive, wrong }) {
  const files = { archive: readFileSync(archive), wrong: readFileSync(wrong) };
  const etags = { archive: `"needle2-${files.archive.length}"`, wrong: `"wrong-${files.wrong.length}"` };
  const hits = { redirect: 0, full: 0, notModified: 0, range: 0 };
  const cdn = await listen((req, res) => {
    if (req.method === 'OPTIONS') return preflight(res);
    const [name, cors] = CDN[new URL(req.url, 'http://x').pathname] ?? [];
    if (!name) { res.writeHead(404, CORS); return res.end('not found'); }
    return sendFile(req, res, files[name], etags[name], cors ? { ...CORS, ...EXPOSE } : {}, hits);
  });
  const cdnBase = `http://127.0.0.1:${cdn.address().port}`;
  const hub = await listen((req, res) => {
    if (req.method === 'OPTIONS') return preflight(res);
    const path = new URL(req.url, 'http://x').pathname;
    const route = Object.keys(ROUTES).find((k) => ROUTES[k] === path);
    if (STATUS[route]) { res.writeHead(STATUS[route], { ...CORS, 'content-type': 'text/plain' }); return res.end(`status ${STATUS[route]}`); }
    if (!route) { res.writeHead(404, CORS); return res.end('Entry not found'); }
    hits.redirect++;
    const target = route === 'wrong' ? '/wrong.cact' : route === 'noCors' ? '/no-cors/needle2.cact' : '/needle2.cact';
    res.writeHead(302, { ...CORS, location: `${cdnBase}${target}` });
    return res.end();
  });
  const hubBase = `http://127.0.0.1:${hub.address().port}`;
  return {
    url: (route) => `${hubBase}${route}`,
    hits,
    close() {
      for (const server of [hub, cdn]) { server.close(); server.closeAllConnections(); }
    },
  };
}
