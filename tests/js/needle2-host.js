// needle2-host.js: a local stand-in for Hugging Face serving Needle 2 and
// Needle 3, for tests (there is no internet here). Like the real host it is
// two origins: the hub (one port) answers
// /Cactus-Compute/needle2/resolve/main/needle2.cact (and needle3's) with a
// 302 to the CDN (another port), which serves the bytes with
// Access-Control-Allow-Origin: *, an ETag (If-None-Match: 304),
// Content-Length and Range requests (206). Both answer CORS preflights.
// Other hub routes (ROUTES): a 404, a 401 and a 403 (gated / private repos),
// a 500, the archive from a CDN that sends no CORS headers, another archive
// (a wrong file), and servers that misbehave, answered by the hub itself:
//   oversize  the archive, then zeros without end, no Content-Length
//   gzip      Content-Encoding: gzip over 64 MB of zeros (a 64 KB body)
//   stall     the archive's Content-Length, its first 256 KB, then nothing
//   trickle   the archive's Content-Length, then 1 KB every 10 ms
// Every request is recorded in `requests` ({ path, acceptEncoding }).
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const REPO = '/Cactus-Compute/needle2/resolve/main';
export const ROUTES = Object.freeze({
  needle2: `${REPO}/needle2.cact`,
  needle3: '/Cactus-Compute/needle3/resolve/main/needle3.cact',
  missing: `${REPO}/missing.cact`,
  unauthorized: '/Cactus-Compute/gated/resolve/main/needle2.cact',
  forbidden: '/Cactus-Compute/private/resolve/main/needle2.cact',
  broken: '/Cactus-Compute/broken/resolve/main/needle2.cact',
  noCors: `${REPO}/no-cors/needle2.cact`,
  wrong: `${REPO}/wrong.cact`,
  oversize: `${REPO}/oversize/needle2.cact`,
  gzip: `${REPO}/gzip/needle2.cact`,
  stall: `${REPO}/stall/needle2.cact`,
  trickle: `${REPO}/trickle/needle2.cact`,
});
const STATUS = { missing: 404, unauthorized: 401, forbidden: 403, broken: 500 };
const CORS = { 'access-control-allow-origin': '*' };
const EXPOSE = { 'access-control-expose-headers': 'ETag, Content-Range, Accept-Ranges' };
// What the CDN serves under each path: [file, sends CORS headers]; and where the hub sends each route.
const CDN = {
  '/needle2.cact': ['archive', true], '/no-cors/needle2.cact': ['archive', false], '/wrong.cact': ['wrong', true],
  '/needle3.cact': ['archive3', true],
};
const HOPS = { needle2: '/needle2.cact', noCors: '/no-cors/needle2.cact', wrong: '/wrong.cact', needle3: '/needle3.cact' };

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

/** Writes chunks from next() while the client reads, until it returns null or the client goes. */
function pump(res, next, delay = 0) {
  const step = () => {
    if (res.destroyed) return;
    const chunk = next();
    if (chunk === null) { res.end(); return; }
    const more = res.write(chunk);
    if (delay) setTimeout(step, delay);
    else if (more) setImmediate(step);
    else res.once('drain', step);
  };
  step();
}

let zipped; // the gzip body, made once: 64 MB of zeros packs into about 64 KB

/** The hub's misbehaving servers (see the header). */
function misbehave(route, res, archive) {
  const binary = { ...CORS, 'content-type': 'application/octet-stream' };
  if (route === 'gzip') {
    zipped ??= gzipSync(Buffer.alloc(64 << 20));
    res.writeHead(200, { ...binary, 'content-encoding': 'gzip', 'content-length': zipped.length });
    return res.end(zipped);
  }
  if (route === 'oversize') {
    res.writeHead(200, binary);
    let sent = 0;
    const zeros = Buffer.alloc(1 << 16);
    return pump(res, () => {
      if (sent >= 4 * archive.length) return null; // a test that reads on would end here
      const chunk = sent < archive.length ? archive.subarray(sent, sent + (1 << 16)) : zeros;
      sent += chunk.length;
      return chunk;
    });
  }
  res.writeHead(200, { ...binary, 'content-length': archive.length });
  if (route === 'stall') return res.write(archive.subarray(0, 1 << 18)); // and never ends
  let sent = 0;
  return pump(res, () => archive.subarray(sent, (sent += 1024)), 10);
}

/**
 * Starts the hub and the CDN; archive, wrong and archive3 (optional) are
 * .cact files: paths or bytes. Resolves with { url(route), hits, requests,
 * close() }: url(ROUTES.needle2) is the hub address of the archive; hits
 * counts redirects, full bodies, 304s, ranges.
 */
export async function startHubStandIn({ archive, wrong, archive3 }) {
  const read = (file) => (typeof file === 'string' ? readFileSync(file) : Buffer.from(file.buffer, file.byteOffset, file.byteLength));
  const files = { archive: read(archive), wrong: read(wrong), archive3: archive3 && read(archive3) };
  const etags = Object.fromEntries(Object.entries(files).map(([name, bytes]) => [name, `"${name}-${bytes?.length}"`]));
  const hits = { redirect: 0, full: 0, notModified: 0, range: 0 };
  const requests = [];
  const record = (req) => requests.push({ path: new URL(req.url, 'http://x').pathname, acceptEncoding: req.headers['accept-encoding'] });
  const cdn = await listen((req, res) => {
    if (req.method === 'OPTIONS') return preflight(res);
    record(req);
    const [name, cors] = CDN[new URL(req.url, 'http://x').pathname] ?? [];
    if (!name || !files[name]) { res.writeHead(404, CORS); return res.end('not found'); }
    return sendFile(req, res, files[name], etags[name], cors ? { ...CORS, ...EXPOSE } : {}, hits);
  });
  const cdnBase = `http://127.0.0.1:${cdn.address().port}`;
  const hub = await listen((req, res) => {
    if (req.method === 'OPTIONS') return preflight(res);
    record(req);
    const path = new URL(req.url, 'http://x').pathname;
    const route = Object.keys(ROUTES).find((k) => ROUTES[k] === path);
    if (STATUS[route]) { res.writeHead(STATUS[route], { ...CORS, 'content-type': 'text/plain' }); return res.end(`status ${STATUS[route]}`); }
    if (!route) { res.writeHead(404, CORS); return res.end('Entry not found'); }
    if (!HOPS[route]) return misbehave(route, res, files.archive);
    hits.redirect++;
    res.writeHead(302, { ...CORS, location: `${cdnBase}${HOPS[route]}` });
    return res.end();
  });
  const hubBase = `http://127.0.0.1:${hub.address().port}`;
  return {
    url: (route) => `${hubBase}${route}`,
    hits,
    requests,
    close() {
      for (const server of [hub, cdn]) { server.close(); server.closeAllConnections(); }
    },
  };
}
