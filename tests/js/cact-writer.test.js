// Tests of js/cact-writer.js: the archive is read back with a reader written
// here from the seed's layout (not the writer's code), CQ matrices are
// dequantised in float64 with an explicit Hadamard matrix and compared with
// the dense weights, and index choices are checked by brute force.
// Run: node --test tests/js/cact-writer.test.js

import test from 'node:test';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  writeCact, writeRandomArchive, nearestLevel, makeTestTokenizerBlob, syntheticPieces, canonicalTensors, releasedBits,
  RELEASED_GEOMETRY, TINY_GEOMETRY,
} from '../../js/cact-writer.js';

// ------------------------------------------------------------ independent reader

const HEADER_NAMES = ['tag', 'tensorCount', 'codebookLength', 'kvWindow', 'kvBits', 'vocabulary',
  'hidden', 'queryHeads', 'kvHeads', 'layers', 'headDimension', 'maximumSequence',
  'hadamardDimension', 'lanes', 'engramSlots', 'engramSubDimension', 'engramTables', 'engramTaps',
  'engramDilation', 'orderCount', 'o0', 'o1', 'o2', 'o3', 'siteCount', 's0', 's1', 's2', 's3'];

function readArchive(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const header = {};
  HEADER_NAMES.forEach((name, i) => { header[name] = view.getUint32(i * 4, true); });
  header.ropeTheta = view.getFloat32(116, true);
  const codebook = [];
  for (let i = 0; i < header.codebookLength; i++) codebook.push(view.getFloat32(120 + i * 4, true));
  const recordsAt = 120 + header.codebookLength * 4;
  const records = [];
  for (let i = 0; i < header.tensorCount; i++) {
    const at = recordsAt + i * 44;
    const rank = view.getUint8(at + 1);
    records.push({
      dtype: view.getUint8(at), rank, pad: view.getUint16(at + 2, true),
      dims: [0, 1, 2, 3].map((k) => view.getUint32(at + 4 + k * 4, true)),
      shape: Array.from({ length: rank }, (_, k) => view.getUint32(at + 4 + k * 4, true)),
      offset: Number(view.getBigUint64(at + 20, true)),
      bytes: Number(view.getBigUint64(at + 28, true)),
      group: view.getUint32(at + 36, true),
      bits: view.getUint32(at + 40, true),
    });
  }
  return { view, header, codebook, records, directoryEnd: recordsAt + header.tensorCount * 44 };
}

function halfToNumber(h) {
  const sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 31, mant = h & 1023;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 31) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

function fp16Values(bytes, rec) {
  const view = new DataView(bytes.buffer, bytes.byteOffset + rec.offset, rec.bytes);
  return Array.from({ length: rec.bytes / 2 }, (_, i) => halfToNumber(view.getUint16(i * 2, true)));
}

// Hadamard matrix entry (Sylvester order): (-1)^popcount(i & j) / sqrt(g).
function hadamard(g) {
  const h = new Float64Array(g * g), s = 1 / Math.sqrt(g);
  for (let i = 0; i < g; i++) {
    for (let j = 0; j < g; j++) {
      let v = i & j, parity = 0;
      while (v) { parity ^= v & 1; v >>= 1; }
      h[i * g + j] = parity ? -s : s;
    }
  }
  return h;
}

// Level values a record's indices select, from the header codebook (divided by
// the embedding's group), rescaled to this record's group; ternary by crumb.
function recordLevels(archive, rec) {
  const g0 = archive.records[0].group;
  const rescale = Math.sqrt(g0 / rec.group);
  if (rec.bits === 5) {
    const c = 1.2240064 / Math.sqrt(rec.group);
    return { streamBits: 2, byIndex: [0, c, NaN, -c], sorted: [-c, 0, c], codeOfSorted: [3, 0, 1] };
  }
  const start = { 2: 0, 3: 4, 4: 12 }[rec.bits];
  const levels = archive.codebook.slice(start, start + (1 << rec.bits)).map((v) => v * rescale);
  return { streamBits: rec.bits, byIndex: levels, sorted: levels, codeOfSorted: levels.map((_, i) => i) };
}

