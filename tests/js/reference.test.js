// Tests of the float64 reference model (tests/js/reference/), the oracle the
// engine is compared against: each building block is checked against an
// independent formulation (explicit matrices, BigInt hashing, the seed's
// per-width bit extraction, hand-worked numbers), then whole forward passes
// on archives from js/cact-writer.js are checked for the properties the spec
// implies (causality, window and sinks, padding invariance, exact KV mode).
// Run: node --test tests/js/reference.test.js

import test from 'node:test';
import assert from 'node:assert/strict';

import { fwht, hadamardMatrix, applyMatrix } from './reference/hadamard.js';
import {
  readArchive, halfToNumber, roundToHalf, cqRow, cqIndex, denseMatrix, DTYPE,
} from './reference/archive.js';
import {
  referenceForward, sinkhorn, rope, rmsUnit, zcrms, hadamardMlp, engramSlot, snapToLevel,
  kvQuantise, kvLevels, archiveWindow, fakeQuantA8,
} from './reference/model.js';
import { referenceHeads, probePool } from './reference/heads.js';
import { sequenceForward } from './reference/cross-check.js';
import {
  writeCact, makeTestTokenizerBlob, syntheticPieces, TINY_GEOMETRY, RELEASED_GEOMETRY, toFp16,
} from '../../js/cact-writer.js';
import { LLOYD_MAX_LEVELS } from '../../js/cact-format.js';

// ---- helpers ---------------------------------------------------------------

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296 - 0.5;
  };
}
const randomVector = (n, r, scale = 1) => Float64Array.from({ length: n }, () => r() * 2 * scale);
const maxAbsDiff = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const cosine = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b));

const TOKENIZER_512 = makeTestTokenizerBlob(syntheticPieces(512));
const archiveCache = new Map();
function tinyArchive(overrides = {}, extra = {}) {
  const key = JSON.stringify([overrides, extra]);
  if (!archiveCache.has(key)) {
    const bytes = writeCact({
      geometry: { ...TINY_GEOMETRY, ...overrides }, seed: 11, tokenizer: TOKENIZER_512, heads: true, ...extra,
    });
    archiveCache.set(key, readArchive(bytes));
  }
  return archiveCache.get(key);
}
const sequence = (n, seed = 5) => {
  const r = rng(seed);
  return [2, ...Array.from({ length: n - 1 }, () => 14 + Math.floor((r() + 0.5) * 490))];
};

// ---- Hadamard ----------------------------------------------------------------

test('FWHT equals the explicit Sylvester matrix and is its own inverse', () => {
  const r = rng(1);
  for (const n of [1, 2, 4, 8, 16, 64, 128, 256]) {
    const v = randomVector(n, r);
    const H = hadamardMatrix(n);
    assert.ok(maxAbsDiff(fwht(v), applyMatrix(H, v)) < 1e-13, `n=${n}`);
    assert.ok(maxAbsDiff(fwht(fwht(v)), v) < 1e-13, `involution n=${n}`);
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) assert.equal(H[i * n + j], H[j * n + i]);
  }
  // Sylvester order: row 1 of H4 is [1, -1, 1, -1] / 2.
  assert.deepEqual(Array.from(hadamardMatrix(4).subarray(4, 8)), [0.5, -0.5, 0.5, -0.5]);
  assert.throws(() => fwht(new Float64Array(12)), /power of two/);
});

// ---- fp16 ------------------------------------------------------------------

test('fp16 decoding and rounding agree with each other and with the writer', () => {
  for (let h = 0; h < 0x10000; h++) {
    const x = halfToNumber(h);
    if (Number.isFinite(x)) assert.equal(roundToHalf(x), x, `half 0x${h.toString(16)}`);
  }
  assert.equal(halfToNumber(0x3c00), 1);
  assert.equal(halfToNumber(0xc000), -2);
  assert.equal(halfToNumber(0x0001), 2 ** -24);
  assert.equal(halfToNumber(0x7bff), 65504);
  // Ties to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  assert.equal(roundToHalf(1 + 2 ** -11), 1);
  assert.equal(roundToHalf(1 + 3 * 2 ** -11), 1 + 2 ** -9);
  const r = rng(2);
  for (let i = 0; i < 20000; i++) {
    const x = Math.fround(r() * 2 ** Math.floor(r() * 40 - 10)); // f32 values: no double rounding
    assert.equal(roundToHalf(x), halfToNumber(toFp16(x)), `x=${x}`);
  }
});

