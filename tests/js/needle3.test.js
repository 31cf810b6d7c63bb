// Tests loading the real Needle 3 (js/needle3.js, js/released-model.js) and
// `needle-wasm fetch needle3` against the local stand-in for Hugging Face
// (needle2-host.js), which serves an archive of the released geometry and
// heads with random weights that is exactly the released file's 35,335,380
// bytes (needle3-standin.js): it passes every figure of NEEDLE3_FIGURES but
// the SHA-256, so it is accepted with its own digest (expect, --sha256) and
// refused with the pinned one. Needs dist/ (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadModel, loadNeedle3, verifyNeedle3, NEEDLE3_URL, NEEDLE3_FIGURES, NeedleError } from '../../js/index.js';
import { startHubStandIn, ROUTES } from './needle2-host.js';
import { writeNeedle3StandIn } from './needle3-standin.js';
import { memoryCache } from './memory-cache.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const NEEDLE2_STANDIN = join(root, 'dist/released-random.cact');
const standIn = writeNeedle3StandIn();
const OWN = { sha256: standIn.sha256 };
const dir = mkdtempSync(join(tmpdir(), 'needle3-'));
let host;

before(async () => {
  host = await startHubStandIn({ archive: NEEDLE2_STANDIN, wrong: join(root, 'dist/tiny.cact'), archive3: standIn.bytes });
});
after(() => { host.close(); rmSync(dir, { recursive: true, force: true }); });

function cli(args, env = {}) {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(root, 'js/cli.js'), ...args], { env: { ...process.env, ...env }, maxBuffer: 1 << 24 },
      (error, stdout, stderr) => resolve({ code: error ? error.code : 0, stdout, stderr }));
  });
}

test('the constants name Hugging Face at the pinned revision and the released figures', () => {
  assert.equal(NEEDLE3_URL, 'https://huggingface.co/Cactus-Compute/needle3/resolve/b274efcb211a9eef48c9a88da4b43bd569696a39/needle3.cact');
  assert.equal(NEEDLE3_FIGURES.size, 35335380);
  assert.equal(NEEDLE3_FIGURES.sha256, 'c9d915eca282ed42d1a09b143b592adb4cc6744ffe2d294adf5cfc5548170c38');
  assert.equal(NEEDLE3_FIGURES.tag, 0x05e12a84);
  assert.equal(NEEDLE3_FIGURES.tensors, 581);
  assert.deepEqual(NEEDLE3_FIGURES.heads, ['confidence']);
  assert.equal(NEEDLE3_FIGURES.geometry.layers, 20);
  assert.ok(Object.isFrozen(NEEDLE3_FIGURES) && Object.isFrozen(NEEDLE3_FIGURES.geometry));
});

test('the stand-in is the released size and shape, with another digest', async () => {
  assert.equal(standIn.bytes.length, 35335380);
  assert.notEqual(standIn.sha256, NEEDLE3_FIGURES.sha256);
  const model = await loadModel(standIn.bytes, { threads: 1 });
  await verifyNeedle3(model); // resolves: every figure of its shape is the released one
  await model.free();
});

test('loadNeedle3 loads the stand-in with its own digest, with progress, then from the cache', { timeout: 120000 }, async () => {
  const cache = memoryCache();
  const url = host.url(ROUTES.needle3);
  const events = [];
  const model = await loadNeedle3({ url, expect: OWN, cache, threads: 1, onProgress: (p) => events.push(p) });
  assert.deepEqual(model.source, { size: 35335380, label: url, fromCache: false, cacheError: undefined });
  const { geometry, tensors } = model.inspect();
  assert.equal(geometry.generation, 3);
  assert.equal(tensors.length, 581);
  await model.free();
  assert.ok(events.some((e) => e.loaded > 0 && e.loaded < 35335380), 'no partial progress');
  assert.deepEqual(events.at(-1), { loaded: 35335380, total: 35335380 });
  assert.equal(cache.entries.get(url).body.length, 35335380);
  assert.equal(host.requests.findLast((r) => r.path === ROUTES.needle3).acceptEncoding, 'identity');
  const again = await loadNeedle3({ url, expect: OWN, cache, threads: 1 });
  assert.equal(again.source.fromCache, true);
  await again.free();
});

