// Tests js/load.js through loadModel: every source type streams the same
// archive into wasm memory, progress is reported, the header is checked in
// the first kilobytes, and HTTP errors, truncation, non-archives, aborts and
// unsupported sources fail with their documented codes. The Cache Storage
// path (revalidation with ETag, offline fallback) runs with an in-memory
// Cache. Needs dist/needle.wasm (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadModel, NeedleError, STATUS } from '../../js/index.js';
import { writeRandomArchive } from '../../js/cact-writer.js';
import { memoryCache } from './memory-cache.js';

const dir = mkdtempSync(join(tmpdir(), 'needle-load-'));
const path = join(dir, 'tiny.cact');
let bytes;
let server;
let base;
let expectedIds;
const hits = { full: 0, notModified: 0 };
const PROMPT = 'turn on the lights';

function serve(req, res) {
  const etag = '"tiny-1"';
  if (req.url === '/tiny.cact') {
    if (req.headers['if-none-match'] === etag) { hits.notModified++; res.writeHead(304, { etag }); return res.end(); }
    hits.full++;
    res.writeHead(200, { 'content-length': bytes.length, etag, 'content-type': 'application/octet-stream' });
    // Several writes so the client sees several chunks.
    for (let i = 0; i < bytes.length; i += 65536) res.write(bytes.subarray(i, i + 65536));
    return res.end();
  }
  if (req.url === '/truncated.cact') {
    res.writeHead(200, { 'content-length': bytes.length });
    res.write(bytes.subarray(0, 100000));
    return setTimeout(() => res.destroy(), 20);
  }
  if (req.url === '/unknown-length.cact') {
    res.writeHead(200, { 'transfer-encoding': 'chunked' });
    return res.end(bytes);
  }
  res.writeHead(404);
  res.end('missing');
}