// Reads index k of a row with a 16-bit window, as the seed describes.
function indexAt(bytes, rowStart, k, bits) {
  const bit = k * bits, at = rowStart + (bit >> 3);
  const window = bytes[at] | ((bytes[at + 1] ?? 0) << 8);
  return (window >> (bit & 7)) & ((1 << bits) - 1);
}

/** Dense float64 [rows][cols] of a CQ record plus its raw indices and norms. */
function dequantise(bytes, archive, rec) {
  const [rows, cols] = rec.shape;
  const { streamBits, byIndex } = recordLevels(archive, rec);
  const padded = Math.ceil(cols / rec.group) * rec.group, groups = padded / rec.group;
  const rowBytes = (padded * streamBits) / 8;
  const normView = new DataView(bytes.buffer, bytes.byteOffset + rec.offset + rows * rowBytes);
  const H = hadamard(rec.group);
  const dense = [], indices = [], norms = [];
  for (let r = 0; r < rows; r++) {
    const row = new Float64Array(padded), idxRow = [];
    for (let gi = 0; gi < groups; gi++) {
      const norm = halfToNumber(normView.getUint16((r * groups + gi) * 2, true));
      norms.push(norm);
      const rotated = [];
      for (let k = 0; k < rec.group; k++) {
        const idx = indexAt(bytes, rec.offset + r * rowBytes, gi * rec.group + k, streamBits);
        idxRow.push(idx);
        rotated.push(byIndex[idx] * norm);
      }
      for (let j = 0; j < rec.group; j++) {
        let sum = 0;
        for (let k = 0; k < rec.group; k++) sum += rotated[k] * H[k * rec.group + j];
        row[gi * rec.group + j] = sum;
      }
    }
    dense.push(row.subarray(0, cols));
    indices.push(idxRow);
  }
  return { dense, indices, norms, H, padded, groups };
}

// ------------------------------------------------------------ fixtures

const TOKENS = makeTestTokenizerBlob(syntheticPieces(300));
const tiny = (extra = {}) => writeCact({ geometry: TINY_GEOMETRY, seed: 5, tokenizer: TOKENS, heads: true, ...extra });

function gaussianMatrix(count, seed) {
  // Box-Muller over a small LCG: independent of the writer's generator.
  let state = seed >>> 0;
  const uniform = () => { state = (Math.imul(state, 1664525) + 1013904223) >>> 0; return (state + 1) / 4294967297; };
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
  return out;
}

// ------------------------------------------------------------ tests

test('tokenizer blob helper lays out header and pieces as the seed says', () => {
  const blob = makeTestTokenizerBlob(['<pad>', '</s>', '<s>', '<unk>', { piece: 'é', score: 1.5, type: 0 }, '<0x41>']);
  const view = new DataView(blob.buffer);
  assert.deepEqual([0, 1, 2, 3, 4].map((i) => view.getUint32(i * 4, true)), [6, 0, 1, 2, 3]);
  let at = 24;
  const pieces = [];
  for (let i = 0; i < 6; i++) {
    const len = view.getUint16(at + 5, true);
    pieces.push([view.getFloat32(at, true), view.getUint8(at + 4), new TextDecoder().decode(blob.subarray(at + 7, at + 7 + len))]);
    at += 7 + len;
  }
  assert.equal(at, blob.length);
  assert.deepEqual(pieces.map((p) => p[1]), [2, 2, 2, 1, 0, 4]);
  assert.deepEqual(pieces[4], [1.5, 0, 'é']);
});

test('same options give identical bytes; another seed gives different weights', () => {
  const a = tiny(), b = tiny(), c = tiny({ seed: 6 });
  assert.deepEqual(a, b);
  assert.equal(a.length, c.length);
  assert.notDeepEqual(a, c);
  // Only blobs differ: header, codebook and directory are seed-independent.
  const dirEnd = readArchive(a).directoryEnd;
  assert.deepEqual(a.subarray(0, dirEnd), c.subarray(0, dirEnd));
});

