// Drives the demo page's "Load Needle 2" button in headless Chromium
// (playwright-core, system /usr/bin/chromium) against a local stand-in for
// Hugging Face (tests/js/needle2-host.js: a 302 to a CDN on another origin
// with CORS, ETag and Range), chosen by the page's ?needle2=URL override.
// The stand-in serves dist/released-random.cact (the released geometry,
// another size and digest), accepted with ?needle2-size and ?needle2-sha256.
// The page says in plain words
// what went wrong for a 404, a CDN without CORS headers and a wrong file,
// keeping the demo model active; then loads Needle 2 with progress and says
// so; keeps it active after a failed load; and, reloaded with the stand-in
// stopped, loads it again from Cache Storage. Screenshots go to
// build/screenshots/needle2-*.png. Needs dist/ (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../../web/serve.js';
import { startHubStandIn, ROUTES } from '../js/needle2-host.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const shots = `${root}/build/screenshots`;
const STANDIN = `${root}/dist/released-random.cact`;
const SIZE = statSync(STANDIN).size;
const SHA256 = createHash('sha256').update(readFileSync(STANDIN)).digest('hex');
const DEMO_ACTIVE = /^Active model: the built-in demo model \(demo\.cact, \d+\.\d MB\)$/;
const NEEDLE2_ACTIVE = 'Active model: Needle 2 (13.7 MB)';
let server;
let url;
let browser;
let host;

before(async () => {
  mkdirSync(shots, { recursive: true });
  ({ server, url } = await startServer({ port: 0 }));
  host = await startHubStandIn({ archive: STANDIN, wrong: `${root}/dist/tiny.cact` });
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
  });
});

after(async () => { await browser?.close(); server?.close(); host?.close(); });

const shot = (page, name) => page.screenshot({ path: `${shots}/needle2-${name}.png`, fullPage: true });
const text = (page, id) => page.locator(`#${id}`).textContent();

/** The page with Needle 2 pointed at a stand-in route (and, own: the stand-in's size and digest accepted). */
function address(route, { own = false } = {}) {
  return `${url}?needle2=${encodeURIComponent(host.url(route))}${own ? `&needle2-size=${SIZE}&needle2-sha256=${SHA256}` : ''}`;
}

/** Opens the page and waits for its first model; records every progress value. */
async function open(page, where) {
  await page.goto(where);
  await page.evaluate(() => {
    window.progressValues = [];
    const bar = document.getElementById('progress');
    new MutationObserver(() => window.progressValues.push([bar.value, bar.max]))
      .observe(bar, { attributes: true, attributeFilter: ['value', 'max'] });
  });
  await page.waitForSelector('body[data-model="ready"], body[data-model="error"]', { timeout: 60000 });
}

/** Presses the Needle 2 button and waits for the load to end either way. */
async function pressNeedle2(page) {
  await page.click('#needle2');
  await page.waitForFunction(() => /^(Loaded|Could not load) Needle 2/.test(document.getElementById('load-status').textContent),
    null, { timeout: 120000 });
}

/** Presses the button expecting a failure that leaves the demo model active. */
async function assertRefused(page, plain, code) {
  await pressNeedle2(page);
  assert.match(await text(page, 'load-status'), /^Could not load Needle 2\. Still using the built-in demo model/);
  assert.match(await page.locator('#error .error-main').textContent(), plain);
  assert.match(await page.locator('#error .error-detail').textContent(), new RegExp(`\\(code ${code}\\)$`));
  assert.match(await text(page, 'active-model'), DEMO_ACTIVE);
  assert.equal(await page.locator('#run').isEnabled(), true);
}

test('demo page: Load Needle 2 from the stand-in, its errors in plain words, then offline from Cache Storage', { timeout: 300000 }, async () => {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));

  // A 404: said plainly; the demo model stays active.
  await open(page, address(ROUTES.missing));
  assert.match(await text(page, 'active-model'), DEMO_ACTIVE);
  assert.equal(await page.locator('#needle2').textContent(), 'Load Needle 2 (13.7 MB from Hugging Face)');
  await assertRefused(page, /^Needle 2 is not at its address \(HTTP 404\): the file may have been moved/, 'HTTP');
  await shot(page, '1-404');

  // The CDN sends no CORS headers: the browser refuses it, the page says so.
  await open(page, address(ROUTES.noCors, { own: true }));
  await assertRefused(page, /^The browser blocked the download: .*\(CORS\)/, 'CORS');
  await shot(page, '2-cors');

  // Another archive: named by its first mismatch, its size.
  await open(page, address(ROUTES.wrong));
  const tiny = statSync(`${root}/dist/tiny.cact`).size.toLocaleString('en-US');
  await assertRefused(page, new RegExp(`^The file at this address is not Needle 2: its size is ${tiny} bytes, Needle 2's is 13,737,807 bytes`), 'NOT_NEEDLE2');
  const kept = await page.evaluate(async () => (await (await caches.open('needle-archives')).keys()).map((r) => r.url));
  assert.ok(!kept.includes(host.url(ROUTES.wrong)), 'the wrong file was kept in Cache Storage');

  // The stand-in's size but the pinned digest: refused, naming the digest.
  await open(page, `${url}?needle2=${encodeURIComponent(host.url(ROUTES.needle2))}&needle2-size=${SIZE}`);
  await assertRefused(page, /^The file at this address is not the published Needle 2: its SHA-256 differs\. Nothing was kept\.$/, 'NOT_NEEDLE2');

  // Needle 2 from the stand-in: progress, then the page says which model is active.
  await open(page, address(ROUTES.needle2, { own: true }));
  await page.evaluate(() => { window.progressValues = []; });
  const redirects = host.hits.redirect;
  await pressNeedle2(page);
  assert.match(await text(page, 'load-status'), /^Loaded Needle 2: 13\.7 MB in \d+\.\d s\.$/);
  assert.equal(await text(page, 'active-model'), NEEDLE2_ACTIVE);
  assert.equal(await page.locator('#error').isHidden(), true);
  assert.equal(await page.locator('#demo-note').isHidden(), true);
  assert.equal(await page.locator('#run').isEnabled(), true);
  assert.equal(host.hits.redirect - redirects, 1);
  const progress = await page.evaluate(() => window.progressValues);
  assert.ok(progress.some(([value, max]) => max === SIZE && value > 0 && value < max), 'no partial progress was shown');
  await shot(page, '3-loaded');

  // A failed load after it: Needle 2 stays active, and the page says so.
  await page.fill('#url', '/dist/missing.cact');
  await page.click('#url-form button[type="submit"]');
  await page.waitForFunction(() => /Could not load missing\.cact/.test(document.getElementById('load-status').textContent));
  assert.equal(await text(page, 'load-status'), 'Could not load missing.cact. Still using Needle 2 (13.7 MB).');
  assert.equal(await text(page, 'active-model'), NEEDLE2_ACTIVE);

  // The stand-in stopped: a reload loads Needle 2 again, from Cache Storage.
  host.close();
  await page.reload();
  await page.waitForSelector('body[data-model="ready"], body[data-model="error"]', { timeout: 60000 });
  assert.match(await text(page, 'load-status'), /^Loaded Needle 2: 13\.7 MB in \d+\.\d s \(from the offline cache\)\.$/);
  assert.equal(await text(page, 'active-model'), NEEDLE2_ACTIVE);
  const cached = await page.evaluate(async () => (await (await caches.open('needle-archives')).keys()).map((r) => r.url));
  assert.deepEqual(cached, [host.url(ROUTES.needle2)]);
  await shot(page, '4-from-cache');
  assert.deepEqual(pageErrors, []);
  await context.close();
});
