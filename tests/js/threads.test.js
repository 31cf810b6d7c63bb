// The threaded engine (dist/needle-threads.wasm, src/kernels/threads.h, js/wasm.js):
// on 2 threads the logits of a prefill and of decode steps, exact and fast,
// and the tokens sampled from a seed are bit-identical to one thread's (the
// threaded build on one thread and the plain SIMD128 build), and the same
// for Needle 3 (dist/needle3-threads.wasm against dist/needle3.wasm), and on a
// machine whose cores all run other threads (the workers' busy marks); the thread
// decision gives the right count and reason for each kind of host; freeing
// the engine lets its workers go.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { Engine } from '../../js/engine.js';
import { Model } from '../../js/model.js';
import { threadPlan, hostThreadFacts, MAX_AUTO_THREADS, THREADS_PROBE } from '../../js/wasm.js';
import { makeTestTokenizerBlob, syntheticPieces } from '../../js/cact-writer.js';
import { writeCact3 } from '../../js/cact3-writer.js';
import { TINY3_GEOMETRY } from '../../js/cact3-format.js';

const ARCHIVES = {
  tiny: readFileSync(new URL('../../dist/tiny.cact', import.meta.url)),
  released: readFileSync(new URL('../../dist/released-random.cact', import.meta.url)),
  demo: readFileSync(new URL('../../dist/demo.cact', import.meta.url)),
};
const cores = os.availableParallelism?.() ?? os.cpus().length;
const PROMPT = [2, 17, 99, 431, 5, 6, 1000, 8191, 77, 300, 12, 13, 14, 15, 16, 4000, 23, 42, 7, 9,
  1234, 555, 6000, 321, 88, 1024, 2048, 4095, 31, 64, 65, 700, 3, 4, 5, 6, 7]; // over two 16-token chunks

async function load(bytes, wasm, threads) {
  const engine = await Engine.create(wasm, { threads });
  return Model.fromMemory(engine, engine.copyIn(bytes), bytes.length);
}

async function free(model) {
  model.free();
  await model.engine.free();
}

/** Everything compared: prefill logits of every position, then 6 decode
 *  steps, in exact and fast mode; and 12 sampled tokens from a seed. */
async function outputs(model) {
  const out = {};
  for (const exact of [true, false]) {
    const session = model.session({ exact });
    try {
      const rows = session.feed(PROMPT.map((id) => id % model.vocabulary), { all: true });
      for (const id of [5, 77, 8000, 12, 4, 300]) rows.push(...session.feed([id % model.vocabulary]));
      out[exact ? 'exact' : 'fast'] = rows;
    } finally {
      session.free();
    }
  }
  const tokens = [];
  for await (const { token } of model.generate('Turn on the light', { maxTokens: 12, temperature: 0.9, seed: 7, raw: true })) {
    tokens.push(token);
  }
  out.tokens = tokens;
  return out;
}

/** Decodes on the model's engine until its worker has run some of the work
 *  since `before` chunks, for at most `ms`: on a loaded test machine a worker
 *  may sleep through a short run. */
function workerRuns(model, before, ms = 3000) {
  const start = performance.now();
  while (model.engine.x.needle_threads_worker_chunks() <= before && performance.now() - start < ms) {
    const session = model.session();
    try {
      for (const id of PROMPT) session.feed([id % model.vocabulary]);
    } finally {
      session.free();
    }
  }
  return model.engine.x.needle_threads_worker_chunks() > before;
}

function assertBitIdentical(a, b, label) {
  assert.deepEqual(a.tokens, b.tokens, `${label}: sampled tokens`);
  for (const mode of ['exact', 'fast']) {
    assert.equal(a[mode].length, b[mode].length);
    for (let r = 0; r < a[mode].length; r++) {
      const x = new Uint32Array(a[mode][r].buffer, a[mode][r].byteOffset, a[mode][r].length);
      const y = new Uint32Array(b[mode][r].buffer, b[mode][r].byteOffset, b[mode][r].length);
      const at = x.findIndex((v, i) => v !== y[i]);
      assert.equal(at, -1, `${label} ${mode}: row ${r} differs at ${at}: ${a[mode][r][at]} vs ${b[mode][r][at]}`);
    }
  }
}

