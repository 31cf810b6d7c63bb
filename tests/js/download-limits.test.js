// The limits a download of a released model runs under (js/download-guard.js),
// in loadNeedle2 (js/released-model.js) and in `needle-wasm fetch`
// (js/released-cache.js, js/cli.js), each against a server of the local
// stand-in (needle2-host.js) that misbehaves: one that sends more than the
// archive without end, one that sends gzip, one that stalls, one that
// trickles, one that never answers; and a CLI download killed midway. The
// timeouts are set small here, so each case takes well under a second. A
// garbage collection forced midway checks that an abort still reaches Node's
// fetch (undici loses one held only through a collected Request).
// Needs dist/ (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { loadNeedle2, STATUS } from '../../js/index.js';
import { fetchRelease } from '../../js/released-cache.js';
import { startHubStandIn, ROUTES } from './needle2-host.js';
import { memoryCache } from './memory-cache.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const STANDIN = join(root, 'dist/released-random.cact');
const SIZE = statSync(STANDIN).size;
const OWN = { size: SIZE, sha256: createHash('sha256').update(readFileSync(STANDIN)).digest('hex') };
const dir = mkdtempSync(join(tmpdir(), 'limits-'));
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
let host;
let silent; // a TCP server that accepts and never answers
let silentUrl;

before(async () => {
  host = await startHubStandIn({ archive: STANDIN, wrong: join(root, 'dist/tiny.cact') });
  silent = createServer(() => {});
  await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
  silentUrl = `http://127.0.0.1:${silent.address().port}/needle2.cact`;
});
after(() => { host.close(); silent.close(); rmSync(dir, { recursive: true, force: true }); });

/** Resolves with [the error a promise rejects with, the seconds it took]. */
async function failure(promise) {
  const started = performance.now();
  const error = await promise.then(() => assert.fail('it did not fail'), (e) => e);
  return [error, (performance.now() - started) / 1000];
}

/** A fresh cache directory for fetchRelease, and a check that it holds nothing afterwards. */
function cacheDirectory(name) {
  const path = join(dir, name);
  return { path, assertEmpty: () => assert.deepEqual(readdirSync(path), [], `${name}: left behind`) };
}

