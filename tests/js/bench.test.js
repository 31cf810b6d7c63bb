// The benchmark's output contract (`needle-wasm bench --quick --json`): one
// JSON object of the documented shape whose figures are positive numbers, or
// null with a reason in host.nulls; plus the engine entry points it reads
// (needle_session_profile, needle_bench_gemv). No timing thresholds: only
// that measuring works and is reported consistently.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Model } from '../../js/model.js';
import { CONTEXTS, PROMPTS, GEMV_SHAPES, GEMV_WIDTHS, STAGES } from '../../js/bench.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const TINY = new URL('../../dist/tiny.cact', import.meta.url);

function runQuick() {
  const run = spawnSync(process.execPath, ['js/cli.js', 'bench', '--quick', '--json'], { cwd: root, encoding: 'utf8' });
  assert.equal(run.status, 0, `bench failed:\n${run.stderr}`);
  return run.stdout;
}

// Every leaf under `value`: a positive finite number, or null explained in nulls[path].
function assertFigures(value, path, nulls) {
  if (value === null) {
    assert.equal(typeof nulls[path], 'string', `${path} is null without a reason`);
    assert.ok(nulls[path].length > 10, `${path}: reason too short`);
  } else if (typeof value === 'object') {
    assert.ok(Object.keys(value).length > 0, `${path} is empty`);
    for (const [k, v] of Object.entries(value)) assertFigures(v, path ? `${path}.${k}` : k, nulls);
  } else {
    assert.equal(typeof value, 'number', `${path} is ${typeof value}`);
    assert.ok(Number.isFinite(value) && value > 0, `${path} = ${value} is not a positive number`);
  }
}

test('bench --quick --json prints exactly one JSON object of the documented shape', () => {
  const stdout = runQuick();
  assert.equal(stdout.trim().split('\n').length, 1, 'more than one line on stdout');
  const r = JSON.parse(stdout);
  assert.deepEqual(Object.keys(r.decode_tps), CONTEXTS.map((c) => `ctx${c}`));
  assert.deepEqual(Object.keys(r.prefill_tps), PROMPTS.map((p) => `p${p}`));
  for (const row of [...Object.values(r.decode_tps), ...Object.values(r.prefill_tps)]) {
    assert.deepEqual(Object.keys(row), ['t1', 't2']);
  }
  assert.deepEqual(Object.keys(r.stage_share), STAGES);
  const shapes = GEMV_SHAPES.map(([a, b]) => `${a}x${b}`);
  assert.deepEqual(Object.keys(r.gemv_gmacs), [...Object.keys(GEMV_WIDTHS), 'f32']);
  assert.deepEqual(Object.keys(r.gemv_speedup_vs_f32), Object.keys(GEMV_WIDTHS));
  for (const row of Object.values(r.gemv_gmacs)) assert.deepEqual(Object.keys(row), shapes);
  for (const key of ['peak_memory_mb', 'mask_us_median', 'mask_us_p99', 'mask_us_demo_catalogue', 'busy_decode_tps', 'command_ms', 'command_tokens', 'demo_command_ms', 'abort_ms', 'conversation_turn_ms', 'wasm_bytes', 'host']) {
    assert.ok(key in r, `missing ${key}`);
  }
  assert.equal(r.host.quick, true);
  assert.equal(r.host.threads_used, 1);
  assert.match(r.host.node, /^v\d+/);
  assert.ok(r.host.cpu.length > 0);
  const { host, stage_share: share, ...figures } = r;
  // Shares are fractions of one decode step (rounded to 4 digits each); a
  // stage may take no measurable time, so zero shares are allowed here only.
  for (const [stage, v] of Object.entries(share)) assert.ok(v >= 0 && v <= 1, `${stage} share ${v}`);
  const sum = Object.values(share).reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(sum - 1) < 0.001 * STAGES.length, `stage shares sum to ${sum}`);
  assertFigures(figures, '', host.nulls);
  for (const path of Object.keys(host.nulls)) {
    const value = path.split('.').reduce((v, k) => v?.[k], r);
    assert.equal(value, null, `host.nulls explains ${path}, which is not null`);
  }
  // The speedup is the ratio of the two GMAC/s figures reported beside it.
  for (const [width, row] of Object.entries(r.gemv_speedup_vs_f32)) {
    for (const [shape, ratio] of Object.entries(row)) {
      const expected = r.gemv_gmacs[width][shape] / r.gemv_gmacs.f32[shape];
      assert.ok(Math.abs(ratio - expected) <= 0.01 * expected + 0.002, `${width} ${shape}: ${ratio} vs ${expected}`);
    }
  }
  assert.ok(r.wasm_bytes['needle.wasm'] < 300 * 1024, 'the main module is over 300 KB');
});