// ---- CQ dequantisation -------------------------------------------------------

/** The seed's per-width extraction, independent of cqIndex's generic window. */
function seedIndex(t, r, k) {
  const row = t.packed.subarray(r * t.rowBytes, (r + 1) * t.rowBytes);
  if (t.streamBits === 2) return (row[k >> 2] >> ((k & 3) * 2)) & 3;
  if (t.streamBits === 4) return (row[k >> 1] >> ((k & 1) * 4)) & 15;
  const bit = k * 3;
  return ((row[bit >> 3] | ((row[(bit >> 3) + 1] ?? 0) << 8)) >> (bit & 7)) & 7;
}

/** Dense reconstruction with the explicit matrix: w[group] = (levels[idx] * norm) @ Hg. */
function denseReconstruction(t) {
  const H = hadamardMatrix(t.group);
  const out = new Float64Array(t.rows * t.cols);
  for (let r = 0; r < t.rows; r++) {
    for (let gi = 0; gi < t.groups; gi++) {
      const rotated = Array.from({ length: t.group },
        (_, k) => t.levels[seedIndex(t, r, gi * t.group + k)] * t.norms[r * t.groups + gi]);
      for (let c = 0; c < t.group && gi * t.group + c < t.cols; c++) {
        let s = 0;
        for (let k = 0; k < t.group; k++) s += rotated[k] * H[k * t.group + c]; // row vector @ H
        out[r * t.cols + gi * t.group + c] = s;
      }
    }
  }
  return out;
}

test('CQ dequantisation matches an explicit dense reconstruction and the writer input', () => {
  const r = rng(3);
  const given = new Map();
  const weights = (name, shape) => {
    if (!/q_proj|k_proj|embedding/.test(name)) return null;
    const v = Float64Array.from({ length: shape[0] * shape[1] }, () => r());
    given.set(name, v);
    return v;
  };
  // Widths 2, 3, 4 and ternary; groups 8, 16 and 32 (hidden 40 pads every one);
  // the embedding's group (8) is the archive's g, so the other records rescale.
  const cases = [
    { bits: 2, group: 32, minCos: 0.85 }, { bits: 3, group: 16, minCos: 0.93 },
    { bits: 4, group: 32, minCos: 0.97 }, { bits: 'ternary', group: 16, minCos: 0.75 },
  ];
  for (const { bits, group, minCos } of cases) {
    const bytes = writeCact({
      geometry: { ...TINY_GEOMETRY, hidden: 40, hadamardDimension: 64, layers: 1, siteCount: 0, sites: [] },
      seed: 4, tokenizer: TOKENIZER_512, weights,
      bits: (name) => (name === 'embedding' ? 4 : bits),
      group: (name) => (name === 'embedding' ? 8 : group),
    });
    const a = readArchive(bytes);
    assert.equal(a.weightGroup, 8);
    for (const [name, t] of [['layer00.q_proj', a.weights.layers[0].q], ['layer00.k_proj', a.weights.layers[0].k]]) {
      assert.equal(t.dtype, DTYPE.CQ);
      for (let k = 0; k < t.groups * t.group; k++) assert.equal(cqIndex(t, 1, k), seedIndex(t, 1, k));
      if (bits === 'ternary') { // crumbs 3, 0, 1 are -c, 0, +c: compare with the writer's input only
        const dense = denseMatrix(t).data;
        const src = given.get(name);
        for (let row = 0; row < t.rows; row++) {
          const a0 = dense.subarray(row * t.cols, (row + 1) * t.cols);
          assert.ok(cosine(a0, src.subarray(row * t.cols, (row + 1) * t.cols)) > minCos, `${name} ternary row ${row}`);
        }
        continue;
      }
      const explicit = denseReconstruction(t);
      const dense = denseMatrix(t).data;
      assert.ok(maxAbsDiff(dense, explicit) < 1e-12, `${name} bits ${bits}`);
      const src = given.get(name);
      let ratios = 0;
      for (let row = 0; row < t.rows; row++) {
        const w = dense.subarray(row * t.cols, (row + 1) * t.cols);
        const s = src.subarray(row * t.cols, (row + 1) * t.cols);
        assert.ok(cosine(w, s) > minCos, `${name} bits ${bits} row ${row}: cos ${cosine(w, s)}`);
        ratios += norm(w) / norm(s);
      }
      const ratio = ratios / t.rows; // a wrong sqrt(g/gr) rescale shows here as 2x or 0.5x
      assert.ok(ratio > 0.85 && ratio < 1.1, `${name} bits ${bits}: mean norm ratio ${ratio}`);
    }
    // The embedding row gather equals the dense matrix row.
    const E = a.weights.embedding;
    const row = cqRow(E, 17);
    assert.ok(maxAbsDiff(row, denseMatrix(E).data.subarray(17 * E.cols, 18 * E.cols)) === 0);
  }
});

