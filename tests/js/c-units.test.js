// Runs the C unit tests (tests/c/test_*.c) in both builds that ./build.sh
// native makes: natively under AddressSanitizer + UBSan, and as WASI modules
// with the SIMD128 kernels, and natively again with a small stack. Each test
// program prints "N passed, N failed".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const names = readdirSync(`${root}/tests/c`).filter((f) => /^test_.*\.c$/.test(f)).map((f) => f.slice(0, -2));

function assertAllPassed(output, status, label) {
  const summary = output.match(/(\d+) passed, (\d+) failed\s*$/);
  assert.ok(summary, `${label} printed no summary:\n${output}`);
  assert.equal(Number(summary[2]), 0, `${label} had failures:\n${output}`);
  assert.ok(Number(summary[1]) > 0, `${label} ran no test`);
  assert.equal(status, 0, `${label} exited ${status}:\n${output}`);
}

for (const name of names) {
  test(`${name} (native, ASan+UBSan)`, () => {
    const run = spawnSync(`${root}/build/native/${name}`, { cwd: root, encoding: 'utf8' });
    assertAllPassed(`${run.stdout}${run.stderr}`, run.status, name);
  });

  // A 256 KB stack (a thread's default is 8 MB here): recursion whose depth
  // grows with an input's size overflows it, as it would the wasm stack.
  test(`${name} (native, ASan+UBSan, 256 KB stack)`, () => {
    const run = spawnSync('bash', ['-c', `ulimit -s 256 && exec "${root}/build/native/${name}"`], { cwd: root, encoding: 'utf8' });
    assertAllPassed(`${run.stdout}${run.stderr}`, run.status, `${name} with a 256 KB stack`);
  });

  test(`${name} (wasm SIMD128, WASI)`, () => {
    // WASI writes to this process's fd 1, so the module runs in a child process.
    const run = spawnSync(process.execPath, ['--no-warnings', `${root}/tests/js/wasi-run.mjs`,
      `${root}/build/wasi/${name}.wasm`], { cwd: root, encoding: 'utf8' });
    assertAllPassed(`${run.stdout}${run.stderr}`, run.status, `${name}.wasm`);
  });
}

test('the native and the wasm build generate the same tokens from the same seed', () => {
  const tokens = (output) => output.split('\n').filter((line) => line.startsWith('tokens '));
  const native = spawnSync(`${root}/build/native/test_session`, { cwd: root, encoding: 'utf8' });
  const wasm = spawnSync(process.execPath, ['--no-warnings', `${root}/tests/js/wasi-run.mjs`,
    `${root}/build/wasi/test_session.wasm`], { cwd: root, encoding: 'utf8' });
  assert.equal(tokens(native.stdout).length, 2, native.stdout + native.stderr);
  assert.deepEqual(tokens(wasm.stdout), tokens(native.stdout));
});
