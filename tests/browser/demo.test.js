// Drives the demo page in headless Chromium (playwright-core with the system
// /usr/bin/chromium; never downloads a browser): load the demo archive with
// progress; bad tools JSON and a schema error show a message and the page
// stays usable; an example runs in the worker, the reasoning streams, and the
// call shown parses and validates against the example's schema (ajv); a mock
// tool result goes back and a second envelope arrives; Stop mid-generation;
// Reset; a corrupt file is rejected; offline, a reload runs again from the
// service worker and archive caches. Screenshots of each state go to
// build/screenshots/. Needs dist/ (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cpus } from 'node:os';
import { chromium } from 'playwright-core';
import Ajv from 'ajv';
import { startServer } from '../../js/serve.js';
import { PRESETS } from '../../web/presets.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const shots = `${root}/build/screenshots`;
const ajv = new Ajv({ strict: false, allErrors: true });
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
const envelopes = (page) => page.evaluate(() => Number(document.body.dataset.envelopes || 0));

/** Clicks a button and waits for the turn it starts to produce its envelope. */
async function runTurn(page, button) {
  const before = await envelopes(page);
  await page.click(button);
  await page.waitForFunction((n) => Number(document.body.dataset.envelopes || 0) > n
    && document.body.dataset.agent === 'idle', before, { timeout: 30000 });
}

