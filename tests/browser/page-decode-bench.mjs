#!/usr/bin/env node
// page-decode-bench.mjs: how fast a turn decodes in the demo page against
// the same turn in Node: what the page's per-token path (each piece posted
// from the worker and shown) costs next to the model.
//
//   node tests/browser/page-decode-bench.mjs [ROUNDS] [FILE]
//
// FILE (default dist/released-random.cact, the released geometry) is served
// beside the page and loaded by URL, as a user would. Both sides run the
// first preset's query and tools, greedy, on two threads (the page is
// cross-origin isolated, so the engine there runs the threaded build in its
// worker; Node loads the same build in this thread). Rounds alternate page and
// Node. Each turn gives two rates: the envelope's decode_tps (pieces over the
// time spent inside the engine's decode steps) and the pieces a user sees per
// second (pieces shown, first to last, over the wall time between them: the
// engine plus the per-token path). Prints JSON: every round, the medians and
// the page's over Node's. Needs dist/ (./build.sh) and /usr/bin/chromium.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../../web/serve.js';
import { PRESETS } from '../../web/presets.js';
import { loadModelInThread, Needle } from '../../js/index.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const rounds = Number(process.argv[2] ?? 5);
const file = process.argv[3] ?? `${root}/dist/released-random.cact`;
const servedAs = `/${relative(root, file)}`;
if (!servedAs.startsWith('/dist/')) throw new Error(`${file}: the page can load only files under dist/`);
const MAX_NEW_TOKENS = 256;
const preset = PRESETS[0];
const tools = JSON.parse(readFileSync(`${root}/web/tools.json`, 'utf8')); // Node declares what the page does: all 18
const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];

/** Pieces per second between the first pieces shown and the last, from
 *  [time in ms, pieces shown by then] marks. */
const rate = (marks) => {
  const [[t0, n0], [t1, n1]] = [marks[0], marks.at(-1)];
  return Math.round(((n1 - n0) / ((t1 - t0) / 1000)) * 10) / 10;
};

/** One turn of a new conversation (Reset first, as agent.reset() in Node). */
async function pageTurn(page) {
  if (await page.locator('#reset').isEnabled()) await page.click('#reset');
  const before = await page.evaluate(() => Number(document.body.dataset.turnsEnded || 0));
  await page.click('#run');
  await page.waitForFunction((n) => Number(document.body.dataset.turnsEnded || 0) > n
    && document.body.dataset.agent === 'idle', before, { timeout: 120000 });
  return {
    decode_tps: Number(await page.locator('#stat-decode').textContent()),
    seen_tps: rate(await page.evaluate(() => window.pieceTimes)),
  };
}

/** The page records each change of its piece count (#stat-pieces). */
function recordPieceTimes() {
  window.pieceTimes = [];
  addEventListener('DOMContentLoaded', () => {
    const count = document.getElementById('stat-pieces');
    new MutationObserver(() => {
      if (count.textContent === '0') window.pieceTimes = [];
      else window.pieceTimes.push([performance.now(), Number(count.textContent)]);
    }).observe(count, { childList: true, characterData: true, subtree: true });
  });
}

async function openPage(browser, url) {
  const page = await browser.newPage();
  await page.addInitScript(recordPieceTimes);
  await page.goto(url);
  await page.waitForSelector('body[data-model="ready"][data-presets="ready"]', { timeout: 60000 });
  await page.fill('#url', servedAs);
  await page.click('#url-form button[type="submit"]');
  await page.waitForFunction((name) => document.body.dataset.model === 'ready'
    && document.getElementById('active-model').textContent.includes(name), servedAs.split('/').pop(), { timeout: 120000 });
  await page.evaluate(() => { document.querySelector('#ask-card details').open = true; });
  await page.fill('#max-tokens', String(MAX_NEW_TOKENS));
  await page.fill('#temperature', '0');
  await page.fill('#query', preset.query);
  return page;
}

const { server, url } = await startServer({ port: 0 });
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
});
const model = await loadModelInThread(file, { threads: 2 });
try {
  const page = await openPage(browser, url);
  if (!await page.evaluate(() => crossOriginIsolated)) throw new Error('the page is not cross-origin isolated: it would run one thread');
  const agent = await Needle.create({ model, tools });
  const runs = { page: [], node: [] };
  for (let r = 0; r < rounds; r++) {
    runs.page.push(await pageTurn(page));
    agent.reset();
    const times = [];
    const envelope = await agent.complete(preset.query, { maxNewTokens: MAX_NEW_TOKENS, temperature: 0,
      onToken: () => times.push([performance.now(), times.length + 1]) });
    runs.node.push({ decode_tps: envelope.decode_tps, seen_tps: rate(times) });
  }
  agent.free();
  const medians = {};
  const ratio = {};
  for (const key of ['decode_tps', 'seen_tps']) {
    medians[key] = { page: median(runs.page.map((r) => r[key])), node: median(runs.node.map((r) => r[key])) };
    ratio[key] = Math.round((medians[key].page / medians[key].node) * 1000) / 1000;
  }
  console.log(JSON.stringify({ archive: servedAs, query: preset.query, threads: model.threads.count, rounds: runs,
    medians, page_over_node: ratio }, null, 1));
} finally {
  await model.free();
  await browser.close();
  server.close();
}
