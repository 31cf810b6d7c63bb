// Tests loading the real Needle 2 (js/needle2.js, js/released-model.js) and
// `needle-wasm fetch` (js/released-cache.js, js/cli.js) against a local
// stand-in for Hugging Face (needle2-host.js: a 302 from one origin to a CDN
// on another). The stand-in serves dist/released-random.cact: the released
// geometry and 405 tensors, but random weights and so another size and
// SHA-256 than the real archive. It is accepted with its own figures (the
// `expect` option, `--size` and `--sha256`) and rejected with the real ones,
// naming the first that differs. The limits of a download (size cap,
// timeouts, encoding, a kill) are tested in download-limits.test.js.
// Needs dist/ (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadNeedle2, NEEDLE2_URL, NEEDLE2_FIGURES, NeedleError, STATUS } from '../../js/index.js';
import { NEEDLE2 } from '../../js/needle2.js';
import { releaseError } from '../../js/released-model.js';
import { fetchRelease } from '../../js/released-cache.js';
import { startHubStandIn, ROUTES } from './needle2-host.js';
import { memoryCache } from './memory-cache.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const STANDIN = join(root, 'dist/released-random.cact');
const WRONG = join(root, 'dist/tiny.cact');
const STANDIN_SIZE = statSync(STANDIN).size;
const STANDIN_SHA256 = createHash('sha256').update(readFileSync(STANDIN)).digest('hex');
const OWN = { size: STANDIN_SIZE, sha256: STANDIN_SHA256 }; // the stand-in's own figures: the released ones but its bytes
const dir = mkdtempSync(join(tmpdir(), 'needle2-'));
let host;

before(async () => { host = await startHubStandIn({ archive: STANDIN, wrong: WRONG }); });
after(() => { host.close(); rmSync(dir, { recursive: true, force: true }); });

/** Runs the CLI; resolves with { code, stdout, stderr }. */
function cli(args, env = {}) {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(root, 'js/cli.js'), ...args], { env: { ...process.env, ...env }, maxBuffer: 1 << 24 },
      (error, stdout, stderr) => resolve({ code: error ? error.code : 0, stdout, stderr }));
  });
}

test('the constants name Hugging Face at the pinned revision and the released figures', () => {
  assert.equal(NEEDLE2_URL, 'https://huggingface.co/Cactus-Compute/needle2/resolve/32e9e3a93b205f786929697446ae669cf0a84579/needle2.cact');
  assert.equal(NEEDLE2_FIGURES.sha256, 'b43aabfcaf1a6db6acf488076eab71d823c08697c7af4521fc1d174b60ede5ba');
  assert.equal(NEEDLE2_FIGURES.tag, 0x05e12a83);
  assert.equal(NEEDLE2_FIGURES.size, 13737807);
  assert.equal(NEEDLE2_FIGURES.tensors, 405);
  assert.equal(NEEDLE2_FIGURES.geometry.layers, 27);
  assert.ok(Object.isFrozen(NEEDLE2_FIGURES) && Object.isFrozen(NEEDLE2_FIGURES.geometry));
});

test('the stand-in answers as Hugging Face does: a 302 to another origin, CORS, ETag, Range', async () => {
  const hop = await fetch(host.url(ROUTES.needle2), { redirect: 'manual' });
  assert.equal(hop.status, 302);
  const cdn = new URL(hop.headers.get('location'));
  assert.notEqual(cdn.origin, new URL(host.url(ROUTES.needle2)).origin);
  const full = await fetch(cdn, { method: 'HEAD' });
  assert.equal(full.headers.get('access-control-allow-origin'), '*');
  assert.equal(Number(full.headers.get('content-length')), STANDIN_SIZE);
  const etag = full.headers.get('etag');
  assert.ok(etag);
  const range = await fetch(cdn, { headers: { range: 'bytes=0-3' } });
  assert.equal(range.status, 206);
  assert.equal(range.headers.get('content-range'), `bytes 0-3/${STANDIN_SIZE}`);
  assert.equal((await range.arrayBuffer()).byteLength, 4);
  assert.equal((await fetch(cdn, { headers: { 'if-none-match': etag } })).status, 304);
  const bare = await fetch(host.url(ROUTES.noCors), { method: 'HEAD' });
  assert.equal(bare.status, 200);
  assert.equal(bare.headers.get('access-control-allow-origin'), null);
});

