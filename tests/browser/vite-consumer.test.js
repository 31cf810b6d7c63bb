// A web app that installs the packed needle-wasm tarball and is built by Vite
// with no configuration at all, then run in headless Chromium (playwright-core
// with the system /usr/bin/chromium; never downloads a browser). Proves that
// the bundler finds the worker (and bundles it with its imports), needle.wasm
// and the demo archive (imported from 'needle-wasm/demo') from
// `new URL('./x', import.meta.url)`, that an app loading its own archive gets
// no demo archive, and that the page really loads the model in a Web Worker
// and generates the same tokens as Node. The build output is served by a
// small node:http server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile, readdir } from 'node:fs/promises';
import { rmSync } from 'node:fs';
import { extname, join, normalize } from 'node:path';
import { chromium } from 'playwright-core';
import { build, createLogger, createServer as createDevServer } from 'vite';
import { pack, install } from '../fixtures/consumer/install.js';
import { loadModel } from '../../js/index.js';

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.cact': 'application/octet-stream' };
let packed;
let project;
let ownArchiveProject;
let browser;
let server;

/** Serves dir on 127.0.0.1 at a random port; resolves to the base URL. */
function serve(dir) {
  server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
    try {
      const body = await readFile(join(dir, path.endsWith('/') ? `${path}index.html` : path));
      res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'text/html', 'content-length': body.length });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}/`)));
}

before(async () => {
  packed = await pack();
  project = await install(packed, 'web-consumer', ['web/']);
  ownArchiveProject = await install(packed, 'web-own-archive', ['web-own/']);
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
});

after(async () => {
  await browser?.close();
  server?.close();
  if (packed) rmSync(packed.dir, { recursive: true, force: true });
});

/** Builds root with Vite's defaults; every warning is a failure (e.g. a Node
 *  built-in stubbed for the browser, or a worker it could not bundle). The assets emitted. */
async function viteBuild(root) {
  const warnings = [];
  const logger = createLogger('warn', { allowClearScreen: false });
  logger.warn = (message) => warnings.push(message);
  logger.warnOnce = (message) => warnings.push(message);
  await build({ root, configFile: false, logLevel: 'warn', customLogger: logger, build: { outDir: 'dist' } });
  assert.deepEqual(warnings, []);
  return readdir(join(root, 'dist/assets'));
}

test('an app that loads its own archive gets the engine and the worker, and no demo archive', { timeout: 90000 }, async () => {
  const assets = await viteBuild(ownArchiveProject);
  assert.equal(assets.filter((f) => f.endsWith('.wasm')).length, 6, `engine variants among ${assets}`);
  assert.equal(assets.filter((f) => /^worker-.*\.js$/.test(f)).length, 1, `no worker among ${assets}`);
  assert.deepEqual(assets.filter((f) => /\.(cact|json)$/.test(f)), [], 'the demo model must not be emitted');
});

test('Vite bundles the installed package unconfigured; the page generates in a Web Worker', { timeout: 90000 }, async () => {
  const assets = await viteBuild(project);
  // Every shipped engine variant (js/wasm.js picks one at run time).
  assert.equal(assets.filter((f) => f.endsWith('.wasm')).length, 6, `engine variants among ${assets}`);
  assert.ok(assets.some((f) => /^needle-nosimd-.+\.wasm$/.test(f)), `no nosimd variant among ${assets}`);
  assert.ok(assets.some((f) => /^needle-relaxed-.+\.wasm$/.test(f)), `no relaxed variant among ${assets}`);
  assert.ok(assets.some((f) => /^needle-threads-.+\.wasm$/.test(f)), `no threads variant among ${assets}`);
  assert.ok(assets.some((f) => /^needle3-(?!threads-).+\.wasm$/.test(f)), `no needle3 variant among ${assets}`);
  assert.ok(assets.some((f) => /^needle3-threads-.+\.wasm$/.test(f)), `no needle3-threads variant among ${assets}`);
  // The thread pool's worker is bundled too (it starts only in cross-origin-isolated pages).
  assert.equal(assets.filter((f) => /^thread-worker-.*\.js$/.test(f)).length, 1, `no thread worker among ${assets}`);
  assert.equal(assets.filter((f) => /^demo-.*\.cact$/.test(f)).length, 1, `no demo archive among ${assets}`);
  const workers = assets.filter((f) => /^worker-.*\.js$/.test(f));
  assert.equal(workers.length, 1, `expected one worker bundle among ${assets}`);
  // The worker is a bundle (its imports inlined), not a copy of js/worker.js.
  const workerCode = await readFile(join(project, 'dist/assets', workers[0]), 'utf8');
  assert.doesNotMatch(workerCode, /from\s*['"]\.\/(protocol|engine|model|load)\.js['"]/);

  const url = await serve(join(project, 'dist'));
  const page = await browser.newPage();
  const errors = [];
  const started = []; // the page frees its model (ending the worker) before we look
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('worker', (worker) => started.push(worker.url()));
  await page.goto(url);
  const result = await (await page.waitForFunction(() => window.result, null, { timeout: 60000 })).jsonValue();
  assert.equal(result.error, undefined, result.error);
  assert.deepEqual(errors, []);
  assert.equal(result.inWorker, true, 'loadModel in a page must return the worker proxy');
  assert.deepEqual(started, [`${url}assets/${workers[0]}`], 'the bundled worker must be the one worker started');
  const [loaded, total] = result.progress.at(-1);
  assert.equal(loaded, result.size);
  assert.equal(total, result.size);
  // The demo model is about 1 MB: a local server may deliver it in one read,
  // so only growth is checked here (tests/js/load.test.js streams in chunks).
  assert.ok(result.progress.every(([l], i, all) => i === 0 || l >= all[i - 1][0]), 'progress went backwards');

  // The page's text appears, and it is what Node computes from the same archive and seed.
  const model = await loadModel();
  try {
    const tokens = [];
    let text = '';
    for await (const piece of model.generate('turn on the lights', { maxTokens: 12, temperature: 1.5, seed: 3 })) {
      tokens.push(piece.token);
      text += piece.text;
    }
    assert.deepEqual(result.ids, model.tokenize('turn on the lights'));
    assert.deepEqual(result.tokens, tokens);
    assert.equal(result.text, text);
    assert.ok(text.trim().length > 0);
    assert.equal(await page.locator('#out').textContent(), text);
  } finally {
    model.free();
  }
});

test("Vite's dev server without configuration: the page fails saying what to add to vite.config.js", { timeout: 90000 }, async () => {
  const dev = await createDevServer({ root: project, configFile: false, logLevel: 'silent', server: { port: 0, host: '127.0.0.1' } });
  await dev.listen();
  try {
    const page = await browser.newPage();
    await page.goto(dev.resolvedUrls.local[0]);
    const result = await (await page.waitForFunction(() => window.result, null, { timeout: 60000 })).jsonValue();
    assert.equal(result.needleError, true, result.error);
    assert.match(result.error, /optimizeDeps: \{ exclude: \['needle-wasm'\] \} to vite\.config\.js/);
    await page.close();
  } finally {
    await dev.close();
  }
});
