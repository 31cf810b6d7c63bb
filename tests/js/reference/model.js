// The float64 reference forward pass of Needle 2 (the test oracle): spec
// needle2-model.md sections 3 and 5, one function per step, in the order the
// spec lists them, positions processed one at a time as a decoder would.
// No optimisation beyond caching each dequantised matrix once per archive.
//
//   referenceForward(archive, ids, { window, sinks, kvQuant, a8, q8, valid })
//     -> { logits: Float64Array[] (one per position), cells: Float64Array[][], kvIndices }
//
// archive comes from readArchive (archive.js). Options:
//   window  0 or absent: the archive's window (section 5, kvWindow == 0 formula
//           included); a positive number: that window; Infinity: no window.
//   sinks   the number of leading positions that stay attendable forever (0).
//   kvQuant absent/true: CQ-quantise K and V when the header's kvBits is 2/3/4
//           (kvBits 8 runs exact); false: never; 2/3/4: force that width.
//   a8      true: per-vector int8 fake quantisation at the four A8 points of
//           section 5 (default false: the spec makes it optional).
//   q8      true: every CQ product but the mHC Phi ones in the makers' engine
//           numerics (q8.js), which quantise the product's input themselves,
//           so the A8 points before them are left out (the engine's fast mode).
//   kvIndices true: also return kvIndices[layer][position][kv head] = { k, v },
//           the CQ level index of every rotated K and V value (kvBits 2/3/4).
//   valid   optional boolean per position (the reference's padding mask): an
//           invalid position is never attended to and counts as absent for
//           the engram n-gram and tap rules. Default: every position valid.

import { denseMatrix, matrixRow, roundToHalf } from './archive.js';
import { fwht } from './hadamard.js';
import { matVecQ8 } from './q8.js';

const EPS = 1e-6;
const SINKHORN_ITERATIONS = 20;
const KV_GROUP = 64;
const ENGRAM_SEED = 0x9e3779b9;
const ENGRAM_PRIME = 0x01000193;
const KV_BUDGET_BYTES = 12058624; // 11.5 MiB
const CODEBOOK_OFFSET = { 2: 0, 3: 4, 4: 12 };

export const sigmoid = (z) => 1 / (1 + Math.exp(-z));
const silu = (z) => z * sigmoid(z);

// ---- building blocks ------------------------------------------------------