test('readArchive rejects malformed archives with a precise message', () => {
  const good = writeCact({ geometry: TINY_GEOMETRY, seed: 1, tokenizer: TOKENIZER_512 });
  const bad = (mutate) => { const b = Uint8Array.from(good); mutate(new DataView(b.buffer), b); return b; };
  assert.throws(() => readArchive(bad((v) => v.setUint32(0, 1, true))), /not a .cact archive/);
  assert.throws(() => readArchive(bad((v) => v.setUint32(7 * 4, 3, true))), /queryHeads 3 not a multiple/);
  const rec0 = 120 + 28 * 4;
  assert.throws(() => readArchive(bad((v) => v.setBigUint64(rec0 + 20, BigInt(good.length), true))), /beyond file end/);
  assert.throws(() => readArchive(bad((v) => v.setBigUint64(rec0 + 28, 10n, true))), /CQ blob 10 bytes/);
  assert.throws(() => readArchive(bad((v) => v.setUint32(rec0 + 8, 65, true))), /CQ blob|shape/);
  assert.throws(() => readArchive(good.subarray(0, 100)), /header/);
});

// ---- model building blocks -------------------------------------------------

test('sinkhorn: columns sum to 1, rows to about 1, rows normalised first', () => {
  const r = rng(6);
  for (const n of [1, 2, 4]) {
    const logits = Float64Array.from({ length: n * n }, (_, i) => r() * 2 + (i % (n + 1) === 0 ? 4 : 0));
    const R = sinkhorn(logits, n);
    for (let c = 0; c < n; c++) {
      let col = 0;
      for (let a = 0; a < n; a++) col += R[a * n + c];
      assert.ok(Math.abs(col - 1) < 1e-12, `column ${c}`);
    }
    for (let a = 0; a < n; a++) {
      const row = R.subarray(a * n, (a + 1) * n).reduce((s, x) => s + x, 0);
      assert.ok(Math.abs(row - 1) < 1e-2, `row ${a}: ${row}`); // 20 iterations: close, not exact
      assert.ok(R.every((x) => x > 0));
    }
    // Rows are normalised first, so a constant added to a row cancels exactly; a
    // constant added to a column does not (it would if columns went first).
    const rowShifted = Float64Array.from(logits, (x, i) => x + 3 * Math.floor(i / n) - 1);
    assert.ok(maxAbsDiff(sinkhorn(rowShifted, n), R) < 1e-12);
    const columnShifted = Float64Array.from(logits, (x, i) => x + 2 * (i % n));
    if (n > 1) assert.ok(maxAbsDiff(sinkhorn(columnShifted, n), R) > 1e-9);
  }
  // Uniform logits give the uniform doubly stochastic matrix.
  assert.ok(sinkhorn(new Float64Array(9).fill(0.7), 3).every((x) => Math.abs(x - 1 / 3) < 1e-15));
});