test('header fields read back', () => {
  const bytes = tiny({ kvWindow: 48, kvBits: 4 });
  const { header } = readArchive(bytes);
  const g = TINY_GEOMETRY;
  assert.equal(header.tag, 0x05e12a83);
  assert.equal(header.tensorCount, canonicalTensors({ ...g, vocabulary: 300 }, { heads: true }).length);
  assert.equal(header.codebookLength, 28);
  assert.equal(header.kvWindow, 48);
  assert.equal(header.kvBits, 4);
  assert.equal(header.vocabulary, 300, 'vocabulary comes from the tokenizer');
  for (const key of ['hidden', 'queryHeads', 'kvHeads', 'layers', 'headDimension', 'maximumSequence',
    'hadamardDimension', 'lanes', 'engramSlots', 'engramSubDimension', 'engramTables', 'engramTaps',
    'engramDilation', 'orderCount', 'siteCount']) {
    assert.equal(header[key], g[key], key);
  }
  assert.deepEqual([header.o0, header.o1, header.o2, header.o3], [2, 3, 0, 0]);
  assert.deepEqual([header.s0, header.s1, header.s2, header.s3], [0, 1, 0, 0]);
  assert.equal(header.ropeTheta, g.ropeTheta);
});

test('codebooks are sorted Lloyd-Max Gaussian levels over sqrt(group of the embedding)', () => {
  // Textbook Max (1960) quantiser for a unit Gaussian (positive halves); the
  // reference fits its levels to 400000 samples, which moves them (mostly the
  // tails) by up to about 0.02.
  const max = { 2: [0.4528, 1.5104], 3: [0.2451, 0.7560, 1.3439, 2.1520],
    4: [0.1284, 0.3881, 0.6568, 0.9424, 1.2562, 1.6180, 2.0690, 2.7326] };
  for (const group of [32, 128]) {
    const archive = readArchive(tiny({ group }));
    const starts = { 2: 0, 3: 4, 4: 12 };
    for (const bits of [2, 3, 4]) {
      const levels = archive.codebook.slice(starts[bits], starts[bits] + (1 << bits)).map((v) => v * Math.sqrt(group));
      for (let i = 1; i < levels.length; i++) assert.ok(levels[i] > levels[i - 1], 'ascending');
      const half = levels.length / 2;
      max[bits].forEach((m, i) => {
        assert.ok(Math.abs(levels[half + i] - m) < 0.03, `CQ${bits} level +${i}: ${levels[half + i]} vs ${m}`);
        assert.ok(Math.abs(-levels[half - 1 - i] - m) < 0.03, `CQ${bits} level -${i}`);
      });
    }
  }
});

test('records: ranks, shapes, dtypes, 64-byte alignment, zero fill, no overlap', () => {
  const bytes = tiny();
  const archive = readArchive(bytes);
  const expected = canonicalTensors({ ...TINY_GEOMETRY, vocabulary: 300 }, { heads: true });
  assert.equal(archive.records.length, expected.length);
  let end = archive.directoryEnd;
  archive.records.forEach((rec, i) => {
    const t = expected[i];
    assert.equal(rec.dtype, { fp16: 1, cq: 3, raw: 4 }[t.kind], t.name);
    assert.equal(rec.rank, t.shape.length, t.name);
    assert.deepEqual(rec.shape, t.shape, t.name);
    assert.deepEqual(rec.dims.slice(rec.rank), new Array(4 - rec.rank).fill(0), `${t.name} unused dims`);
    assert.equal(rec.pad, 0);
    assert.equal(rec.offset % 64, 0, `${t.name} aligned`);
    assert.ok(rec.offset >= end && rec.offset - end < 64, `${t.name} packed in order`);
    assert.ok(bytes.subarray(end, rec.offset).every((b) => b === 0), `${t.name} zero fill`);
    if (t.kind === 'fp16') assert.equal(rec.bytes, 2 * t.shape.reduce((a, b) => a * b, 1));
    if (t.kind !== 'cq') assert.deepEqual([rec.group, rec.bits], [0, 0]);
    end = rec.offset + rec.bytes;
  });
  assert.equal(end, bytes.length, 'file ends with the last blob');
  const tok = archive.records.at(-1);
  assert.equal(tok.rank, 0);
  assert.deepEqual(bytes.subarray(tok.offset, tok.offset + tok.bytes), TOKENS);
});

