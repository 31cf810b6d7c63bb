// The examples a reader copies: every ```js block of README.md and docs/*.md
// runs as an ES module in its own Node process, and every program of
// examples/ runs as its comment header says, each asserted to make the call
// it shows. A block that is not meant to run says so on the line just before
// its fence, `<!-- not run: why -->`; those are listed, and every other block
// must exit 0 within its timeout. The README's quick start must be
// examples/node/quick-start.mjs word for word. Blocks and examples import
// 'needle-wasm' as a user would: run from files inside this package (a
// block is written to a scratch folder under build/), they get the package
// itself by its "exports" (Node's self-reference), and the
// browser page gets it from an import map, served here under
// /node_modules/needle-wasm/ as `npm install` would place it. The browser
// example runs in Debian's Chromium through playwright-core (never a
// downloaded browser). Needs dist/ (bash build.sh) and node_modules.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);
const BLOCK_TIMEOUT = 60000;

/** The ```js blocks of a markdown text: { file, line (of the fence), code, skip (the reason, or null) }. */
function jsBlocks(text, file) {
  const lines = text.split('\n');
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(\s*)```\s*([\w-]*)/.exec(lines[i]);
    if (!fence) {
      if (/^\s*<!--\s*not run/i.test(lines[i])) {
        assert.match(lines[i + 1] ?? '', /^\s*```/, `${file}:${i + 1}: a "not run" note must be the line just before a fence`);
      }
      continue;
    }
    let end = i + 1;
    while (end < lines.length && !new RegExp(`^${fence[1]}\`\`\`\\s*$`).test(lines[end])) end++;
    assert.ok(end < lines.length, `${file}:${i + 1}: the code block is never closed`);
    const note = /^<!--\s*not run:\s*(.+?)\s*-->\s*$/.exec(lines[i - 1] ?? '');
    if (['js', 'javascript', 'mjs'].includes(fence[2])) {
      blocks.push({ file, line: i + 1, code: lines.slice(i + 1, end).join('\n'), skip: note ? note[1] : null });
    } else {
      assert.equal(note, null, `${file}:${i}: a "not run" note before a ${fence[2] || 'plain'} block, which never runs`);
    }
    i = end;
  }
  return blocks;
}

const markdown = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const blocks = markdown.flatMap((file) => jsBlocks(readFileSync(join(root, file), 'utf8'), file));

/** Runs node with these arguments from the repository's root; rejects with its output unless it exits 0. */
async function node(args, { timeout = BLOCK_TIMEOUT } = {}) {
  try {
    const { stdout, stderr } = await run(process.execPath, args, { cwd: root, timeout, maxBuffer: 16 << 20 });
    return { stdout, stderr };
  } catch (error) {
    const why = error.killed ? `killed after ${timeout} ms` : `exit code ${error.code}`;
    throw new Error(`${why}\n--- stdout\n${error.stdout}\n--- stderr\n${error.stderr}`);
  }
}

// Blocks run from files under build/ (ignored by git), inside this package, so that 'needle-wasm'
// resolves to it; a file, not --eval, since a worker_threads worker inherits the process's flags.
let scratch;
async function runBlock(block) {
  const file = join(scratch, `${block.file.replace(/\W+/g, '-')}-${block.line}.mjs`);
  writeFileSync(file, `${block.code}\n`);
  return node([file]);
}

before(() => {
  assert.ok(existsSync(join(root, 'dist/needle.wasm')) && existsSync(join(root, 'dist/demo.cact')), 'run bash build.sh first');
  mkdirSync(join(root, 'build'), { recursive: true });
  scratch = mkdtempSync(join(root, 'build', 'doc-blocks-'));
});
after(() => { if (scratch) rmSync(scratch, { recursive: true, force: true }); });

test('the markdown has code blocks to run, and few that are marked not to', () => {
  assert.ok(blocks.length >= 10, `${blocks.length} js blocks found`);
  const skipped = blocks.filter((b) => b.skip);
  console.log(`${blocks.length} js blocks, ${skipped.length} marked not run:\n` +
    skipped.map((b) => `  ${b.file}:${b.line}: ${b.skip}`).join('\n'));
  assert.ok(skipped.length <= 5, `${skipped.length} blocks are marked not run: keep that list short`);
});

test('the README quick start is examples/node/quick-start.mjs, word for word', () => {
  const readme = blocks.filter((b) => b.file === 'README.md' && !b.skip);
  assert.ok(readme.length >= 1, 'README.md has no js block that runs');
  const example = readFileSync(join(root, 'examples/node/quick-start.mjs'), 'utf8');
  assert.ok(example.includes(readme[0].code), 'the first js block of README.md differs from examples/node/quick-start.mjs');
});

