// Drives the demo page in headless Chromium (playwright-core with the system
// /usr/bin/chromium; never downloads a browser): load the demo archive with
// progress, stream tokens, Stop mid-generation, reject a corrupt file, then
// go offline, reload and run again from the service worker and archive
// caches. Screenshots of each state go to build/screenshots/. Needs dist/
// (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../../js/serve.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const shots = `${root}/build/screenshots`;
let server;
let url;
let browser;

before(async () => {
  assert.ok(existsSync(`${root}/dist/needle.wasm`) && existsSync(`${root}/dist/demo.cact`), 'run ./build.sh first');
  mkdirSync(shots, { recursive: true });
  ({ server, url } = await startServer({ port: 0 }));
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
});

after(async () => { await browser?.close(); server?.close(); });

const shot = (page, name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
const text = (page, id) => page.locator(`#${id}`).textContent();

test('demo page: load, stream, stop, corrupt file, offline reload', { timeout: 60000 }, async () => {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  // Record every value the progress bar takes.
  await page.addInitScript(() => {
    window.progressValues = [];
    addEventListener('DOMContentLoaded', () => {
      const bar = document.getElementById('progress');
      new MutationObserver(() => window.progressValues.push([bar.value, bar.max]))
        .observe(bar, { attributes: true, attributeFilter: ['value', 'max'] });
    });
  });

  await page.goto(url);
  await page.waitForSelector('body[data-model="ready"]', { timeout: 20000 });
  assert.match(await text(page, 'load-status'), /Loaded the demo archive: 13\.\d MB/);
  assert.equal(await page.locator('#weights-note').isVisible(), true);
  const progress = await page.evaluate(() => window.progressValues);
  assert.ok(progress.some(([value, max]) => value > 0 && value < max), 'no partial progress was shown');
  await shot(page, '1-loaded');

  // Stream tokens, then stop mid-generation.
  await page.fill('#max-tokens', '400');
  await page.click('#generate');
  await page.waitForFunction(() => Number(document.getElementById('stat-tokens').textContent) >= 3);
  await shot(page, '2-generating');
  await page.click('#stop');
  await page.waitForFunction(() => document.getElementById('stat-state').textContent === 'stopped');
  const stoppedAt = Number(await text(page, 'stat-tokens'));
  assert.ok(stoppedAt >= 3 && stoppedAt < 400, `stopped after ${stoppedAt} tokens`);
  await page.waitForTimeout(300);
  assert.equal(Number(await text(page, 'stat-tokens')), stoppedAt, 'tokens kept arriving after Stop');
  assert.match(await text(page, 'stat-speed'), /^\d+(\.\d)?$/);
  assert.match(await text(page, 'stat-memory'), /MB$/);
  await shot(page, '3-stopped');

  // A corrupt file is rejected with the engine's message; the demo model stays.
  await page.setInputFiles('#file', { name: 'corrupt.cact', mimeType: 'application/octet-stream', buffer: Buffer.alloc(4096, 0x41) });
  await page.waitForSelector('#error:not([hidden])');
  assert.match(await text(page, 'error'), /code 1\)$/);
  assert.match(await text(page, 'load-status'), /Could not load corrupt\.cact/);
  await shot(page, '4-corrupt-file');

  // Offline: reload from the service worker and archive caches, and run again.
  await page.evaluate(() => navigator.serviceWorker.ready);
  await context.setOffline(true);
  await page.reload();
  await page.waitForSelector('body[data-model="ready"]', { timeout: 20000 });
  assert.match(await text(page, 'load-status'), /from the offline cache/);
  assert.equal(await text(page, 'network'), 'offline');
  await page.fill('#max-tokens', '6');
  await page.click('#generate');
  await page.waitForFunction(() => document.getElementById('stat-state').textContent === 'ready'
    && Number(document.getElementById('stat-tokens').textContent) > 0);
  await shot(page, '5-offline');
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, '6-phone');
  assert.deepEqual(pageErrors, []);
  await context.close();
});