test('CQ blob lengths follow the seed formula for every width and group', () => {
  for (const [bits, group] of [[2, 32], [3, 64], [4, 128], ['ternary', 256]]) {
    const archive = readArchive(tiny({ bits, group }));
    for (const rec of archive.records.filter((r) => r.dtype === 3)) {
      const [rows, cols] = rec.shape;
      const padded = Math.ceil(cols / group) * group;
      const stream = bits === 'ternary' ? 2 : bits;
      assert.equal(rec.bits, bits === 'ternary' ? 5 : bits);
      assert.equal(rec.group, group);
      assert.equal(rec.bytes, rows * padded * stream / 8 + rows * (padded / group) * 2);
    }
  }
});

// Quantises one matrix (q_proj of layer 0, [64, 64]) from given Gaussian
// weights and checks the record against a float64 brute-force quantiser.
function roundTrip(bits, group, cols = 64) {
  const geometry = { ...TINY_GEOMETRY, hidden: cols, hadamardDimension: 1 << Math.ceil(Math.log2(cols)) };
  const given = new Map();
  const weights = (name, shape) => {
    if (name !== 'layer00.q_proj') return null;
    const w = gaussianMatrix(shape[0] * shape[1], 99);
    given.set(name, w);
    return w;
  };
  const bytes = writeCact({ geometry, seed: 1, tokenizer: TOKENS, bits, group, weights });
  const archive = readArchive(bytes);
  const index = canonicalTensors({ ...geometry, vocabulary: 300 }).findIndex((t) => t.name === 'layer00.q_proj');
  const rec = archive.records[index];
  const w = given.get('layer00.q_proj');
  const { dense, indices, norms, H, padded, groups } = dequantise(bytes, archive, rec);
  const { sorted, codeOfSorted } = recordLevels(archive, rec);
  let err = 0, energy = 0, checked = 0, nearTies = 0;
  const [rows] = rec.shape;
  for (let r = 0; r < rows; r++) {
    const row = new Float64Array(padded);
    for (let c = 0; c < cols; c++) row[c] = w[r * cols + c];
    for (let c = 0; c < cols; c++) { err += (dense[r][c] - row[c]) ** 2; energy += row[c] ** 2; }
    for (let gi = 0; gi < groups; gi++) {
      const rot = [];
      for (let j = 0; j < group; j++) {
        let s = 0;
        for (let k = 0; k < group; k++) s += row[gi * group + k] * H[k * group + j];
        rot.push(s);
      }
      const norm = Math.sqrt(rot.reduce((a, v) => a + v * v, 0));
      const stored = norms[r * groups + gi];
      const ulp = 2 ** (Math.floor(Math.log2(norm)) - 10);
      assert.ok(Math.abs(stored - norm) <= ulp / 2 + 1e-12, `norm ${stored} is fp16 of ${norm}`);
      for (let j = 0; j < group; j++) {
        const u = rot[j] / Math.max(norm, 1e-12);
        const dist = sorted.map((l) => Math.abs(u - l));
        let best = 0;
        for (let i = 1; i < dist.length; i++) if (dist[i] < dist[best]) best = i;
        const second = Math.min(...dist.filter((_, i) => i !== best));
        if (second - dist[best] < 1e-9) { nearTies++; continue; } // float64 summation order decides
        assert.equal(indices[r][gi * group + j], codeOfSorted[best], `row ${r} column ${gi * group + j}`);
        checked++;
      }
    }
  }
  return { relative: err / energy, checked, nearTies };
}