test('RoPE is a norm-preserving rotation that depends only on relative position', () => {
  const r = rng(7);
  const q = randomVector(16, r);
  const k = randomVector(16, r);
  assert.ok(maxAbsDiff(rope(q, 0, 10000), q) === 0);
  for (const p of [1, 5, 300, 5000]) assert.ok(Math.abs(norm(rope(q, p, 10000)) - norm(q)) < 1e-12);
  const d = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
  assert.ok(Math.abs(d(rope(q, 9, 10000), rope(k, 4, 10000)) - d(rope(q, 105, 10000), rope(k, 100, 10000))) < 1e-10);
  assert.ok(maxAbsDiff(rope(rope(q, 3, 500), 4, 500), rope(q, 7, 500)) < 1e-12);
  // Half split, by hand for hd = 4, theta = 100: f0 = 1, f1 = 1/10.
  const x = Float64Array.from([1, 2, 3, 4]);
  const out = rope(x, 2, 100);
  const c0 = Math.cos(2), s0 = Math.sin(2), c1 = Math.cos(0.2), s1 = Math.sin(0.2);
  assert.ok(maxAbsDiff(out, [1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1]) < 1e-15);
});

test('rms_unit and zcrms use eps 1e-6 inside the square root', () => {
  const v = Float64Array.from([3, -4]);
  const u = rmsUnit(v);
  assert.ok(maxAbsDiff(u, [3 / Math.sqrt(12.5 + 1e-6), -4 / Math.sqrt(12.5 + 1e-6)]) < 1e-15);
  const z = zcrms(v, Float64Array.from([0.5, -1]));
  assert.ok(maxAbsDiff(z, [1.5 * u[0], 0]) < 1e-15);
  assert.ok(maxAbsDiff(rmsUnit(new Float64Array(4)), [0, 0, 0, 0]) === 0);
});

test('Hadamard MLP equals the explicit-matrix formula, padding to N', () => {
  const r = rng(8);
  const d = 24, N = 32;
  const h = randomVector(d, r);
  const [d1, d2, d3] = [0, 1, 2].map(() => randomVector(N, r, 2));
  const H = hadamardMatrix(N);
  const z = applyMatrix(H, Float64Array.from({ length: N }, (_, i) => (i < d ? d1[i] * h[i] : 0)));
  const silu = (x) => x / (1 + Math.exp(-x));
  const z2 = applyMatrix(H, Float64Array.from(z, (x, i) => silu(d2[i] * x)));
  const expected = Float64Array.from({ length: d }, (_, i) => d3[i] * z2[i]);
  const got = hadamardMlp(h, d1, d2, d3);
  assert.equal(got.length, d);
  assert.ok(maxAbsDiff(got, expected) < 1e-12);
});

test('engram hash matches the formula computed with BigInt and a worked example', () => {
  const M = 2n ** 32n;
  const slotBig = (t, recent, slots) => {
    let acc = (0x9e3779b9n * BigInt(t + 1)) % M;
    for (const tok of recent) acc = ((acc ^ BigInt(tok)) * 0x01000193n) % M;
    acc ^= acc >> 15n;
    return Number(acc % BigInt(slots));
  };
  const r = rng(9);
  for (let i = 0; i < 2000; i++) {
    const t = Math.floor((r() + 0.5) * 8);
    const recent = Array.from({ length: 1 + (i % 4) }, () => Math.floor((r() + 0.5) * 8192));
    const slots = [64, 8192, 1000, 4096][i % 4];
    assert.equal(engramSlot(t, recent, slots), slotBig(t, recent, slots));
  }
  // Worked by hand (Python big ints): table 0, T[p] = 5, T[p-1] = 2: acc = 842853691, slot 3387 of 8192;
  // table 3, [300, 17, 2]: acc 60725110 -> 6006; table 1, two missing tokens, 64 slots -> 22.
  assert.equal(engramSlot(0, [5, 2], 8192), 3387);
  assert.equal(engramSlot(3, [300, 17, 2], 8192), 6006);
  assert.equal(engramSlot(1, [0, 0], 64), 22);
});