before(async () => {
  await writeRandomArchive(path, { tiny: true });
  bytes = readFileSync(path);
  server = createServer(serve);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}`;
  const reference = await loadModel(path);
  expectedIds = reference.tokenize(PROMPT);
  reference.free();
});

after(() => { server.close(); rmSync(dir, { recursive: true, force: true }); });

/** A stream of the archive in small chunks (no length known up front). */
function chunkedStream(data, size = 7000) {
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= data.length) return controller.close();
      controller.enqueue(data.slice(offset, offset + size));
      offset += size;
    },
  });
}

async function assertLoads(source, options = {}) {
  const events = [];
  const model = await loadModel(source, { ...options, onProgress: (p) => events.push(p) });
  try {
    assert.equal(model.source.size, bytes.length);
    assert.deepEqual(model.tokenize(PROMPT), expectedIds);
    assert.ok(events.length >= 1, 'no progress reported');
    for (let i = 1; i < events.length; i++) assert.ok(events[i].loaded > events[i - 1].loaded);
    assert.equal(events.at(-1).loaded, bytes.length);
    assert.equal(events.at(-1).checked, true);
    return { model, events };
  } finally {
    model.free();
  }
}

test('a file path, a file: URL and every byte container load the same archive', async () => {
  await assertLoads(path);
  await assertLoads(pathToFileURL(path));
  await assertLoads(new Uint8Array(bytes));
  await assertLoads(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
  const padded = new Uint8Array(bytes.length + 10);
  padded.set(bytes, 5);
  await assertLoads(new DataView(padded.buffer, 5, bytes.length));
});

test('Blob, File, Response and ReadableStream sources stream in', async () => {
  await assertLoads(new Blob([bytes]));
  await assertLoads(new File([bytes], 'tiny.cact'));
  await assertLoads(new Response(bytes, { headers: { 'content-length': String(bytes.length) } }));
  await assertLoads(new Response(chunkedStream(bytes))); // no length: grows geometrically
  const { events } = await assertLoads(chunkedStream(bytes));
  assert.ok(events.length > 10, 'expected one progress event per chunk');
  assert.equal(events[0].total, undefined);
  await assertLoads(chunkedStream(bytes), { total: bytes.length });
});

test('URL strings, URL objects and Requests are fetched and stream with progress', async () => {
  const { events } = await assertLoads(`${base}/tiny.cact`);
  assert.equal(events[0].total, bytes.length);
  assert.ok(events.length > 1, 'expected several chunks');
  assert.ok(events.find((e) => e.checked).loaded < bytes.length, 'the header was not checked before the end');
  await assertLoads(new URL(`${base}/tiny.cact`));
  await assertLoads(new Request(`${base}/tiny.cact`));
  await assertLoads(`${base}/unknown-length.cact`);
});

test('HTTP errors, truncated bodies and missing files have their codes', async () => {
  await assert.rejects(loadModel(`${base}/nope.cact`), (e) => e instanceof NeedleError && e.code === 'HTTP' && e.status === 404 && /404/.test(e.message));
  await assert.rejects(loadModel(`${base}/truncated.cact`), (e) => e.code === 'TRUNCATED' && /of \d+ bytes/.test(e.message));
  const short = new Response(bytes.subarray(0, 5000), { headers: { 'content-length': String(bytes.length) } });
  await assert.rejects(loadModel(short), (e) => e.code === 'TRUNCATED' && e.message.includes(`5000 of ${bytes.length}`));
  const long = new Response(bytes, { headers: { 'content-length': '1000' } });
  await assert.rejects(loadModel(long), (e) => e.code === 'LENGTH');
  await assert.rejects(loadModel(join(dir, 'absent.cact')), (e) => e.code === 'READ' && /no such file/.test(e.message));
  await assert.rejects(loadModel(42), (e) => e.code === 'SOURCE');
  await assert.rejects(loadModel('http://127.0.0.1:1/x.cact'), (e) => e.code === 'NETWORK');
});

test('a non-archive fails on its first chunk, before the stream ends', async () => {
  const junk = new Uint8Array(4096).fill(0x41);
  let pulls = 0;
  const endless = new ReadableStream({ pull(c) { pulls++; c.enqueue(junk.slice()); } });
  await assert.rejects(loadModel(endless), (e) => e instanceof NeedleError && e.code === STATUS.FORMAT);
  assert.ok(pulls < 10, `read ${pulls} chunks before rejecting`);
  const corrupt = new Uint8Array(bytes);
  corrupt[0] ^= 0xff;
  await assert.rejects(loadModel(corrupt), (e) => e.code === STATUS.FORMAT && /tag/.test(e.message));
  await assert.rejects(loadModel(new Uint8Array(10)), (e) => e.code === STATUS.FORMAT);
});

test('an abort signal stops a stalled load with an AbortError', async () => {
  const controller = new AbortController();
  let sent = 0;
  const stalled = new ReadableStream({
    pull(c) {
      if (sent > 0) return new Promise(() => {}); // never delivers more
      sent++;
      c.enqueue(bytes.slice(0, 50000));
    },
  });
  const loading = loadModel(stalled, { signal: controller.signal, total: bytes.length });
  setTimeout(() => controller.abort(), 30);
  await assert.rejects(loading, (e) => e.name === 'AbortError' && e.code === STATUS.ABORTED);
  const already = AbortSignal.abort();
  await assert.rejects(loadModel(path, { signal: already }), (e) => e.name === 'AbortError');
});

test('a cached archive is revalidated with its ETag and used offline', async () => {
  const cache = memoryCache();
  const url = `${base}/tiny.cact`;
  const before = { ...hits };
  const first = await loadModel(url, { cache });
  assert.equal(first.source.fromCache, false);
  first.free();
  assert.equal(cache.entries.get(url).body.length, bytes.length);
  const second = await loadModel(url, { cache });
  assert.equal(second.source.fromCache, true);
  assert.deepEqual(second.tokenize(PROMPT), expectedIds);
  second.free();
  assert.equal(hits.full - before.full, 1);
  assert.equal(hits.notModified - before.notModified, 1);
  // Server gone: the cached copy still loads.
  const offlineUrl = 'http://127.0.0.1:1/tiny.cact';
  cache.entries.set(offlineUrl, cache.entries.get(url));
  const offline = await loadModel(offlineUrl, { cache });
  assert.equal(offline.source.fromCache, true);
  offline.free();
  // A failed load leaves nothing in the cache.
  await assert.rejects(loadModel(`${base}/truncated.cact`, { cache }), (e) => e.code === 'TRUNCATED');
  assert.equal(cache.entries.has(`${base}/truncated.cact`), false);
  // cache: false never touches it.
  const uncached = await loadModel(`${base}/tiny.cact`, { cache: false });
  assert.equal(uncached.source.fromCache, false);
  uncached.free();
});