test('CQ round trip: nearest-level indices, fp16 norms, expected distortion', () => {
  // Lloyd-Max distortion of a unit Gaussian: 0.1175 (2-bit), 0.03454 (3),
  // 0.009497 (4), 0.1902 (3 levels): coordinates of a rotated random group are
  // near Gaussian, so the relative error lands near these.
  const expected = { 2: [0.09, 0.15], 3: [0.025, 0.046], 4: [0.006, 0.014], ternary: [0.15, 0.24] };
  for (const [bits, group] of [[2, 32], [3, 64], [4, 64], ['ternary', 32], [2, 128]]) {
    const { relative, checked, nearTies } = roundTrip(bits, group, group === 128 ? 96 : 64);
    const [lo, hi] = expected[bits];
    assert.ok(relative > lo && relative < hi, `${bits}-bit group ${group}: relative error ${relative}`);
    assert.ok(checked > 4000 && nearTies < 5, `${checked} checked, ${nearTies} near ties`);
  }
});

test('ternary records hold only crumbs 3, 0, 1', () => {
  const bytes = tiny({ bits: 'ternary' });
  const archive = readArchive(bytes);
  const counts = [0, 0, 0, 0];
  for (const rec of archive.records.filter((r) => r.dtype === 3)) {
    assert.equal(rec.bits, 5);
    const [rows, cols] = rec.shape;
    const padded = Math.ceil(cols / rec.group) * rec.group;
    for (let i = 0; i < rows * padded / 4; i++) {
      const byte = bytes[rec.offset + i];
      for (let k = 0; k < 4; k++) counts[(byte >> (2 * k)) & 3]++;
    }
  }
  assert.equal(counts[2], 0, 'crumb 2 never appears');
  assert.ok(counts[0] > 0 && counts[1] > 0 && counts[3] > 0, `all three trits used: ${counts}`);
  // Signs balance for random weights.
  assert.ok(Math.abs(counts[1] - counts[3]) < 0.05 * (counts[1] + counts[3]));
});

test('per-tensor bit maps and group functions', () => {
  const calls = [];
  const bits = (name, index) => {
    calls.push([name, index]);
    if (name.endsWith('.k_proj')) return 'ternary';
    if (name.endsWith('.q_proj')) return 3;
    return releasedBits(name);
  };
  const group = (name) => (name.endsWith('out_proj') ? 32 : name === 'embedding' ? 64 : 128);
  const bytes = writeCact({ geometry: TINY_GEOMETRY, seed: 2, tokenizer: TOKENS, bits, group });
  const archive = readArchive(bytes);
  const names = canonicalTensors({ ...TINY_GEOMETRY, vocabulary: 300 }).map((t) => t.name);
  assert.ok(calls.length > 0);
  for (const [name, index] of calls) assert.equal(names[index], name, 'bits() gets the canonical name and index');
  archive.records.forEach((rec, i) => {
    if (rec.dtype !== 3) return;
    const name = names[i];
    const want = name.endsWith('.k_proj') ? 5 : name.endsWith('.q_proj') ? 3 : releasedBits(name);
    assert.equal(rec.bits, want, name);
    assert.equal(rec.group, group(name), name);
  });
  assert.equal(archive.records[names.indexOf('mhc.phi_res')].bits, 4);
  assert.equal(archive.records[names.indexOf('engram0.tables')].bits, 2);
  // Header levels are for the embedding's group (64): CQ2 top level * 8.
  assert.ok(Math.abs(archive.codebook[3] * 8 - 1.51) < 0.01);
  // Mixed records still dequantise to their dense values' scale.
  const q = archive.records[names.indexOf('layer01.out_proj')];
  const { dense } = dequantise(bytes, archive, q);
  const rms = Math.sqrt(dense.flatMap((r) => Array.from(r)).reduce((a, v) => a + v * v, 0) / (q.shape[0] * q.shape[1]));
  assert.ok(rms > 0.7 / Math.sqrt(q.shape[1]) && rms < 1.3 / Math.sqrt(q.shape[1]), `out_proj rms ${rms}`);
});