test('loadNeedle2 loads the stand-in with its own figures, with progress, then from the cache', async () => {
  const cache = memoryCache();
  const url = host.url(ROUTES.needle2);
  const events = [];
  const before = { ...host.hits };
  const model = await loadNeedle2({ url, expect: OWN, cache, threads: 1, onProgress: (p) => events.push(p) });
  assert.equal(model.source.size, STANDIN_SIZE);
  assert.equal(model.source.fromCache, false);
  assert.equal(model.inspect().tensors.length, 405);
  await model.free();
  assert.equal(events[0].total, STANDIN_SIZE);
  assert.ok(events.some((e) => e.loaded > 0 && e.loaded < STANDIN_SIZE), 'no partial progress');
  assert.equal(events.at(-1).loaded, STANDIN_SIZE);
  assert.equal(host.hits.redirect - before.redirect, 1);
  assert.equal(cache.entries.get(url).body.length, STANDIN_SIZE, 'cached under the hub address');
  assert.equal(host.requests.findLast((r) => r.path === ROUTES.needle2).acceptEncoding, 'identity');
  // Next visit: revalidated with the ETag (a 304 through the redirect), read from the cache.
  const again = await loadNeedle2({ url, expect: OWN, cache, threads: 1 });
  assert.equal(again.source.fromCache, true);
  await again.free();
  assert.equal(host.hits.notModified - before.notModified, 1);
  assert.equal(host.hits.full - before.full, 1);
  // Host unreachable: the cached copy still loads.
  const offline = 'http://127.0.0.1:1/Cactus-Compute/needle2/resolve/main/needle2.cact';
  cache.entries.set(offline, cache.entries.get(url));
  const cached = await loadNeedle2({ url: offline, expect: OWN, cache, threads: 1 });
  assert.equal(cached.source.fromCache, true);
  await cached.free();
});

test('with the real figures the stand-in is NOT_NEEDLE2, naming its size, and is dropped from the cache', async () => {
  const cache = memoryCache();
  const url = host.url(ROUTES.needle2);
  await assert.rejects(loadNeedle2({ url, cache, threads: 1 }), (e) => {
    assert.ok(e instanceof NeedleError);
    assert.equal(e.code, 'NOT_NEEDLE2');
    assert.deepEqual(e.mismatch, { what: 'size', actual: STANDIN_SIZE, expected: 13737807 });
    assert.equal(e.message, `${url} is not Needle 2: its size is 13,747,806 bytes, Needle 2's is 13,737,807 bytes`);
    return true;
  });
  assert.equal(cache.entries.has(url), false);
});

test('the SHA-256: the right one is accepted, a wrong one is NOT_NEEDLE2 and the copy is dropped, cached or not', async () => {
  const cache = memoryCache();
  const url = host.url(ROUTES.needle2);
  const wrongDigest = (e) => {
    assert.equal(e.code, 'NOT_NEEDLE2');
    assert.deepEqual(e.mismatch, { what: 'sha256', actual: STANDIN_SHA256, expected: NEEDLE2_FIGURES.sha256 });
    assert.equal(e.message, `${url} is not Needle 2: its SHA-256 is ${STANDIN_SHA256}, Needle 2's is ${NEEDLE2_FIGURES.sha256}`);
    return true;
  };
  await assert.rejects(loadNeedle2({ url, cache, threads: 1, expect: { size: STANDIN_SIZE } }), wrongDigest);
  assert.equal(cache.entries.has(url), false);
  // Accepted and cached with its own digest (in capitals too); then, expected
  // to be another file, the cached copy is refused and dropped.
  const model = await loadNeedle2({ url, cache, threads: 1, expect: { ...OWN, sha256: STANDIN_SHA256.toUpperCase() } });
  await model.free();
  assert.ok(cache.entries.has(url));
  const other = '0'.repeat(64);
  await assert.rejects(loadNeedle2({ url, cache, threads: 1, expect: { size: STANDIN_SIZE, sha256: other } }),
    (e) => e.code === 'NOT_NEEDLE2' && e.mismatch.what === 'sha256' && e.mismatch.expected === other);
  assert.equal(cache.entries.has(url), false, 'a cached copy with another digest was kept');
  // sha256: null checks the shape only; a malformed digest is refused.
  const shaped = await loadNeedle2({ url, cache: false, threads: 1, expect: { size: STANDIN_SIZE, sha256: null } });
  await shaped.free();
  await assert.rejects(loadNeedle2({ url, cache: false, expect: { sha256: 'abc' } }),
    (e) => e.code === STATUS.ARGUMENT && /expect\.sha256 must be 64 hex digits or null/.test(e.message));
});