test('demo page: load, tools errors, run, tool result, stop, reset, corrupt file, offline', { timeout: 120000 }, async () => {
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
  assert.match(await text(page, 'weights-note'), /random weights[\s\S]*valid[\s\S]*needle2\.cact/);
  const progress = await page.evaluate(() => window.progressValues);
  assert.ok(progress.some(([value, max]) => value > 0 && value < max), 'no partial progress was shown');
  assert.equal(await page.locator('#preset option').count(), PRESETS.length);
  await shot(page, '1-loaded');
  // npm start serves COOP/COEP, so the engine (in the model worker) runs on
  // 2 threads: it starts a nested thread worker (js/thread-worker.js).
  assert.equal(await page.evaluate(() => crossOriginIsolated), true);
  if (cpus().length >= 2) {
    assert.ok(page.workers().some((w) => w.url().endsWith('/js/thread-worker.js')), 'no thread worker: the engine runs one thread');
  }

  // Bad tools: a JSON syntax error, then a schema the engine rejects; the page stays usable.
  await page.fill('#tools', '[{"name": }]');
  assert.match(await text(page, 'tools-status'), /not valid JSON/);
  assert.equal(await page.getAttribute('#tools', 'aria-invalid'), 'true');
  await page.click('#run');
  await page.waitForSelector('#agent-error:not([hidden])');
  assert.match(await text(page, 'agent-error'), /not valid JSON/);
  await page.fill('#tools', JSON.stringify([{ name: 'set_level', parameters: { type: 'object', properties: { level: { type: 'integer', foo: 1 } } } }]));
  await page.click('#run');
  await page.waitForFunction(() => /rejected/.test(document.getElementById('agent-error').textContent));
  assert.match(await text(page, 'agent-error'), /The tools were rejected: tool "set_level": \/properties\/level\/foo: unsupported keyword/);
  await shot(page, '2-tools-error');

  // An example: the reasoning streams, then a call that validates against its schema.
  const preset = PRESETS.find((p) => p.id === 'robot');
  await page.selectOption('#preset', preset.id);
  assert.equal(await page.inputValue('#query'), preset.query);
  assert.deepEqual(JSON.parse(await page.inputValue('#tools')), preset.tools);
  let calls = [];
  for (let seed = 1; seed <= 6 && !calls.length; seed++) {
    // Random weights may decline or run out of tokens; another seed then calls.
    await page.click('#ask-card summary');
    await page.fill('#seed', String(seed));
    await page.click('#ask-card summary');
    const before = await envelopes(page);
    await page.click('#run');
    if (seed === 1) {
      await page.waitForFunction(() => document.getElementById('reasoning').textContent.length > 8
        && document.body.dataset.agent === 'running');
      await shot(page, '3-reasoning');
    }
    await page.waitForFunction((n) => Number(document.body.dataset.envelopes || 0) > n && document.body.dataset.agent === 'idle', before, { timeout: 30000 });
    assert.equal(await page.locator('#agent-error').isHidden(), true);
    const shown = await text(page, 'call');
    if (shown.startsWith('[')) calls = JSON.parse(shown);
  }
  assert.ok(calls.length, 'no seed made a call');
  for (const call of calls) {
    const declared = preset.tools.find((t) => t.name === call.name);
    assert.ok(declared, `undeclared tool ${call.name}`);
    assert.ok(ajv.validate(declared.parameters, call.arguments), `${JSON.stringify(call)}: ${ajv.errorsText()}`);
  }
  assert.ok((await text(page, 'reasoning')).length > 0);
  assert.match(await text(page, 'stat-confidence'), /^(0|1)\.\d\d$/);
  assert.match(await text(page, 'stat-prefill'), /^\d+$/);
  assert.match(await text(page, 'stat-decode'), /^\d+\.\d$/);
  assert.match(await text(page, 'stat-memory'), /^\d+\.\d MB$/);
  assert.match(await text(page, 'stat-prefilled'), /^[1-9]\d*$/);
  assert.match(await text(page, 'verdict'), /calls?\. Send/);
  await shot(page, '4-call');

  // A mock tool result goes back; a second envelope arrives for it.
  assert.equal(await page.locator('#result-form').isVisible(), true);
  await page.click('#mock');
  JSON.parse(await page.inputValue('#tool-result'));
  const turnsBefore = await page.locator('#turns li:not(.note-turn)').count();
  await runTurn(page, '#send-result');
  assert.equal(await page.locator('#turns li:not(.note-turn)').count(), turnsBefore + 1);
  assert.match(await page.locator('#turns li:not(.note-turn)').last().locator('.who').textContent(), /Tool result/);
  assert.match(await text(page, 'stat-prefilled'), /^[1-9]\d*$/);
  await shot(page, '5-tool-result');

  // Stop mid-generation: the turn ends as stopped and no piece arrives after.
  await page.click('#ask-card summary');
  await page.fill('#max-tokens', '2000');
  await page.click('#ask-card summary');
  await page.fill('#query', 'Now spin around three times and then drive back to the dock slowly');
  await page.click('#run');
  await page.waitForFunction(() => Number(document.getElementById('stat-pieces').textContent) >= 5);
  await page.keyboard.press('Escape');
  await page.waitForFunction(() => document.getElementById('stat-state').textContent === 'stopped');
  const stoppedAt = Number(await text(page, 'stat-pieces'));
  assert.ok(stoppedAt >= 5 && stoppedAt < 2000, `stopped after ${stoppedAt} pieces`);
  await page.waitForTimeout(300);
  assert.equal(Number(await text(page, 'stat-pieces')), stoppedAt, 'pieces kept arriving after Stop');
  assert.match(await text(page, 'verdict'), /^Stopped/);
  assert.match(await page.locator('#turns li').last().textContent(), /stopped/);
  await shot(page, '6-stopped');

  // Reset: a new conversation with the same tools.
  await page.click('#reset');
  await page.waitForFunction(() => document.getElementById('stat-state').textContent === 'reset');
  assert.equal(await page.locator('#turns li').count(), 0);
  assert.equal(await page.locator('#result-form').isHidden(), true);
  await shot(page, '7-reset');

  // A corrupt file is rejected with the engine's message; the demo model stays.
  await page.setInputFiles('#file', { name: 'corrupt.cact', mimeType: 'application/octet-stream', buffer: Buffer.alloc(4096, 0x41) });
  await page.waitForSelector('#error:not([hidden])');
  assert.match(await text(page, 'error'), /code 1\)$/);
  assert.match(await text(page, 'load-status'), /Could not load corrupt\.cact/);
  assert.equal(await page.locator('#run').isEnabled(), true);
  await shot(page, '8-corrupt-file');

  // Offline: reload from the service worker and archive caches, and run again.
  await page.evaluate(() => navigator.serviceWorker.ready);
  await context.setOffline(true);
  await page.reload();
  await page.waitForSelector('body[data-model="ready"]', { timeout: 20000 });
  assert.match(await text(page, 'load-status'), /from the offline cache/);
  assert.equal(await text(page, 'network'), 'offline');
  await page.click('#ask-card summary');
  await page.fill('#max-tokens', '24');
  await runTurn(page, '#run');
  assert.ok(Number(await text(page, 'stat-pieces')) > 0);
  await shot(page, '9-offline');
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, '10-phone');
  assert.deepEqual(pageErrors, []);
  await context.close();
});