// The blocks marked not run are listed by the test above, not registered as skipped tests.
describe('every js block of README.md and docs/ runs', { concurrency: 2 }, () => {
  for (const block of blocks.filter((b) => !b.skip)) {
    test(`${block.file}:${block.line}`, { timeout: BLOCK_TIMEOUT + 5000 }, async () => {
      try {
        await runBlock(block);
      } catch (error) {
        error.message = `the block at ${block.file}:${block.line} failed: ${error.message}`;
        throw error;
      }
    });
  }
});

describe('examples/', { concurrency: 2 }, () => {
  test('node/quick-start.mjs prints the weather call', { timeout: BLOCK_TIMEOUT }, async () => {
    const { stdout } = await node(['examples/node/quick-start.mjs']);
    assert.deepEqual(JSON.parse(stdout), [{ name: 'get_weather', arguments: { city: 'Paris', day: 'tomorrow' } }]);
  });

  test('node/tool-loop.mjs runs the tools the model calls and feeds their results back', { timeout: BLOCK_TIMEOUT }, async () => {
    const { stdout } = await node(['examples/node/tool-loop.mjs']);
    assert.match(stdout, /ran set_light\(\{"room":"kitchen","state":"off"\}\) -> \{"ok":true/);
    assert.match(stdout, /ran lock_door\(\{"door":"front","locked":true\}\)/);
    assert.match(stdout, /ran get_weather\(\{"city":"Lisbon","day":"tomorrow"\}\) -> \{"city":"Lisbon"/);
    assert.equal(stdout.match(/then the model: respond/g)?.length, 3, stdout);
    assert.match(stdout, /home is now \{"lights":\{"kitchen":"off","hallway":"on"\},"doors":\{"front":true,"back":false\}\}/);
  });

  test('openai/client.mjs: the official openai client against the needle-wasm serve it starts', { timeout: BLOCK_TIMEOUT }, async () => {
    const { stdout } = await node(['examples/openai/client.mjs']);
    assert.match(stdout, /^finish_reason: tool_calls$/m);
    assert.match(stdout, /^set_light \{"room":"kitchen","state":"off"\}$/m);
  });
});

/** A static server as a user's project would be served after `npm install needle-wasm`:
 *  examples/browser/ at /, and this package at /node_modules/needle-wasm/ (js/, dist/). */
function serveBrowserExample() {
  const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.json': 'application/json',
    '.wasm': 'application/wasm', '.cact': 'application/octet-stream' };
  const mounts = [['/node_modules/needle-wasm/', root, ['js', 'dist']], ['/', join(root, 'examples/browser'), null]];
  const server = createServer((req, res) => {
    let path = decodeURIComponent(new URL(req.url, 'http://localhost').pathname);
    if (path.endsWith('/')) path += 'index.html';
    for (const [prefix, dir, allowed] of mounts) {
      if (!path.startsWith(prefix)) continue;
      const file = normalize(join(dir, path.slice(prefix.length)));
      const inside = file.startsWith(dir.endsWith(sep) ? dir : dir + sep)
        && (!allowed || allowed.some((folder) => file.startsWith(join(dir, folder) + sep)));
      if (inside && existsSync(file)) {
        res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
        return res.end(readFileSync(file));
      }
      break;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found\n');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

describe('examples/browser', () => {
  let server;
  let browser;
  before(async () => {
    server = await serveBrowserExample();
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium', headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
    });
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });

  test('index.html loads the demo model in a Web Worker with progress and shows the call', { timeout: 90000 }, async () => {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (error) => errors.push(error.message));
    const workers = [];
    page.on('worker', (worker) => workers.push(worker.url()));
    await page.goto(`http://127.0.0.1:${server.address().port}/`);
    await page.waitForFunction(() => document.getElementById('call').textContent !== ''
      || document.getElementById('status').textContent.startsWith('failed'), null, { timeout: 80000 });
    assert.deepEqual(errors, []);
    assert.match(await page.textContent('#status'), /^ready \(/);
    assert.equal(await page.textContent('#call'), 'get_weather({"city":"Paris","day":"tomorrow"})');
    assert.notEqual(await page.textContent('#reasoning'), '', 'the reasoning streamed into the page');
    const [value, max] = await page.evaluate(() => [document.getElementById('progress').value, document.getElementById('progress').max]);
    assert.ok(max > 1 && value === max, `the progress bar ended at ${value} of ${max}`);
    assert.ok(workers.some((url) => url.endsWith('/node_modules/needle-wasm/js/worker.js')), `workers: ${workers.join(' ')}`);
    await page.close();
  });
});