test('released geometry: 405 tensors with heads, 398 without, layout of the real size', () => {
  assert.equal(canonicalTensors(RELEASED_GEOMETRY, { heads: true }).length, 405);
  assert.equal(canonicalTensors(RELEASED_GEOMETRY, { heads: false }).length, 398);
  const tokenizer = makeTestTokenizerBlob(syntheticPieces(8192));
  const started = Date.now();
  const bytes = writeCact({ geometry: RELEASED_GEOMETRY, seed: 1, heads: true, tokenizer, bits: releasedBits });
  const elapsed = Date.now() - started;
  const archive = readArchive(bytes);
  assert.equal(archive.header.tensorCount, 405);
  const tok = archive.records[404];
  assert.equal(tok.dtype, 4);
  assert.equal(tok.offset + tok.bytes, bytes.length);
  // Spec section 1: 13,737,807 bytes; only the tokenizer blob differs, so the
  // released archive's tokenizer must be this many bytes: a 8192-piece dump
  // (24 + 7 per piece + surfaces) of about 7 surface bytes per piece.
  const releasedTokenizer = 13737807 - tok.offset;
  assert.ok(releasedTokenizer > 24 + 7 * 8192 + 3 * 8192 && releasedTokenizer < 24 + 7 * 8192 + 12 * 8192,
    `released tokenizer would be ${releasedTokenizer} bytes`);
  assert.equal(archive.records[0].bits, 4);
  assert.equal(archive.records[1 + 1].bits, 2);
  assert.ok(elapsed < 20000, `released archive took ${elapsed} ms`);
  const manifest = archive.records[397];
  assert.deepEqual(fp16Values(bytes, manifest), [1, 2]);
  assert.deepEqual(archive.records[398].shape, [4, 512]);
  assert.deepEqual(archive.records[399].shape, [128, 2048]);
  assert.deepEqual(archive.records[402].shape, [1, 4096]);
});

test('heads option selects manifest codes in canonical order', () => {
  for (const [heads, codes] of [[['confidence'], [2]], [['confidence', 'contrastive'], [1, 2]], [false, null]]) {
    const bytes = tiny({ heads });
    const archive = readArchive(bytes);
    const base = 1 + 2 * 14 + 9 + 2 * 4 + 1;
    if (!codes) { assert.equal(archive.records.length, base + 1); continue; }
    assert.equal(archive.records.length, base + 1 + 1 + 3 * codes.length);
    assert.deepEqual(fp16Values(bytes, archive.records[base]), codes);
    const confidenceProbes = archive.records[base + 1 + 3 * codes.indexOf(2)];
    assert.deepEqual(confidenceProbes.shape, [8, 64]);
  }
});

test('every parameter is non-trivial and in its sane range', () => {
  const bytes = tiny();
  const archive = readArchive(bytes);
  const tensors = canonicalTensors({ ...TINY_GEOMETRY, vocabulary: 300 }, { heads: true });
  tensors.forEach((t, i) => {
    const rec = archive.records[i];
    const leaf = t.name.slice(t.name.lastIndexOf('.') + 1);
    if (t.kind === 'fp16') {
      const v = fp16Values(bytes, rec);
      assert.ok(v.every(Number.isFinite), t.name);
      assert.ok(v.some((x) => x !== 0), `${t.name} not all zero`);
      if (v.length > 1 && leaf !== 'manifest') assert.ok(new Set(v).size > Math.min(v.length / 2, 200), `${t.name} varied`);
      const meanAbs = v.reduce((a, x) => a + Math.abs(x), 0) / v.length;
      if (/norm/.test(leaf)) assert.ok(meanAbs < 0.3, `${t.name} scales near 0 (zcrms adds 1)`);
      if (/^d[123]$/.test(leaf)) {
        assert.ok(v.every((x) => Math.abs(x) >= 0.74 && Math.abs(x) <= 1.26), t.name);
        assert.ok(v.some((x) => x < 0) && v.some((x) => x > 0), `${t.name} signs`);
      }
      if (/^a_/.test(leaf)) assert.ok(v.every((x) => x >= 0.099 && x <= 1.001), t.name);
      if (/^b_/.test(leaf)) assert.ok(meanAbs < 0.3, t.name);
      if (leaf === 'taps') assert.ok(v.some((x) => x < 0) && meanAbs > 0.1, `${t.name} not identity`);
    } else if (t.kind === 'cq') {
      const { dense, indices, norms } = dequantise(bytes, archive, rec);
      assert.ok(norms.every((n) => n > 0), `${t.name} norms`);
      assert.ok(new Set(indices.flat()).size === (rec.bits === 5 ? 3 : 1 << rec.bits), `${t.name} uses every level`);
      const cols = rec.shape[1];
      const rms = Math.sqrt(dense.reduce((a, r) => a + r.reduce((b, x) => b + x * x, 0), 0) / (rec.shape[0] * cols));
      const want = leaf === 'tables' ? 1 : 1 / Math.sqrt(cols);
      assert.ok(rms > 0.75 * want && rms < 1.25 * want, `${t.name} rms ${rms}, want about ${want}`);
    }
  });
});

