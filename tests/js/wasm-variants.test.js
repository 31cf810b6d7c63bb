// Engine variants (build.sh, js/wasm.js): every built variant loads and gives
// the baseline's logits within float tolerance (the relaxed one bit for bit,
// in a node with relaxed SIMD on); the probe modules detect what this host
// accepts; the choice follows the probes, the shipped list and a forced name;
// the scalar fallback really has no SIMD instruction; the relaxed rewrite
// (src/tools/relax-swizzle.mjs) changes every swizzle and nothing else.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Model } from '../../js/model.js';
import { relaxSwizzles } from '../../src/tools/relax-swizzle.mjs';
import { VARIANTS, PROBES, detectFeatures, chooseVariant, defaultVariant, variantUrl, instantiateEngine,
  fittingVariants, compileBestVariant } from '../../js/wasm.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const TINY = readFileSync(new URL('../../dist/tiny.cact', import.meta.url));
const built = Object.keys(VARIANTS).filter((name) => existsSync(variantUrl(name)));
const IDS = [2, 17, 99, 431, 5, 6, 1000, 8191, 77, 300, 12, 13, 14, 15, 16, 4000, 23, 42, 7, 9];

async function logits(wasm) {
  const model = await Model.fromBytes(TINY, { wasm });
  try {
    return model.logits(IDS, { all: true });
  } finally {
    model.free();
  }
}

test('the shipped variants are built, the main module under 300 KB', () => {
  for (const [name, v] of Object.entries(VARIANTS)) {
    if (v.shipped) assert.ok(built.includes(name), `${v.file} is missing: run ./build.sh`);
  }
  assert.ok(readFileSync(variantUrl('simd')).length < 300 * 1024);
});

for (const name of built.filter((n) => n !== 'simd')) {
  test(`variant ${name} gives the SIMD128 baseline's logits within float tolerance`, async () => {
    const features = detectFeatures();
    if (!VARIANTS[name].needs.every((f) => features[f])) {
      // A variant the host cannot run must be refused with a clear error.
      await assert.rejects(instantiateEngine(name), /lacks/);
      return;
    }
    const [base, other] = [await logits('simd'), await logits(name)];
    assert.equal(other.length, base.length);
    let maxDiff = 0, maxRef = 0;
    for (let r = 0; r < base.length; r++) {
      for (let i = 0; i < base[r].length; i++) {
        maxDiff = Math.max(maxDiff, Math.abs(base[r][i] - other[r][i]));
        maxRef = Math.max(maxRef, Math.abs(base[r][i]));
      }
    }
    assert.ok(maxRef > 0);
    assert.ok(maxDiff <= 1e-4 * maxRef, `max |diff| ${maxDiff} vs max |logit| ${maxRef}`);
  });
}

test('relaxed variant: the same logits as SIMD128 bit for bit (node with relaxed SIMD on)', () => {
  const script = `
    import { Model } from ${JSON.stringify(new URL('../../js/model.js', import.meta.url).href)};
    import { readFileSync } from 'node:fs';
    const bytes = readFileSync(${JSON.stringify(fileURLToPath(new URL('../../dist/tiny.cact', import.meta.url)))});
    const ids = ${JSON.stringify(IDS)};
    const out = {};
    for (const wasm of ['simd', 'relaxed']) {
      const model = await Model.fromBytes(bytes, { wasm });
      out[wasm] = model.logits(ids, { all: true }).map((row) => Buffer.from(row.buffer).toString('base64'));
      model.free();
    }
    console.log(JSON.stringify(out));`;
  const run = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', '--input-type=module', '-e', script],
    { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(run.status, 0, run.stderr);
  const { simd, relaxed } = JSON.parse(run.stdout);
  assert.equal(simd.length, IDS.length);
  assert.deepEqual(relaxed, simd);
});

test('relax-swizzle rewrites every i8x16.swizzle and leaves other modules byte-identical', () => {
  const base = readFileSync(variantUrl('simd'));
  const { bytes, swizzles } = relaxSwizzles(base);
  assert.ok(swizzles > 0, 'the baseline has no swizzle to relax');
  assert.deepEqual(bytes, readFileSync(variantUrl('relaxed')), 'dist/needle-relaxed.wasm is stale: run ./build.sh');
  assert.equal(relaxSwizzles(bytes).swizzles, 0);
  assert.ok(bytes.length >= base.length + swizzles, 'each swizzle grows by one opcode byte');
  const scalar = readFileSync(variantUrl('nosimd'));
  assert.deepEqual(relaxSwizzles(scalar).bytes, scalar);
});

test('the scalar fallback has no SIMD instruction (binaryen disassembly)', () => {
  const count = (file) => {
    const run = spawnSync('wasm-dis', [file], { encoding: 'utf8', maxBuffer: 1 << 28 });
    assert.equal(run.status, 0, run.stderr);
    return (run.stdout.match(/\b(v128|i8x16|i16x8|i32x4|f32x4)\b/g) ?? []).length;
  };
  assert.equal(count(fileURLToPath(variantUrl('nosimd'))), 0);
  assert.ok(count(fileURLToPath(variantUrl('simd'))) > 0, 'the baseline lost its SIMD kernels');
});

test('probe modules: SIMD128 validates; relaxed SIMD by default from V8 11.4, else with the flag', () => {
  const [major, minor] = process.versions.v8.split('.').map(Number);
  assert.deepEqual(detectFeatures(), { simd: true, relaxedSimd: major > 11 || (major === 11 && minor >= 4) });
  const script = `import { detectFeatures } from ${JSON.stringify(new URL('../../js/wasm.js', import.meta.url).href)};
    console.log(JSON.stringify(detectFeatures()));`;
  const run = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', '--input-type=module', '-e', script],
    { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout), { simd: true, relaxedSimd: true });
  // The probes are well-formed apart from the feature: corrupting the opcode breaks them.
  const broken = PROBES.simd.slice();
  broken[broken.length - 2] = 0xff;
  assert.equal(WebAssembly.validate(broken), false);
});

