// Drives the demo page's "Load Needle 3" button in headless Chromium
// (playwright-core, system /usr/bin/chromium) against the local stand-in for
// Hugging Face (tests/js/needle2-host.js), chosen by the page's ?needle3=URL
// override. The stand-in serves an archive of the released size and shape
// with random weights (tests/js/needle3-standin.js), so the pinned SHA-256
// refuses it, in plain words, keeping the demo model active; with
// ?needle3-size and ?needle3-sha256 it loads with progress, and reloaded with
// the stand-in stopped it loads again from Cache Storage. Screenshots go to
// build/screenshots/needle3-*.png. Needs dist/ (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../../web/serve.js';
import { startHubStandIn, ROUTES } from '../js/needle2-host.js';
import { writeNeedle3StandIn } from '../js/needle3-standin.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const shots = `${root}/build/screenshots`;
const standIn = writeNeedle3StandIn();
const DEMO_ACTIVE = /^Active model: the built-in demo model \(demo\.cact, \d+\.\d MB\)$/;
const NEEDLE3_ACTIVE = 'Active model: Needle 3 (35.3 MB)';
let server;
let url;
let browser;
let host;

before(async () => {
  mkdirSync(shots, { recursive: true });
  ({ server, url } = await startServer({ port: 0 }));
  host = await startHubStandIn({ archive: `${root}/dist/released-random.cact`, wrong: `${root}/dist/tiny.cact`, archive3: standIn.bytes });
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
  });
});

after(async () => { await browser?.close(); server?.close(); host?.close(); });

const shot = (page, name) => page.screenshot({ path: `${shots}/needle3-${name}.png`, fullPage: true });
const text = (page, id) => page.locator(`#${id}`).textContent();
const cachedUrls = (page) => page.evaluate(async () => (await (await caches.open('needle-archives')).keys()).map((r) => r.url));

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

/** Presses the Needle 3 button and waits for the load to end either way. */
async function pressNeedle3(page) {
  await page.click('#needle3');
  await page.waitForFunction(() => /^(Loaded|Could not load) Needle 3/.test(document.getElementById('load-status').textContent),
    null, { timeout: 120000 });
}

test('demo page: Load Needle 3 from the stand-in, refused by its digest, then loaded, then offline from Cache Storage', { timeout: 300000 }, async () => {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  const standInUrl = host.url(ROUTES.needle3);
  const pointed = `${url}?needle3=${encodeURIComponent(standInUrl)}`;

  // The pinned digest: the stand-in is refused, the demo model stays active, nothing is cached.
  await open(page, pointed);
  assert.equal(await page.locator('#needle3').textContent(), 'Load Needle 3 (35.3 MB from Hugging Face)');
  await pressNeedle3(page);
  assert.match(await text(page, 'load-status'), /^Could not load Needle 3\. Still using the built-in demo model/);
  assert.equal(await page.locator('#error .error-main').textContent(),
    'The file at this address is not the published Needle 3: its SHA-256 differs. Nothing was kept.');
  assert.match(await page.locator('#error .error-detail').textContent(), /is not Needle 3: its SHA-256 is [0-9a-f]{64}, .*\(code NOT_NEEDLE3\)$/);
  assert.match(await text(page, 'active-model'), DEMO_ACTIVE);
  assert.ok(!(await cachedUrls(page)).includes(standInUrl), 'the refused file was kept in Cache Storage');
  await shot(page, '1-digest');

  // Its own digest accepted: progress, then the page says Needle 3 is active.
  await open(page, `${pointed}&needle3-size=35335380&needle3-sha256=${standIn.sha256}`);
  await page.evaluate(() => { window.progressValues = []; });
  await pressNeedle3(page);
  assert.match(await text(page, 'load-status'), /^Loaded Needle 3: 35\.3 MB in \d+\.\d s\.$/);
  assert.equal(await text(page, 'active-model'), NEEDLE3_ACTIVE);
  assert.equal(await page.locator('#error').isHidden(), true);
  assert.equal(await page.locator('#run').isEnabled(), true);
  const progress = await page.evaluate(() => window.progressValues);
  assert.ok(progress.some(([value, max]) => max === 35335380 && value > 0 && value < max), 'no partial progress was shown');
  await shot(page, '2-loaded');

  // The stand-in stopped: a reload loads Needle 3 again, from Cache Storage.
  host.close();
  await page.reload();
  await page.waitForSelector('body[data-model="ready"], body[data-model="error"]', { timeout: 60000 });
  assert.match(await text(page, 'load-status'), /^Loaded Needle 3: 35\.3 MB in \d+\.\d s \(from the offline cache\)\.$/);
  assert.equal(await text(page, 'active-model'), NEEDLE3_ACTIVE);
  assert.deepEqual(await cachedUrls(page), [standInUrl]);
  await shot(page, '3-from-cache');
  assert.deepEqual(pageErrors, []);
  await context.close();
});