for (const [name, bytes] of Object.entries(ARCHIVES)) {
  test(`${name}: 2 threads give the bits of 1 thread (prefill, decode, exact, fast, sampling)`, async () => {
    const two = await load(bytes, undefined, 2);
    const oneThreaded = await load(bytes, 'threads', 1);
    const simd = await load(bytes, 'simd', 1);
    try {
      if (cores >= 2) assert.deepEqual(two.engine.threads, { count: 2, reason: null });
      else assert.match(two.engine.threads.reason, /one core/);
      assert.equal(two.engine.variant, 'threads');
      assert.deepEqual(oneThreaded.engine.threads, { count: 1, reason: 'one thread was requested' });
      assert.equal(two.engine.x.needle_threads_joined(), two.engine.threads.count - 1);
      const reference = await outputs(simd);
      assert.ok(reference.tokens.length > 0 && reference.exact[0].some((v) => v !== 0));
      const before = two.engine.x.needle_threads_worker_chunks();
      assertBitIdentical(await outputs(two), reference, `${name} 2 threads vs simd`);
      if (cores >= 2) assert.ok(workerRuns(two, before), 'the worker ran no part of the work');
      assertBitIdentical(await outputs(oneThreaded), reference, `${name} threaded build on 1 thread vs simd`);
    } finally {
      await Promise.all([two, oneThreaded, simd].map(free));
    }
  });
}

test('Needle 3: 2 threads give the bits of 1 thread (prefill, decode, exact, fast, sampling, heads)', async () => {
  const bytes = writeCact3({ geometry: { ...TINY3_GEOMETRY, hidden: 128, hadamardDimension: 128, queryHeads: 8, kvHeads: 2 },
    seed: 9, bits: 2, group: 32, tokenizer: makeTestTokenizerBlob(syntheticPieces(9000)),
    heads: [{ kind: 'embedding', probes: 2, queries: 2 }, { kind: 'confidence', probes: 3, queries: 2 }] });
  const two = await load(bytes, 'needle3', 2);
  const oneThreaded = await load(bytes, 'needle3-threads', 1);
  const single = await load(bytes, 'needle3', 1);
  try {
    if (cores >= 2) assert.deepEqual(two.engine.threads, { count: 2, reason: null });
    assert.equal(two.engine.variant, 'needle3-threads');
    const reference = await outputs(single);
    reference.embedding = [single.embed('dim the lights')];
    const before = two.engine.x.needle_threads_worker_chunks();
    for (const [model, label] of [[two, '2 threads'], [oneThreaded, 'the threaded build on 1 thread']]) {
      const got = await outputs(model);
      got.embedding = [model.embed('dim the lights')];
      assertBitIdentical(got, reference, `Needle 3 ${label} vs needle3`);
      assert.deepEqual(got.embedding, reference.embedding, `Needle 3 ${label}: the embedding head`);
    }
    if (cores >= 2) assert.ok(workerRuns(two, before), 'the worker ran no part of the work');
  } finally {
    await Promise.all([two, oneThreaded, single].map(free));
  }
});

test('a busy machine: a worker notices it was descheduled, and the bits stay those of 1 thread', async () => {
  const two = await load(ARCHIVES.released, undefined, 2);
  const simd = await load(ARCHIVES.released, 'simd', 1);
  const { Worker } = await import('node:worker_threads');
  const spinners = [];
  try {
    if (cores < 2) return assert.equal(two.engine.threads.count, 1);
    const reference = await outputs(simd);
    // More runnable threads than cores: every core spins, and one more.
    for (let i = 0; i <= cores; i++) spinners.push(new Worker('for (;;) {}', { eval: true }));
    await Promise.all(spinners.map((w) => new Promise((resolve) => w.once('online', resolve))));
    const marks = two.engine.x.needle_threads_busy_marks();
    const start = performance.now();
    let got;
    do got = await outputs(two);
    while (two.engine.x.needle_threads_busy_marks() === marks && performance.now() - start < 30000);
    assert.ok(two.engine.x.needle_threads_busy_marks() > marks, 'no worker found itself descheduled on a busy machine');
    assertBitIdentical(got, reference, 'released, 2 threads on a busy machine vs simd');
  } finally {
    await Promise.all(spinners.map((w) => w.terminate()));
  }
  try {
    // The machine idle again: the worker takes its share of the work.
    assert.ok(workerRuns(two, two.engine.x.needle_threads_worker_chunks()), 'the worker ran no part of the work after the load');
  } finally {
    await Promise.all([two, simd].map(free));
  }
});

const NODE = { node: true, sharedArrayBuffer: true, crossOriginIsolated: false, cores: 2, wasmThreads: true, simd: true };
const PAGE = { ...NODE, node: false, crossOriginIsolated: true };