test('KV quantiser: levels = header * sqrt(g/64), snapping to nearest with ties low, fp16 norm', () => {
  const a = tinyArchive({}, { kvBits: 3 });
  assert.equal(a.weightGroup, 128);
  const levels = kvLevels(a);
  LLOYD_MAX_LEVELS[3].forEach((l, i) => assert.ok(Math.abs(levels[i] - l / 8) < 1e-7));
  assert.equal(kvLevels(a, false), null);
  assert.equal(kvLevels(tinyArchive()), null); // kvBits 8: exact
  assert.equal(kvLevels(a, 2).length, 4);
  // Ties go to the lower level; beyond the ends, the end level.
  const L = Float64Array.from([-3, -1, 1, 3]);
  assert.equal(snapToLevel(0, L), -1);
  assert.equal(snapToLevel(2, L), 1);
  assert.equal(snapToLevel(2.0001, L), 3);
  assert.equal(snapToLevel(-9, L), -3);
  // Structure of the result, with an explicit H64 and a head dimension that pads (40 -> 64).
  const r = rng(10);
  const H = hadamardMatrix(64);
  for (const hd of [40, 64, 128]) {
    const x = randomVector(hd, r, 3);
    const q = kvQuantise(x, levels);
    assert.equal(q.length, hd);
    for (let g0 = 0; g0 < hd; g0 += 64) {
      const group = Float64Array.from({ length: 64 }, (_, i) => x[g0 + i] ?? 0);
      const rot = applyMatrix(H, group);
      const n = norm(rot);
      const snapped = Float64Array.from(rot, (v) => snapToLevel(v / n, levels) * roundToHalf(n));
      const back = applyMatrix(H, snapped);
      for (let i = 0; i < 64 && g0 + i < hd; i++) assert.ok(Math.abs(q[g0 + i] - back[i]) < 1e-12);
    }
    assert.ok(cosine(q, x) > 0.9, `hd ${hd}: cos ${cosine(q, x)}`);
  }
  assert.ok(kvQuantise(new Float64Array(64), levels).every((v) => v === 0));
});

test('A8 fake quantisation: absmax/127 scale, half to even, clip', () => {
  assert.deepEqual(Array.from(fakeQuantA8(Float64Array.from([127, 0.5, 1.5, -2.5, -127]))), [127, 0, 2, -2, -127]);
  const q = fakeQuantA8(Float64Array.from([0.3, -0.1, 0.05]));
  const scale = 0.3 / 127;
  for (const v of q) assert.ok(Math.abs(v / scale - Math.round(v / scale)) < 1e-9);
  assert.deepEqual(Array.from(fakeQuantA8(new Float64Array(3))), [0, 0, 0]);
});

test('window of section 5: header kvWindow, else the KV budget formula', () => {
  assert.equal(archiveWindow({ ...RELEASED_GEOMETRY, kvWindow: 256 }), 256);
  // Worked by hand: kvd 256; 27 * (2*256 + 2*8*4) = 27 * 576 = 15552; 2 * (512 + 16*4) = 1152; per_pos 16704;
  // 12058624 / 16704 = 721; 721 / 32 = 22; w = 704.
  assert.equal(archiveWindow({ ...RELEASED_GEOMETRY, kvWindow: 0 }), 704);
  assert.equal(archiveWindow({ ...RELEASED_GEOMETRY, kvWindow: 0, layers: 400 }), 160);
  assert.equal(archiveWindow({ ...TINY_GEOMETRY, kvWindow: 0 }), 256); // capped at maximumSequence
});

test('probe pooling of a single cell returns that cell for every probe', () => {
  const r = rng(12);
  const cell = randomVector(8, r);
  const probes = { rows: 3, cols: 8, data: randomVector(24, r) };
  const pooled = probePool([cell], probes, 8);
  for (let k = 0; k < 3; k++) assert.ok(maxAbsDiff(pooled.subarray(k * 8, k * 8 + 8), cell) < 1e-15);
});

// ---- whole forward pass ------------------------------------------------------