test('more bytes than the expected size: reading stops there, NOT_NEEDLE2 names both sizes, nothing is kept', async () => {
  const url = host.url(ROUTES.oversize);
  const cache = memoryCache();
  const [loaded] = await failure(loadNeedle2({ url, cache, expect: OWN, threads: 1 }));
  assert.equal(loaded.code, 'NOT_NEEDLE2');
  assert.equal(loaded.mismatch.what, 'size');
  assert.equal(loaded.mismatch.stopped, true);
  assert.equal(loaded.mismatch.expected, SIZE);
  assert.ok(loaded.mismatch.actual > SIZE && loaded.mismatch.actual <= SIZE + (1 << 20), `stopped at ${loaded.mismatch.actual}`);
  assert.match(loaded.message, /^http:.* is not Needle 2: more than Needle 2's 13,747,806 bytes arrived, so the download was stopped \(at 13,[\d,]+\)$/);
  assert.equal(cache.entries.size, 0);

  const into = cacheDirectory('oversize');
  const [fetched] = await failure(fetchRelease('needle2', { url, dir: into.path, expect: OWN }));
  assert.equal(fetched.code, 'NOT_NEEDLE2');
  assert.ok(fetched.mismatch.stopped && fetched.mismatch.actual <= SIZE + (1 << 20));
  into.assertEmpty();
});

test('gzip: fetch refuses a Content-Encoding (it asked for identity); a load caps the unpacked bytes', async () => {
  const url = host.url(ROUTES.gzip);
  const into = cacheDirectory('gzip');
  const [fetched] = await failure(fetchRelease('needle2', { url, dir: into.path, expect: OWN }));
  assert.equal(fetched.code, 'ENCODING');
  assert.match(fetched.message, /came gzip-encoded, though the bytes as stored were asked for: refused/);
  assert.equal(host.requests.findLast((r) => r.path === ROUTES.gzip).acceptEncoding, 'identity');
  into.assertEmpty();
  // Node's fetch unpacks gzip as browsers do: the cap counts what arrives.
  const [loaded] = await failure(loadNeedle2({ url, cache: false, expect: OWN, threads: 1 }));
  assert.equal(loaded.code, 'NOT_NEEDLE2');
  assert.ok(loaded.mismatch.stopped && loaded.mismatch.actual <= SIZE + (1 << 20), `stopped at ${loaded.mismatch.actual}`);
});

test('idle timeout: a server that stalls, or never answers, ends in TIMEOUT after idleTimeoutMs', { timeout: 30000 }, async () => {
  const into = cacheDirectory('stall');
  const limits = { idleTimeoutMs: 300 };
  const cases = [
    failure(loadNeedle2({ url: host.url(ROUTES.stall), cache: memoryCache(), expect: OWN, ...limits })),
    failure(loadNeedle2({ url: silentUrl, cache: false, expect: OWN, ...limits })),
    failure(fetchRelease('needle2', { url: host.url(ROUTES.stall), dir: into.path, expect: OWN, ...limits })),
    failure(fetchRelease('needle2', { url: silentUrl, dir: into.path, expect: OWN, ...limits })),
  ];
  setTimeout(gc, 150);
  for (const [error, seconds] of await Promise.all(cases)) {
    assert.equal(error.code, 'TIMEOUT', error.message);
    assert.equal(error.message, 'the download of Needle 2 stalled: nothing arrived for 0.3 s (idleTimeoutMs)');
    assert.ok(seconds >= 0.3 && seconds < 3, `${seconds} s`);
  }
  into.assertEmpty();
});

test('overall timeout: a server that trickles (1 KB every 10 ms) ends in TIMEOUT after timeoutMs', { timeout: 30000 }, async () => {
  const into = cacheDirectory('trickle');
  const limits = { timeoutMs: 400, idleTimeoutMs: 5000 };
  const cases = [
    failure(loadNeedle2({ url: host.url(ROUTES.trickle), cache: false, expect: OWN, ...limits })),
    failure(fetchRelease('needle2', { url: host.url(ROUTES.trickle), dir: into.path, expect: OWN, ...limits })),
  ];
  for (const [error, seconds] of await Promise.all(cases)) {
    assert.equal(error.code, 'TIMEOUT', error.message);
    assert.equal(error.message, 'the download of Needle 2 took longer than 0.4 s (timeoutMs)');
    assert.ok(seconds >= 0.4 && seconds < 3, `${seconds} s`);
  }
  into.assertEmpty();
});

test('the caller\'s abort is an AbortError, not a timeout; bad limits are refused', async () => {
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 100);
  const [error] = await failure(loadNeedle2({ url: host.url(ROUTES.stall), cache: false, expect: OWN, signal: controller.signal }));
  assert.equal(error.name, 'AbortError');
  assert.equal(error.code, STATUS.ABORTED);
  for (const options of [{ timeoutMs: 0 }, { idleTimeoutMs: -1 }, { timeoutMs: '30' }, { idleTimeoutMs: 2 ** 31 }]) {
    const [bad] = await failure(loadNeedle2({ url: host.url(ROUTES.needle2), cache: false, ...options }));
    assert.equal(bad.code, STATUS.ARGUMENT, JSON.stringify(options));
    assert.match(bad.message, /^option (timeoutMs|idleTimeoutMs) is .*: must be a finite number in \(0, 2147483647\]$/);
  }
});

test('needle-wasm fetch killed midway (SIGTERM, SIGINT) removes its .part and exits 143 / 130', { timeout: 60000 }, async () => {
  for (const [signal, code] of [['SIGTERM', 143], ['SIGINT', 130]]) {
    const into = cacheDirectory(`kill-${signal}`);
    const part = join(into.path, 'needle2.cact.part');
    let child;
    const exited = new Promise((resolve) => {
      child = execFile(process.execPath, [join(root, 'js/cli.js'), 'fetch', '--url', host.url(ROUTES.stall),
        '--cache-dir', into.path, '--size', String(SIZE), '--sha256', OWN.sha256], (error, stdout, stderr) => resolve({ error, stderr }));
    });
    // The stalled server has sent 256 KB: wait until they are in the .part, then kill.
    const deadline = Date.now() + 20000;
    while (!(existsSync(part) && statSync(part).size >= 1 << 18)) {
      assert.ok(Date.now() < deadline, 'the download never started');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    child.kill(signal);
    const { error, stderr } = await exited;
    assert.equal(error?.code, code, stderr);
    assert.match(stderr, new RegExp(`needle2 download stopped by ${signal}; nothing was kept`));
    into.assertEmpty();
  }
});