test('with the pinned digest the stand-in is NOT_NEEDLE3 (mismatch sha256) and is dropped from the cache', { timeout: 120000 }, async () => {
  const cache = memoryCache();
  const url = host.url(ROUTES.needle3);
  await assert.rejects(loadNeedle3({ url, cache, threads: 1 }), (e) => {
    assert.ok(e instanceof NeedleError);
    assert.equal(e.code, 'NOT_NEEDLE3');
    assert.deepEqual(e.mismatch, { what: 'sha256', actual: standIn.sha256, expected: NEEDLE3_FIGURES.sha256 });
    assert.equal(e.message, `${url} is not Needle 3: its SHA-256 is ${standIn.sha256}, Needle 3's is ${NEEDLE3_FIGURES.sha256}`);
    return true;
  });
  assert.equal(cache.entries.has(url), false);
});

test('Needle 2 is not Needle 3: refused by its announced size, by its tag, and by its shape', async () => {
  await assert.rejects(loadNeedle3({ url: host.url(ROUTES.needle2), cache: false }),
    (e) => e.code === 'NOT_NEEDLE3' && e.mismatch.what === 'size' && /its size is 13,747,806 bytes, Needle 3's is 35,335,380 bytes$/.test(e.message));
  await assert.rejects(loadNeedle3({ url: host.url(ROUTES.needle2), cache: false, expect: { size: 13747806 } }),
    (e) => e.code === 'NOT_NEEDLE3' && /its tag is 0x05E12A83, Needle 3's is 0x05E12A84$/.test(e.message));
  const needle2 = await loadModel(NEEDLE2_STANDIN, { threads: 1 });
  await assert.rejects(verifyNeedle3(needle2, { expect: { size: 13747806 } }),
    (e) => e.code === 'NOT_NEEDLE3' && /its tensor count is 405, Needle 3's is 581$/.test(e.message));
  await needle2.free();
});

test('needle-wasm fetch needle3, then inspect needle3 from the cache with the host stopped', { timeout: 240000 }, async () => {
  const own = await startHubStandIn({ archive: NEEDLE2_STANDIN, wrong: join(root, 'dist/tiny.cact'), archive3: standIn.bytes });
  const cacheDir = join(dir, 'cli');
  const url = own.url(ROUTES.needle3);
  const refused = await cli(['fetch', 'needle3', '--url', url, '--cache-dir', cacheDir]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /is not Needle 3: its SHA-256 is [0-9a-f]{64}, Needle 3's is c9d915ec/);
  assert.equal(existsSync(join(cacheDir, 'needle3.cact')), false);
  const fetched = await cli(['fetch', 'needle3', '--url', url, '--cache-dir', cacheDir, '--sha256', standIn.sha256]);
  assert.equal(fetched.code, 0, fetched.stderr);
  assert.equal(fetched.stdout, `${join(cacheDir, 'needle3.cact')}\n`);
  assert.match(fetched.stderr, /needle3 downloaded and verified \(SHA-256 and shape\)/);
  own.close();
  const inspected = await cli(['inspect', 'needle3', '--json'], { NEEDLE_WASM_CACHE: cacheDir });
  assert.equal(inspected.code, 0, inspected.stderr);
  const { geometry, tensors } = JSON.parse(inspected.stdout);
  assert.equal(geometry.generation, 3);
  assert.equal(tensors.length, 581);
  const absent = await cli(['inspect', 'needle3'], { NEEDLE_WASM_CACHE: join(dir, 'empty') });
  assert.equal(absent.code, 1);
  assert.match(absent.stderr, /needle3 is not downloaded yet .*run `needle-wasm fetch needle3` first/);
});