test('forward: shapes, determinism, and causality', () => {
  const a = tinyArchive();
  const ids = sequence(24);
  const full = referenceForward(a, ids);
  assert.equal(full.logits.length, 24);
  assert.equal(full.logits[0].length, a.geometry.vocabulary);
  assert.equal(full.cells[3].length, a.geometry.layers + 1);
  assert.ok(full.logits.every((l) => l.every(Number.isFinite)));
  const prefix = referenceForward(a, ids.slice(0, 15));
  for (let p = 0; p < 15; p++) assert.ok(maxAbsDiff(prefix.logits[p], full.logits[p]) === 0);
  const changed = referenceForward(a, [...ids.slice(0, 15), ids[15] === 20 ? 21 : 20, ...ids.slice(16)]);
  assert.ok(maxAbsDiff(changed.logits[14], full.logits[14]) === 0);
  assert.ok(maxAbsDiff(changed.logits[15], full.logits[15]) > 1e-6);
  // Cell 0 is the scaled embedding row; the last cell feeds the final norm.
  const E = denseMatrix(a.weights.embedding);
  const d = a.geometry.hidden;
  const row = E.data.subarray(ids[4] * d, (ids[4] + 1) * d);
  assert.ok(maxAbsDiff(full.cells[4][0], Float64Array.from(row, (v) => v * Math.sqrt(d))) < 1e-12);
});

test('forward: the decode-order pass equals a whole-sequence formulation (window, sinks, KV quantisation)', () => {
  const cases = [
    [{}, {}, {}],
    [{}, { kvBits: 2 }, { window: 5, sinks: 2 }],
    [{ lanes: 4, layers: 4, sites: [3, 1] }, { kvBits: 4 }, { window: 7 }],
    [{ queryHeads: 6, kvHeads: 3, headDimension: 8, orders: [3, 1], engramDilation: 2, engramTaps: 3 }, {}, {}],
  ];
  for (const [geometry, extra, opts] of cases) {
    const a = tinyArchive(geometry, extra);
    const ids = sequence(18, 21);
    const got = referenceForward(a, ids, opts).logits;
    const want = sequenceForward(a, ids, { window: Infinity, ...opts, kvLevels: kvLevels(a) });
    const scale = Math.max(...want.flatMap((l) => Array.from(l, Math.abs)));
    got.forEach((l, p) => assert.ok(maxAbsDiff(l, want[p]) < 1e-9 * scale, `${JSON.stringify([geometry, extra, opts])} p ${p}`));
  }
});

test('forward: the window forgets old tokens, sinks keep them, a huge window changes nothing', () => {
  // Two layers, engram reach (taps-1)*dilation + order-1 = 11 positions: with
  // window 3, position 0 can only reach positions < 0 + 2*(3-1) + 2*11 + 1.
  const a = tinyArchive();
  const ids = sequence(36, 8);
  const swapped = [2, ...ids.slice(1)];
  swapped[1] = ids[1] === 30 ? 31 : 30;
  const windowed = referenceForward(a, ids, { window: 3 });
  const windowedSwapped = referenceForward(a, swapped, { window: 3 });
  assert.ok(maxAbsDiff(windowed.logits[35], windowedSwapped.logits[35]) === 0);
  assert.ok(maxAbsDiff(windowed.logits[1], windowedSwapped.logits[1]) > 1e-6);
  const sunk = referenceForward(a, ids, { window: 3, sinks: 2 });
  const sunkSwapped = referenceForward(a, swapped, { window: 3, sinks: 2 });
  assert.ok(maxAbsDiff(sunk.logits[35], sunkSwapped.logits[35]) > 1e-9);
  assert.ok(maxAbsDiff(sunk.logits[2], windowed.logits[2]) === 0); // nothing has slid out yet
  assert.ok(maxAbsDiff(sunk.logits[35], windowed.logits[35]) > 1e-9);
  const wide = referenceForward(a, ids, { window: 36 });
  const infinite = referenceForward(a, ids, { window: Infinity });
  assert.ok(maxAbsDiff(wide.logits[35], infinite.logits[35]) === 0);
  const archiveDefault = referenceForward(a, ids); // header kvWindow 32 < 36 positions
  assert.ok(maxAbsDiff(archiveDefault.logits[31], wide.logits[31]) === 0);
  assert.ok(maxAbsDiff(archiveDefault.logits[35], wide.logits[35]) > 1e-9);
});