test('needle_session_profile: zero while off, stage times while on, frozen when off again', async () => {
  const model = await Model.fromBytes(new Uint8Array(await readFile(TINY)));
  const { engine } = model;
  const session = model.session();
  const ptr = engine.malloc(STAGES.length * 8);
  const read = () => {
    assert.equal(engine.x.needle_session_profile(session.handle, ptr, STAGES.length), STAGES.length);
    return Array.from(new Float64Array(engine.memory.buffer, ptr, STAGES.length));
  };
  try {
    session.feed([5, 6, 7, 8]);
    assert.deepEqual(read(), STAGES.map(() => 0));
    engine.x.needle_session_set_profiling(session.handle, 1);
    for (let i = 0; i < 40; i++) session.feed([9 + i]);
    const on = read();
    for (const ms of on) assert.ok(ms >= 0 && Number.isFinite(ms));
    assert.ok(on.reduce((a, b) => a + b, 0) > 0, 'forty steps took no time');
    engine.x.needle_session_set_profiling(session.handle, 0);
    session.feed([60, 61]);
    assert.deepEqual(read(), on);
    engine.x.needle_session_set_profiling(session.handle, 1); // restarting zeroes
    assert.deepEqual(read(), STAGES.map(() => 0));
  } finally {
    engine.x.free(ptr);
    session.free();
    model.free();
  }
});

test('needle_bench_gemv times every width and rejects bad arguments with a message', async () => {
  const model = await Model.fromBytes(new Uint8Array(await readFile(TINY)));
  const { engine } = model;
  try {
    for (const bits of [...Object.values(GEMV_WIDTHS), 32]) {
      const ms = engine.x.needle_bench_gemv(bits, 64, 256, 128, 2, engine.err);
      assert.ok(ms >= 0, `bits ${bits}: ${ms}`);
    }
    for (const [bits, rows, cols, group, pattern] of [[5, 64, 64, 64, /bits 5/], [2, 0, 64, 64, /shape/],
      [2, 64, 64, 96, /group 96/], [3, 65536, 65536, 64, /2\^26/]]) {
      assert.equal(engine.x.needle_bench_gemv(bits, rows, cols, group, 1, engine.err), -1);
      assert.match(engine.lastError().message, pattern);
    }
  } finally {
    model.free();
  }
});

test('ab-bench measures two checkouts alternately: every median positive, each ratio B against A', async () => {
  const { abBench } = await import('../../src/tools/ab-bench.mjs');
  const r = await abBench(root, root, { rounds: 1, archive: fileURLToPath(TINY) });
  assert.deepEqual(Object.keys(r), ['decode_t1', 'prefill_t1', 'command_t1', 'decode_t2', 'prefill_t2']);
  for (const [name, { a, b, ratio }] of Object.entries(r)) {
    assert.ok(a > 0 && b > 0 && Number.isFinite(a) && Number.isFinite(b), `${name}: ${a} ${b}`);
    assert.equal(ratio, name.startsWith('command') ? a / b : b / a, `${name}: the ratio is faster-is-higher`);
  }
});
