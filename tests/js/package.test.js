// The npm package as users get it: `npm pack`, the tarball's contents, then an
// install into a fresh project where a Node ESM script imports 'needle-wasm'
// (in-thread and in a worker_threads worker), the installed CLI inspects the
// package's demo archive, and a TypeScript consumer type-checks against the
// shipped index.d.ts. Needs dist/ (./build.sh; npm pack's prepack builds it).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pack, install, root, run } from '../fixtures/consumer/install.js';
import { loadModel } from '../../js/index.js';

let packed;
let project;

before(async () => {
  packed = await pack();
  project = await install(packed, 'node-consumer', ['node/', 'ts/']);
});

after(() => { if (packed) rmSync(packed.dir, { recursive: true, force: true }); });

test('the tarball holds the wasm, the demo model and its tools, the JS and the types, and nothing else', () => {
  const files = packed.pack.files.map((f) => f.path).sort();
  for (const need of ['dist/needle.wasm', 'dist/needle-nosimd.wasm', 'dist/needle-relaxed.wasm', 'dist/needle-threads.wasm', 'dist/needle3.wasm', 'dist/needle3-threads.wasm', 'dist/demo.cact', 'dist/demo-tools.json', 'js/index.js', 'js/index.d.ts', 'js/worker.js',
    'js/client.js', 'js/agent.js', 'js/cli.js', 'js/demo.js', 'js/demo.d.ts', 'package.json', 'README.md', 'LICENSE']) {
    assert.ok(files.includes(need), `${need} missing from the tarball`);
  }
  const stray = files.filter((f) => /^(tests|node_modules|build|src|web|\.ci)\//.test(f) || /^dist\/(tiny|released-random)\.cact$/.test(f));
  assert.deepEqual(stray, []);
  assert.ok(files.every((f) => /^(js\/[\w-]+\.(js|d\.ts)|dist\/(needle(-nosimd|-relaxed|-threads|3|3-threads)?\.wasm|demo\.cact|demo-tools\.json)|package\.json|README\.md|CHANGELOG\.md|LICENSE)$/.test(f)),
    `unexpected files: ${files.join(' ')}`);
  const size = (f) => packed.pack.files.find((x) => x.path === f).size;
  for (const f of ['dist/needle.wasm', 'dist/needle-nosimd.wasm', 'dist/needle-relaxed.wasm', 'dist/needle-threads.wasm', 'dist/needle3.wasm', 'dist/needle3-threads.wasm', 'dist/demo.cact']) {
    assert.equal(size(f), statSync(join(root, f)).size, f);
  }
  // No random weights ship: the trained demo model keeps the package small.
  assert.ok(packed.pack.size <= 5e6, `the tarball is ${packed.pack.size} bytes, over 5 MB`);
  console.log(`tarball ${(packed.pack.size / 1e6).toFixed(1)} MB, unpacked ${(packed.pack.unpackedSize / 1e6).toFixed(1)} MB, ` +
    `${files.length} files`);
});

test('a Node ESM consumer loads the package\'s demo archive, tokenizes and generates', { timeout: 60000 }, async () => {
  const { stdout } = await run(process.execPath, ['use.mjs'], { cwd: project, timeout: 60000 });
  const out = JSON.parse(stdout);
  const installed = pathToFileURL(join(project, 'node_modules/needle-wasm/dist/demo.cact')).href;
  assert.equal(out.demo, installed, 'DEMO_ARCHIVE_URL must point into the installed package');
  assert.equal(out.ok, 0);
  const demoSize = statSync(join(root, 'dist/demo.cact')).size;
  assert.deepEqual(out.last, { loaded: demoSize, total: demoSize, checked: true });
  assert.equal(out.local.size, demoSize);
  assert.equal(out.local.roundTrip, 'turn on the lights');
  // The installed package computes exactly what this source tree does.
  const model = await loadModel();
  try {
    assert.deepEqual(out.local.ids, model.tokenize('turn on the lights'));
    const tokens = [];
    for await (const piece of model.generate('turn on the lights', { maxTokens: 12, temperature: 1.5, seed: 3 })) tokens.push(piece.token);
    assert.ok(tokens.length > 0);
    assert.deepEqual(out.local.tokens, tokens);
    assert.ok(out.local.text.length > 0);
  } finally {
    model.free();
  }
  // ... and so does the same package in a worker_threads worker.
  assert.deepEqual(out.remote, { ids: out.local.ids, tokens: out.local.tokens, text: out.local.text });
});

test('the installed package says what it is: version, licence, where its code and issues live', async () => {
  const meta = JSON.parse(readFileSync(join(project, 'node_modules/needle-wasm/package.json'), 'utf8'));
  const { stdout } = await run('npx', ['--offline', '--no-install', 'needle-wasm', '--version'], { cwd: project, timeout: 60000 });
  assert.equal(stdout.trim(), meta.version);
  assert.equal(meta.license, 'MIT');
  assert.match(readFileSync(join(project, 'node_modules/needle-wasm/LICENSE'), 'utf8'), /^MIT License/);
  for (const field of ['repository', 'homepage', 'bugs']) assert.ok(meta[field], `package.json lacks ${field}`);
  assert.ok(meta.keywords.includes('webassembly') && meta.keywords.includes('tool-calling'));
});

test('the installed CLI inspects the demo model: 111 tensors, 6 layers', { timeout: 60000 }, async () => {
  const { stdout } = await run('npx', ['--offline', '--no-install', 'needle-wasm', 'inspect'], { cwd: project, timeout: 60000 });
  assert.match(stdout, /^111 tensors, \d+ bytes of tensor data$/m);
  assert.match(stdout, /^tensorCount: 111$/m);
  assert.match(stdout, /^layers: 6$/m);
});

// Both kinds of project, strict and with skipLibCheck false: a page's (lib dom) and a Node
// script's (lib es2022 and @types/node alone, which declare no Cache and no WebAssembly).
for (const [kind, config, extra] of [['dom', 'tsconfig.json', []],
  ['Node-only', 'tsconfig.node.json', ['--typeRoots', join(root, 'node_modules/@types')]]]) {
  test(`a TypeScript consumer (${kind}) type-checks against the shipped index.d.ts`, { timeout: 60000 }, async () => {
    const tsc = join(root, 'node_modules/typescript/bin/tsc');
    try {
      await run(process.execPath, [tsc, '-p', join(project, config), ...extra], { cwd: project, timeout: 60000 });
    } catch (error) {
      assert.fail(`tsc reported:\n${error.stdout}${error.stderr}`);
    }
  });
}