test('forward: kvBits 8 runs exact, kvBits 2/3/4 quantise K and V (and the error shrinks with bits)', () => {
  const ids = sequence(20, 9);
  const exact = referenceForward(tinyArchive(), ids);
  const forcedOff = referenceForward(tinyArchive(), ids, { kvQuant: false });
  assert.ok(maxAbsDiff(exact.logits[19], forcedOff.logits[19]) === 0);
  const errors = [2, 3, 4].map((bits) => {
    const a = tinyArchive({}, { kvBits: bits });
    const quant = referenceForward(a, ids);
    const off = referenceForward(a, ids, { kvQuant: false });
    assert.ok(maxAbsDiff(off.logits[19], exact.logits[19]) === 0); // same weights, same seed
    return Math.max(...quant.logits.map((l, p) => maxAbsDiff(l, off.logits[p])));
  });
  assert.ok(errors[0] > errors[2] && errors[2] > 0, `errors ${errors}`);
});

test('forward: A8 fake quantisation perturbs the logits only slightly', () => {
  const a = tinyArchive();
  const ids = sequence(12, 10);
  const plain = referenceForward(a, ids);
  const a8 = referenceForward(a, ids, { a8: true });
  const scale = Math.max(...plain.logits[11].map(Math.abs));
  const diff = maxAbsDiff(plain.logits[11], a8.logits[11]);
  assert.ok(diff > 0 && diff < 0.1 * scale, `diff ${diff} scale ${scale}`);
});

test('forward: no engram sites, one lane, MHA (H = KV) and wider geometry all run', () => {
  const variants = [
    { siteCount: 0, sites: [] }, { lanes: 1 }, { kvHeads: 4 },
    { hidden: 128, hadamardDimension: 128, headDimension: 32, layers: 4, lanes: 4, sites: [1, 3] },
  ];
  for (const v of variants) {
    const a = tinyArchive(v);
    const out = referenceForward(a, sequence(10, 3));
    assert.ok(out.logits.every((l) => l.every(Number.isFinite)), JSON.stringify(v));
  }
});

test('heads: unit contrastive embedding, confidence in (0, 1), pad positions invisible', () => {
  const a = tinyArchive();
  const ids = sequence(16, 12);
  const heads = referenceHeads(a, ids);
  assert.ok(Math.abs(norm(heads.contrastive) - 1) < 1e-12);
  assert.equal(heads.contrastive.length, 128);
  assert.ok(heads.confidence > 0 && heads.confidence < 1);
  // Right padding: later pad positions are excluded from the cells.
  const right = referenceHeads(a, [...ids, 0, 0, 0]);
  assert.ok(maxAbsDiff(right.contrastive, heads.contrastive) < 1e-15);
  assert.equal(right.confidence, heads.confidence);
  // Left padding (the reference's batched layout): pad keys are masked, pad
  // counts as an absent token for the engram, RoPE is relative: same result.
  const left = referenceHeads(a, [0, 0, 0, 0, ...ids]);
  assert.ok(maxAbsDiff(left.contrastive, heads.contrastive) < 1e-9);
  assert.ok(Math.abs(left.confidence - heads.confidence) < 1e-9);
  const other = referenceHeads(a, sequence(16, 13));
  assert.ok(maxAbsDiff(other.contrastive, heads.contrastive) > 1e-6);
  const none = referenceHeads(readArchive(writeCact({ geometry: TINY_GEOMETRY, seed: 1, tokenizer: TOKENIZER_512 })), ids);
  assert.deepEqual(none, { contrastive: null, confidence: null });
});

test('performance: a 128-wide, 4-layer, 8192-token model runs 40 positions in about a second', () => {
  const tokenizer = makeTestTokenizerBlob(syntheticPieces(8192));
  const geometry = {
    ...TINY_GEOMETRY, vocabulary: 8192, hidden: 128, hadamardDimension: 128, headDimension: 32,
    layers: 4, lanes: 4, engramSlots: 8192, engramSubDimension: 32, sites: [1, 2],
  };
  const a = readArchive(writeCact({ geometry, seed: 2, tokenizer, kvBits: 2, group: 64 }));
  const start = performance.now();
  const out = referenceForward(a, Array.from({ length: 40 }, (_, i) => (i * 977 + 2) % 8192));
  const ms = performance.now() - start;
  assert.equal(out.logits.length, 40);
  assert.ok(ms < 3000, `${ms.toFixed(0)} ms`);
});