test('rejects inconsistent geometry and tokenizer', () => {
  assert.throws(() => writeCact({ geometry: TINY_GEOMETRY, seed: 1 }), /tokenizer/);
  assert.throws(() => writeCact({ geometry: { ...TINY_GEOMETRY, vocabulary: 512 }, tokenizer: TOKENS }), /vocabulary 512 != tokenizer piece count 300/);
  assert.throws(() => writeCact({ geometry: { ...TINY_GEOMETRY, kvHeads: 3 }, tokenizer: TOKENS }), /kvHeads/);
  assert.throws(() => writeCact({ geometry: { ...TINY_GEOMETRY, sites: [1, 1] }, tokenizer: TOKENS }), /sites/);
  assert.throws(() => writeCact({ geometry: { ...TINY_GEOMETRY, hadamardDimension: 48 }, tokenizer: TOKENS }), /hadamardDimension/);
  assert.throws(() => tiny({ bits: 5 }), /bits 5/);
  assert.throws(() => tiny({ group: 48 }), /group 48/);
  assert.throws(() => tiny({ weights: (name) => (name === 'final_norm' ? new Float32Array(3) : null) }), /final_norm/);
});

test('an exact midpoint between two levels picks the lower one', () => {
  for (const bits of [2, 3, 4]) {
    const archive = readArchive(tiny());
    const start = { 2: 0, 3: 4, 4: 12 }[bits];
    const levels = archive.codebook.slice(start, start + (1 << bits));
    for (let i = 0; i + 1 < levels.length; i++) {
      const mid = (levels[i] + levels[i + 1]) / 2; // exact in float64 for f32 levels
      assert.equal(nearestLevel(levels, mid), i, `CQ${bits} midpoint ${i}`);
      assert.equal(nearestLevel(levels, mid + 1e-12), i + 1);
    }
    assert.equal(nearestLevel(levels, -1), 0);
    assert.equal(nearestLevel(levels, 1), levels.length - 1);
  }
});

test('writeRandomArchive writes the tiny archive with heads and the fixture tokenizer when it can', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'cact-'));
  try {
    const path = join(dir, 'tiny.cact');
    const info = await writeRandomArchive(path, { tiny: true });
    const bytes = new Uint8Array(await readFile(path));
    assert.equal(info.bytes, bytes.length);
    const archive = readArchive(bytes);
    const tok = archive.records.at(-1);
    const pieces = new DataView(bytes.buffer, tok.offset).getUint32(0, true);
    assert.equal(archive.header.vocabulary, pieces);
    assert.equal(archive.header.tensorCount, info.tensors);
    assert.equal(archive.header.hidden, TINY_GEOMETRY.hidden);
    const base = 1 + 14 * TINY_GEOMETRY.layers + 9 + 4 * TINY_GEOMETRY.siteCount + 1;
    assert.deepEqual(fp16Values(bytes, archive.records[base]), [1, 2]);
    assert.deepEqual(bytes, writeCact({ geometry: TINY_GEOMETRY, seed: 1, heads: true, kvBits: 8,
      tokenizer: bytes.slice(tok.offset, tok.offset + tok.bytes) }), 'seed 1, both heads');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