test('a wrong archive names its first mismatch', async () => {
  const size = statSync(WRONG).size;
  await assert.rejects(loadNeedle2({ url: host.url(ROUTES.wrong), cache: false, threads: 1 }),
    (e) => e.code === 'NOT_NEEDLE2' && e.mismatch.what === 'size' && e.mismatch.actual === size);
  await assert.rejects(loadNeedle2({ url: host.url(ROUTES.wrong), cache: false, threads: 1, expect: { size } }),
    (e) => e.code === 'NOT_NEEDLE2' && e.mismatch.what === 'sha256');
  let tensors;
  await assert.rejects(loadNeedle2({ url: host.url(ROUTES.wrong), cache: false, threads: 1, expect: { size, sha256: null } }), (e) => {
    tensors = e.mismatch.actual;
    return e.code === 'NOT_NEEDLE2' && e.mismatch.what === 'tensor count' && /its tensor count is \d+, Needle 2's is 405$/.test(e.message);
  });
  await assert.rejects(loadNeedle2({ url: WRONG, threads: 1, expect: { size, sha256: null, tensors, geometry: { hidden: 4096 } } }),
    (e) => e.code === 'NOT_NEEDLE2' && e.mismatch.what === 'hidden');
});

test('HTTP errors, an unreachable host and a misspelt option are said plainly', async () => {
  const load = (route) => loadNeedle2({ url: host.url(route), cache: false, threads: 1 });
  await assert.rejects(load(ROUTES.missing), (e) => e.code === 'HTTP' && e.status === 404 && /HTTP 404\): the file was moved or renamed/.test(e.message)
    && e.cause?.code === 'HTTP');
  await assert.rejects(load(ROUTES.unauthorized), (e) => e.code === 'HTTP' && e.status === 401 && /gated or private/.test(e.message));
  await assert.rejects(load(ROUTES.forbidden), (e) => e.code === 'HTTP' && e.status === 403 && /refused to send Needle 2 \(HTTP 403\)/.test(e.message));
  await assert.rejects(load(ROUTES.broken), (e) => e.code === 'HTTP' && e.status === 500 && /try again later/.test(e.message));
  await assert.rejects(loadNeedle2({ url: 'http://127.0.0.1:1/needle2.cact', cache: false }),
    (e) => e.code === 'NETWORK' && /^Needle 2 could not be downloaded from 127\.0\.0\.1:1: .*Check the connection$/.test(e.message));
  await assert.rejects(loadNeedle2({ urll: 'x' }), (e) => e.code === STATUS.ARGUMENT && /did you mean url\?/.test(e.message));
});

test('a failed fetch is OFFLINE when offline, CORS when cross-origin in a browser, else NETWORK', () => {
  const failed = new NeedleError('cannot fetch: Failed to fetch', 'NETWORK');
  const needle2Error = (error, url, where) => releaseError(NEEDLE2, error, url, where);
  const offline = needle2Error(failed, NEEDLE2_URL, { online: false, origin: 'http://localhost:8080' });
  assert.equal(offline.code, 'OFFLINE');
  assert.match(offline.message, /offline and Needle 2 is not cached yet: connect once/);
  assert.equal(offline.cause, failed);
  const cors = needle2Error(failed, NEEDLE2_URL, { online: true, origin: 'http://localhost:8080' });
  assert.equal(cors.code, 'CORS');
  assert.match(cors.message, /blocked the download of Needle 2 from huggingface\.co: .*\(CORS\)/);
  assert.equal(needle2Error(failed, 'http://localhost:8080/needle2.cact', { online: true, origin: 'http://localhost:8080' }).code, 'NETWORK');
  assert.equal(needle2Error(failed, NEEDLE2_URL, {}).code, 'NETWORK');
  const other = new NeedleError('bad', STATUS.FORMAT);
  assert.equal(needle2Error(other, NEEDLE2_URL, {}), other);
});

test('fetchRelease downloads with progress into the cache directory and keeps only a verified file', async () => {
  const into = join(dir, 'api');
  const events = [];
  const first = await fetchRelease('needle2', { url: host.url(ROUTES.needle2), dir: into, expect: OWN, onProgress: (p) => events.push(p) });
  assert.deepEqual(first, { path: join(into, 'needle2.cact'), downloaded: true });
  assert.equal(statSync(first.path).size, STANDIN_SIZE);
  assert.ok(events.length > 1 && events.at(-1).loaded === STANDIN_SIZE && events[0].total === STANDIN_SIZE);
  const hits = host.hits.full;
  assert.equal(host.requests.findLast((r) => r.path === ROUTES.needle2).acceptEncoding, 'identity');
  assert.deepEqual(await fetchRelease('needle2', { url: host.url(ROUTES.needle2), dir: into, expect: OWN }), { path: first.path, downloaded: false });
  assert.equal(host.hits.full, hits, 'a verified copy was downloaded again');
  const rejected = join(dir, 'rejected');
  await assert.rejects(fetchRelease('needle2', { url: host.url(ROUTES.needle2), dir: rejected }),
    (e) => e.code === 'NOT_NEEDLE2' && e.message.startsWith(`${host.url(ROUTES.needle2)} is not Needle 2: its size is 13,747,806 bytes`));
  await assert.rejects(fetchRelease('needle2', { url: host.url(ROUTES.needle2), dir: rejected, expect: { size: STANDIN_SIZE } }),
    (e) => e.code === 'NOT_NEEDLE2' && e.mismatch.what === 'sha256' && e.mismatch.actual === STANDIN_SHA256);
  assert.deepEqual(readdirSync(rejected), [], 'a rejected download was left behind');
  await assert.rejects(fetchRelease('needle2', { url: host.url(ROUTES.forbidden), dir: rejected }), (e) => e.code === 'HTTP' && e.status === 403);
  // A copy already there with another digest is not kept: it is downloaded again.
  await assert.rejects(fetchRelease('needle2', { url: host.url(ROUTES.missing), dir: into, expect: { ...OWN, sha256: '0'.repeat(64) } }),
    (e) => e.code === 'HTTP' && e.status === 404);
});