/** y = W x for a rank-2 tensor (rows = outputs). */
export function matVec(tensor, x) {
  const { rows, cols, data } = denseMatrix(tensor);
  if (x.length !== cols) throw new Error(`matVec: ${x.length} inputs for ${cols} columns`);
  const y = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let c = 0; c < cols; c++) s += data[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

/** W x as the options ask: a CQ W in the engine's numerics when state.q8,
 *  its input A8-quantised first when state.a8 and not q8. */
export function product(state, tensor, x) {
  if (state.q8 && tensor.packed) return matVecQ8(tensor, x);
  return matVec(tensor, state.a8 && !state.q8 ? fakeQuantA8(x) : x);
}

/** Rows [first, first + count) of W times x: one layer's slice of a flattened Φ matrix. */
function rowsTimes(tensor, first, count, x) {
  const { cols, data } = denseMatrix(tensor);
  const y = new Float64Array(count);
  for (let r = 0; r < count; r++) {
    let s = 0;
    for (let c = 0; c < cols; c++) s += data[(first + r) * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

/** rms_unit(v) = v / sqrt(mean(v^2) + 1e-6), no scale. */
export function rmsUnit(v) {
  let ms = 0;
  for (let i = 0; i < v.length; i++) ms += v[i] * v[i];
  const inv = 1 / Math.sqrt(ms / v.length + EPS);
  return Float64Array.from(v, (x) => x * inv);
}

/** zcrms(v, s) = (1 + s) * rms_unit(v). */
export function zcrms(v, scale) {
  const u = rmsUnit(v);
  return Float64Array.from(u, (x, i) => (1 + scale[i]) * x);
}

function roundHalfEven(x) {
  const f = Math.floor(x);
  const frac = x - f;
  if (frac > 0.5) return f + 1;
  if (frac < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** A8 fake quantisation of one vector: scale = absmax/127, round half to even, clip [-128, 127]. */
export function fakeQuantA8(v) {
  let absmax = 0;
  for (let i = 0; i < v.length; i++) absmax = Math.max(absmax, Math.abs(v[i]));
  const scale = absmax > 0 ? absmax / 127 : 1;
  return Float64Array.from(v, (x) => Math.min(127, Math.max(-128, roundHalfEven(x / scale))) * scale);
}

function logSumExp(values) {
  const m = Math.max(...values);
  if (m === -Infinity) return -Infinity;
  let s = 0;
  for (const v of values) s += Math.exp(v - m);
  return m + Math.log(s);
}

/** sinkhorn(A) for an n x n row-major matrix of logits: 20 x {rows, then columns} in log space, then exp. */
export function sinkhorn(logits, n) {
  const a = Float64Array.from(logits);
  for (let it = 0; it < SINKHORN_ITERATIONS; it++) {
    for (let r = 0; r < n; r++) {
      const lse = logSumExp(Array.from({ length: n }, (_, c) => a[r * n + c]));
      for (let c = 0; c < n; c++) a[r * n + c] -= lse;
    }
    for (let c = 0; c < n; c++) {
      const lse = logSumExp(Array.from({ length: n }, (_, r) => a[r * n + c]));
      for (let r = 0; r < n; r++) a[r * n + c] -= lse;
    }
  }
  return Float64Array.from(a, Math.exp);
}

/** RoPE at position p, half split: out[m] = x[m]c - x[m+h]s, out[m+h] = x[m+h]c + x[m]s, f = theta^(-2m/hd). */
export function rope(x, p, theta) {
  const half = x.length / 2;
  const out = new Float64Array(x.length);
  for (let m = 0; m < half; m++) {
    const angle = p * theta ** ((-2 * m) / x.length);
    const c = Math.cos(angle);
    const s = Math.sin(angle);
    out[m] = x[m] * c - x[m + half] * s;
    out[m + half] = x[m + half] * c + x[m] * s;
  }
  return out;
}

/** hadamard_mlp(h): pad to N; z = HN(d1 h); z = HN silu(d2 z); first d entries of d3 z. */
export function hadamardMlp(h, d1, d2, d3) {
  const N = d1.length;
  const z0 = new Float64Array(N);
  for (let i = 0; i < h.length; i++) z0[i] = d1[i] * h[i];
  const z1 = fwht(z0);
  const z2 = fwht(Float64Array.from(z1, (z, i) => silu(d2[i] * z)));
  return Float64Array.from({ length: h.length }, (_, i) => d3[i] * z2[i]);
}

/** Engram slot of table t for the n-gram `recent` = [T[p], T[p-1], ...] (missing tokens are 0). */
export function engramSlot(t, recent, slots) {
  let acc = Math.imul(ENGRAM_SEED, t + 1) >>> 0;
  for (const token of recent) acc = Math.imul((acc ^ token) >>> 0, ENGRAM_PRIME) >>> 0;
  acc = (acc ^ (acc >>> 15)) >>> 0;
  return acc % slots;
}

/** The nearest level to u; a tie goes to the lower level. */
export function snapToLevel(u, levels) {
  let best = levels[0];
  for (const l of levels) {
    const dl = Math.abs(u - l);
    const db = Math.abs(u - best);
    if (dl < db || (dl === db && l < best)) best = l;
  }
  return best;
}

/** CQ quantisation of one K or V head vector (section 5): groups of 64, H64, snap, fp16(norm), H64 back.
 *  indices, when given, receives the level index of every rotated value (the padded length). */
export function kvQuantise(x, levels, indices = null) {
  const padded = Math.ceil(x.length / KV_GROUP) * KV_GROUP;
  const out = new Float64Array(padded);
  for (let g0 = 0; g0 < padded; g0 += KV_GROUP) {
    const group = new Float64Array(KV_GROUP);
    for (let i = 0; i < KV_GROUP && g0 + i < x.length; i++) group[i] = x[g0 + i];
    const r = fwht(group);
    let n = 0;
    for (const v of r) n += v * v;
    n = Math.sqrt(n);
    const scale = roundToHalf(n);
    const snapped = Float64Array.from(r, (v) => {
      const level = snapToLevel(v / Math.max(n, 1e-12), levels);
      indices?.push(levels.indexOf(level));
      return level * scale;
    });
    out.set(fwht(snapped), g0);
  }
  return out.slice(0, x.length);
}

/** K/V levels: the header's levels for kvBits times sqrt(g/64), or null when K/V run exact. */
export function kvLevels(archive, kvQuant = true) {
  const bits = typeof kvQuant === 'number' ? kvQuant : kvQuant === false ? 8 : archive.geometry.kvBits;
  if (![2, 3, 4].includes(bits)) return null;
  const o = CODEBOOK_OFFSET[bits];
  const rescale = Math.sqrt(archive.weightGroup / KV_GROUP);
  return Float64Array.from(archive.codebook.subarray(o, o + (1 << bits)), (l) => l * rescale);
}

/** The attention window W of section 5 (integer division throughout). */
export function archiveWindow(g) {
  if (g.kvWindow) return g.kvWindow;
  const kvd = g.kvHeads * g.headDimension;
  const d = g.hidden;
  const perPos = g.layers * (2 * kvd + 2 * Math.floor(kvd / 32) * 4) + g.siteCount * (d + Math.floor(d / 32) * 4);
  const w = Math.floor(Math.floor(KV_BUDGET_BYTES / perPos) / 32) * 32;
  return Math.max(160, Math.min(w, g.maximumSequence));
}

const laneMean = (X) => Float64Array.from(X[0], (_, c) => X.reduce((s, lane) => s + lane[c], 0) / X.length);
const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);

// ---- the steps of section 3 ------------------------------------------------

/** x = E[tok] * sqrt(d). */
function embed(archive, tok) {
  const d = archive.geometry.hidden;
  return Float64Array.from(matrixRow(archive.weights.embedding, tok), (v) => v * Math.sqrt(d));
}

/** hpre, hpost and R of layer i from nx = rms_unit(concat lanes), with the lane offsets. */
function mhcCoefficients(archive, i, X) {
  const n = archive.geometry.lanes;
  const m = archive.weights.mhc;
  const nx = rmsUnit(Float64Array.from(X.flatMap((lane) => Array.from(lane))));
  const c = i % n;
  const pre = rowsTimes(m.phiPre, i * n, n, nx);
  const post = rowsTimes(m.phiPost, i * n, n, nx);
  const res = rowsTimes(m.phiRes, i * n * n, n * n, nx);
  const hpre = Float64Array.from(pre, (v, j) => sigmoid(m.aPre[i] * v + m.bPre[i * n + j] + (j === c ? 4 : -4)));
  const hpost = Float64Array.from(post, (v, j) => 2 * sigmoid(m.aPost[i] * v + m.bPost[i * n + j] + (j === c ? 0 : -4)));
  const R = sinkhorn(Float64Array.from(res, (v, ab) => m.aRes[i] * v + m.bRes[i * n * n + ab]), n);
  return { hpre, hpost, R };
}

/** u = sum_j hpre[j] X[j]. */
function combineLanes(hpre, X) {
  return Float64Array.from(X[0], (_, c) => X.reduce((s, lane, j) => s + hpre[j] * lane[c], 0));
}

/** X'[a] = sum_b R[a][b] X[b] + hpost[a] y. */
function mixLanes(R, X, hpost, y) {
  const n = X.length;
  return X.map((_, a) => Float64Array.from(y, (yc, c) => {
    let s = hpost[a] * yc;
    for (let b = 0; b < n; b++) s += R[a * n + b] * X[b][c];
    return s;
  }));
}

/** Engram e, k and v0 of site s at position p (memoised: every later position reuses v0). */
function engramAt(archive, state, s, p) {
  const memo = state.engram[s];
  if (memo.has(p)) return memo.get(p);
  const g = archive.geometry;
  const site = archive.weights.sites[s];
  const heads = g.engramTables / g.orderCount;
  const sub = g.engramSubDimension;
  const e = new Float64Array(g.engramTables * sub);
  for (let o = 0; o < g.orderCount; o++) {
    const order = g.orders[o];
    const recent = Array.from({ length: order }, (_, j) => (p - j >= 0 ? state.ids[p - j] : 0));
    const oldest = p - (order - 1);
    const exists = oldest >= 0 && state.valid[oldest]; // the whole n-gram exists
    for (let h = 0; h < heads; h++) {
      const t = o * heads + h;
      if (!exists) continue; // the row is multiplied by 0
      const slot = engramSlot(t, recent, g.engramSlots);
      e.set(matrixRow(site.tables, t * g.engramSlots + slot), t * sub);
    }
  }
  const out = { k: product(state, site.key, e), v0: product(state, site.value, e) };
  memo.set(p, out);
  return out;
}

/** ev = sum_m taps[m] * v0(p - m*dilation), absent positions dropped. */
function engramValue(archive, state, s, p) {
  const g = archive.geometry;
  const taps = archive.weights.sites[s].taps;
  const d = g.hidden;
  const ev = new Float64Array(d);
  for (let m = 0; m < g.engramTaps; m++) {
    const t = p - m * g.engramDilation;
    if (t < 0 || !state.valid[t]) continue;
    const v0 = engramAt(archive, state, s, t).v0;
    for (let c = 0; c < d; c++) ev[c] += taps[m * d + c] * v0[c];
  }
  return ev;
}

/** bx = u + sigmoid(rms_unit(u) . rms_unit(ek) / sqrt(d)) * ev. */
function engramInject(archive, state, s, p, u) {
  const d = archive.geometry.hidden;
  const ek = engramAt(archive, state, s, p).k;
  const ev = engramValue(archive, state, s, p);
  const alpha = sigmoid(dot(rmsUnit(u), rmsUnit(ek)) / Math.sqrt(d));
  return Float64Array.from(u, (x, c) => x + alpha * ev[c]);
}

/** Whether a query at p may read the cached position t. */
function allowed(state, p, t) {
  return t <= p && state.valid[t] && (p - t < state.window || t < state.sinks);
}

/** attention_i(h) at position p, appending this position's K and V to the layer's cache. */
function attention(archive, state, i, p, hIn) {
  const g = archive.geometry;
  const lw = archive.weights.layers[i];
  const hd = g.headDimension;
  const q = product(state, lw.q, hIn);
  const k = product(state, lw.k, hIn);
  const v = product(state, lw.v, hIn);
  const head = (vec, j) => vec.subarray(j * hd, (j + 1) * hd);
  const keys = [];
  const values = [];
  for (let j = 0; j < g.kvHeads; j++) {
    const kj = rope(zcrms(head(k, j), lw.kNorm), p, g.ropeTheta);
    const vj = Float64Array.from(head(v, j));
    const index = state.kvIndices && { k: [], v: [] };
    keys.push(state.kvLevels ? kvQuantise(kj, state.kvLevels, index?.k) : kj);
    values.push(state.kvLevels ? kvQuantise(vj, state.kvLevels, index?.v) : vj);
    if (index) (state.kvIndices[i][p] ??= [])[j] = index;
  }
  state.keys[i][p] = keys;
  state.values[i][p] = values;
  const group = g.queryHeads / g.kvHeads;
  const o = new Float64Array(g.queryHeads * hd);
  for (let qh = 0; qh < g.queryHeads; qh++) {
    const qv = rope(zcrms(head(q, qh), lw.qNorm), p, g.ropeTheta);
    const kv = Math.floor(qh / group);
    const ts = [];
    for (let t = 0; t <= p; t++) if (allowed(state, p, t)) ts.push(t);
    const scores = ts.map((t) => dot(qv, state.keys[i][t][kv]) / Math.sqrt(hd));
    const lse = logSumExp(scores);
    ts.forEach((t, n) => {
      const w = Math.exp(scores[n] - lse);
      const vt = state.values[i][t][kv];
      for (let c = 0; c < hd; c++) o[qh * hd + c] += w * vt[c];
    });
  }
  const gate = product(state, lw.gate, hIn); // the gate reads the normed (A8) input h
  const gated = Float64Array.from(o, (x, j) => x * sigmoid(gate[j]));
  return product(state, lw.out, gated);
}

/** block_i(x): gated attention and the Hadamard MLP, each with its residual. */
function block(archive, state, i, p, x) {
  const lw = archive.weights.layers[i];
  const attn = zcrms(attention(archive, state, i, p, zcrms(x, lw.normIn)), lw.postNorm);
  const gateValue = sigmoid(lw.attnGate);
  const x1 = Float64Array.from(x, (v, c) => v + gateValue * attn[c]);
  const mlp = hadamardMlp(zcrms(x1, lw.preHada), lw.d1, lw.d2, lw.d3);
  return Float64Array.from(x1, (v, c) => v + mlp[c]);
}

/** One decode step at position p: the logits and the L+1 cells of this position. */
function step(archive, state, p) {
  const g = archive.geometry;
  const x0 = embed(archive, state.ids[p]);
  let X = Array.from({ length: g.lanes }, () => Float64Array.from(x0));
  const cells = [x0];
  for (let i = 0; i < g.layers; i++) {
    const { hpre, hpost, R } = mhcCoefficients(archive, i, X);
    const u = combineLanes(hpre, X);
    const s = g.sites.indexOf(i);
    const bx = s >= 0 ? engramInject(archive, state, s, p, u) : u;
    const blockOut = block(archive, state, i, p, bx);
    const y = Float64Array.from(blockOut, (v, c) => v - u[c]); // minus u, not minus bx
    X = mixLanes(R, X, hpost, y);
    cells.push(laneMean(X));
  }
  const x = zcrms(cells[cells.length - 1], archive.weights.finalNorm);
  const logits = state.wantLogits ? product(state, archive.weights.embedding, x) : null;
  return { logits, cells };
}

/** The whole sequence, position by position. See the file header for the options. */
export function referenceForward(archive, ids, opts = {}) {
  const g = archive.geometry;
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 0 || id >= g.vocabulary) throw new Error(`token id ${id} outside the vocabulary`);
  }
  const state = {
    ids: Array.from(ids),
    valid: opts.valid ? Array.from(opts.valid, Boolean) : ids.map(() => true),
    window: opts.window ? opts.window : archiveWindow(g),
    sinks: opts.sinks || 0,
    kvLevels: kvLevels(archive, opts.kvQuant === undefined ? true : opts.kvQuant),
    a8: Boolean(opts.a8),
    q8: Boolean(opts.q8),
    kvIndices: opts.kvIndices ? Array.from({ length: g.layers }, () => []) : null,
    wantLogits: opts.logits !== false,
    keys: Array.from({ length: g.layers }, () => []),
    values: Array.from({ length: g.layers }, () => []),
    engram: Array.from({ length: g.siteCount }, () => new Map()),
  };
  const logits = [];
  const cells = [];
  for (let p = 0; p < state.ids.length; p++) {
    const out = step(archive, state, p);
    logits.push(out.logits);
    cells.push(out.cells);
  }
  return { logits, cells, kvIndices: state.kvIndices };
}