test('threadPlan: counts and the reason for each kind of host', () => {
  assert.deepEqual(threadPlan('auto', NODE), { count: 2, reason: null });
  assert.deepEqual(threadPlan('auto', PAGE), { count: 2, reason: null });
  assert.deepEqual(threadPlan(undefined, { ...NODE, cores: 32 }), { count: MAX_AUTO_THREADS, reason: null });
  assert.deepEqual(threadPlan(8, { ...NODE, cores: 32 }), { count: 8, reason: null });
  assert.deepEqual(threadPlan(4, NODE), { count: 2, reason: '4 threads requested, capped at the 2 cores' });
  assert.deepEqual(threadPlan(1, NODE), { count: 1, reason: 'one thread was requested' });
  const reason = (requested, facts) => {
    const plan = threadPlan(requested, facts);
    assert.equal(plan.count, 1);
    return plan.reason;
  };
  assert.match(reason('auto', { ...PAGE, crossOriginIsolated: false }), /not cross-origin isolated.*Cross-Origin-Opener-Policy/);
  assert.match(reason('auto', { ...PAGE, sharedArrayBuffer: false }), /SharedArrayBuffer is not available.*cross-origin isolated/);
  assert.match(reason(2, { ...NODE, sharedArrayBuffer: false }), /SharedArrayBuffer is not available/);
  assert.match(reason('auto', { ...NODE, cores: 1 }), /one core/);
  assert.match(reason(2, { ...PAGE, cores: 1 }), /one core/);
  assert.match(reason('auto', { ...NODE, wasmThreads: false }), /no threads \(shared memory\)/);
  assert.match(reason('auto', { ...NODE, simd: false }), /needs SIMD128/);
  assert.match(reason('auto', { ...NODE, variant: 'relaxed' }), /"relaxed" engine variant runs one thread/);
  assert.deepEqual(threadPlan('auto', { ...NODE, variant: 'threads' }), { count: 2, reason: null });
  for (const bad of [0, -1, 1.5, '2', 'all', 17, NaN]) assert.throws(() => threadPlan(bad, NODE), /option threads is .*: must be 'auto' or an integer/);
});

test('hostThreadFacts: Node has SharedArrayBuffer and wasm threads; cores from os', async () => {
  const facts = await hostThreadFacts();
  assert.deepEqual(facts, { node: true, sharedArrayBuffer: true, crossOriginIsolated: false, cores, wasmThreads: true });
  assert.equal((await hostThreadFacts(() => false)).wasmThreads, false);
  const broken = THREADS_PROBE.slice();
  broken[broken.length - 3] = 0x01; // limits flag 1: a maximum, not shared
  assert.equal(WebAssembly.validate(broken), true, 'the probe is well-formed apart from the shared flag');
  broken[broken.length - 3] = 0x02; // shared without a maximum: invalid
  assert.equal(WebAssembly.validate(broken), false);
});

test('a single-threaded variant or module reports why it runs one thread', async () => {
  const engine = await Engine.create('simd', { threads: 2 });
  assert.equal(engine.variant, 'simd');
  assert.match(engine.threads.reason, /"simd" engine variant runs one thread/);
  await engine.free();
  await assert.rejects(Engine.create(undefined, { threads: 0 }), /option threads is .*: must be 'auto' or an integer/);
});

test('free() lets the workers go; a process that forgets free() still exits', async () => {
  const engine = await Engine.create(undefined, { threads: 2 });
  assert.equal(engine.x.needle_threads_joined(), engine.threads.count - 1);
  await engine.free();
  assert.equal(engine.x.needle_threads_joined(), 0);
  assert.equal(engine.threads.count, 1);
  const model = Model.fromMemory(engine, engine.copyIn(ARCHIVES.tiny), ARCHIVES.tiny.length);
  assert.equal(model.logits([2, 17, 99])[0].length, model.vocabulary, 'a freed engine still runs on one thread');
  model.free();
  const engineUrl = new URL('../../js/engine.js', import.meta.url).href;
  for (const ending of ['await engine.free();', '/* no free */']) {
    const script = `import { Engine } from ${JSON.stringify(engineUrl)};
      const engine = await Engine.create(undefined, { threads: 2 });
      console.log(engine.threads.count, engine.x.needle_threads_joined());
      ${ending}`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20000 });
    assert.equal(run.status, 0, `${ending}: ${run.stderr} ${run.error ?? ''}`);
    assert.equal(run.stdout.trim(), cores >= 2 ? '2 1' : '1 0');
  }
});