test('needle-wasm fetch, then inspect and complete needle2 from the cache with the host stopped', { timeout: 240000 }, async () => {
  const own = await startHubStandIn({ archive: STANDIN, wrong: WRONG });
  const cacheDir = join(dir, 'cli');
  const url = own.url(ROUTES.needle2);
  const wrong = await cli(['fetch', 'needle2', '--url', url, '--cache-dir', cacheDir]);
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /is not Needle 2: its size is 13,747,806 bytes, Needle 2's is 13,737,807 bytes/);
  assert.equal(existsSync(join(cacheDir, 'needle2.cact')), false);
  const missing = await cli(['fetch', '--url', own.url(ROUTES.missing), '--cache-dir', cacheDir]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^needle-wasm: Needle 2 is not at .* \(HTTP 404\)/);
  const digest = await cli(['fetch', 'needle2', '--url', url, '--cache-dir', cacheDir, '--size', String(STANDIN_SIZE)]);
  assert.equal(digest.code, 1);
  assert.match(digest.stderr, /is not Needle 2: its SHA-256 is [0-9a-f]{64}, Needle 2's is b43aabfc/);
  const own2 = ['--size', String(STANDIN_SIZE), '--sha256', STANDIN_SHA256];
  const fetched = await cli(['fetch', 'needle2', '--url', url, '--cache-dir', cacheDir, ...own2]);
  assert.equal(fetched.code, 0, fetched.stderr);
  assert.equal(fetched.stdout, `${join(cacheDir, 'needle2.cact')}\n`);
  assert.match(fetched.stderr, /needle2 downloaded and verified \(SHA-256 and shape\)/);
  own.close();

  // Offline now: every FILE command takes the name, from --cache-dir or NEEDLE_WASM_CACHE.
  const inspected = await cli(['inspect', 'needle2', '--cache-dir', cacheDir]);
  assert.equal(inspected.code, 0, inspected.stderr);
  assert.match(inspected.stdout.trim().split('\n').at(-1), /^405 tensors, /);
  const viaEnv = await cli(['inspect', 'needle2', '--json'], { NEEDLE_WASM_CACHE: cacheDir });
  assert.equal(JSON.parse(viaEnv.stdout).geometry.layers, 27);
  const again = await cli(['fetch', '--cache-dir', cacheDir, ...own2]);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stderr, /already downloaded/);
  const turn = await cli(['complete', 'needle2', '--query', 'set a timer for 10 minutes', '--max-tokens', '8'], { NEEDLE_WASM_CACHE: cacheDir });
  assert.equal(turn.code, 0, turn.stderr);
  assert.ok(['call', 'respond'].includes(JSON.parse(turn.stdout).type));
  const absent = await cli(['inspect', 'needle2'], { NEEDLE_WASM_CACHE: join(dir, 'empty'), XDG_CACHE_HOME: join(dir, 'empty') });
  assert.equal(absent.code, 1);
  assert.match(absent.stderr, /needle2 is not downloaded yet .*run `needle-wasm fetch needle2` first/);
  const usage = await cli(['fetch', 'needle4']);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /fetch knows two models, needle2 and needle3/);
  const badDigest = await cli(['fetch', '--sha256', 'b43a']);
  assert.equal(badDigest.code, 2);
  assert.match(badDigest.stderr, /--sha256 must be 64 hex digits/);
});

test('the cache directory defaults to XDG_CACHE_HOME, then ~/.cache; NEEDLE_WASM_CACHE overrides', async () => {
  const { cacheDir } = await import('../../js/released-cache.js');
  assert.equal(cacheDir(undefined, { XDG_CACHE_HOME: '/x' }), '/x/needle-wasm');
  assert.equal(cacheDir(undefined, { XDG_CACHE_HOME: '/x', NEEDLE_WASM_CACHE: '/n' }), '/n');
  assert.equal(cacheDir('/d', { NEEDLE_WASM_CACHE: '/n' }), '/d');
  assert.match(cacheDir(undefined, {}), /\/\.cache\/needle-wasm$/);
});