test('chooseVariant: best shipped fit, forced names, clear errors', () => {
  assert.equal(chooseVariant({ simd: true, relaxedSimd: true }), 'relaxed');
  assert.equal(chooseVariant({ simd: true, relaxedSimd: false }), 'simd');
  assert.equal(chooseVariant({ simd: false, relaxedSimd: false }), 'nosimd');
  assert.equal(chooseVariant({ simd: true }, 'nosimd'), 'nosimd');
  assert.equal(chooseVariant({ simd: true, relaxedSimd: true }, 'relaxed'), 'relaxed');
  assert.throws(() => chooseVariant({ simd: true, relaxedSimd: false }, 'relaxed'), /needs relaxedSimd/);
  assert.throws(() => chooseVariant({ simd: false }, 'simd'), /needs simd/);
  assert.throws(() => chooseVariant({ simd: true }, 'avx512'), /unknown engine variant/);
});

test('a variant that cannot be fetched gives way to the next; the last failure is thrown', async () => {
  assert.deepEqual(fittingVariants({ simd: true, relaxedSimd: true }), ['relaxed', 'simd', 'nosimd']);
  assert.deepEqual(fittingVariants({ simd: false, relaxedSimd: false }), ['nosimd']);
  const tried = [];
  const compile = async (name) => {
    tried.push(name);
    if (name !== 'nosimd') throw new Error(`cannot fetch ${name}: HTTP 404`);
    return `module of ${name}`;
  };
  assert.deepEqual(await compileBestVariant(['relaxed', 'simd', 'nosimd'], compile),
    { module: 'module of nosimd', variant: 'nosimd' });
  assert.deepEqual(tried, ['relaxed', 'simd', 'nosimd']);
  await assert.rejects(compileBestVariant(['relaxed', 'simd'], compile), /cannot fetch simd: HTTP 404/);
  await assert.rejects(compileBestVariant([], compile), /no engine variant/);
});

test('NEEDLE_WASM_VARIANT forces the default variant', async () => {
  const saved = process.env.NEEDLE_WASM_VARIANT;
  try {
    process.env.NEEDLE_WASM_VARIANT = 'nosimd';
    assert.equal(defaultVariant(), 'nosimd');
    const engine = await instantiateEngine();
    assert.equal(engine.variant, 'nosimd');
    delete process.env.NEEDLE_WASM_VARIANT;
    assert.equal(defaultVariant(), 'simd');
    process.env.NEEDLE_WASM_VARIANT = 'bogus';
    assert.throws(() => defaultVariant(), /unknown engine variant "bogus"/);
  } finally {
    if (saved === undefined) delete process.env.NEEDLE_WASM_VARIANT;
    else process.env.NEEDLE_WASM_VARIANT = saved;
  }
});
