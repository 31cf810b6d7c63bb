// The float64 reference forward pass of Needle 3 (the test oracle), written
// from needle3-model.md section 4 as a difference against Needle 2's
// (model.js, whose building blocks it shares): split q/k and v widths, the
// causal q/k/v convolution, sliding-window and global layers under the
// engine's window and sinks, the Kronecker MLP with its permutations and
// conditioning, and the trained numerics (a8: int8 at nx, the attention
// input, every query head, K and V at kvBits 8, the gated output, e, the final
// x). Positions are processed one at a time, as a decoder would.
// q8: the CQ products but the mHC Phi ones in the makers' engine numerics
// (model.js, q8.js), in place of the A8 points before them.
//
//   referenceForward3(archive3, ids, { window, sinks, a8, q8, kvQuant, valid, kvIndices })
//     -> { logits: Float64Array[] (outVocabulary each), cells: Float64Array[][], kvIndices }
//   kvIndices true (kvBits 2-4): also kvIndices[layer][position][kv head] = { k, v },
//   the CQ level index of every rotated K and V value (the padded length).

import { denseMatrix, matrixRow } from './archive.js';
import { kronecker } from './archive3.js';
import { engramSlot, fakeQuantA8, kvLevels, kvQuantise, product, rmsUnit, rope, sigmoid, sinkhorn, zcrms } from './model.js';
import { matVecQ8 } from './q8.js';

const KV_BUDGET_BYTES = 12058624;
const silu = (z) => z * sigmoid(z);
const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
const laneMean = (X) => Float64Array.from(X[0], (_, c) => X.reduce((s, lane) => s + lane[c], 0) / X.length);

function logSumExp(values) {
  const m = Math.max(...values);
  let s = 0;
  for (const v of values) s += Math.exp(v - m);
  return m + Math.log(s);
}

function rowsTimes(tensor, first, count, x) {
  const { cols, data } = denseMatrix(tensor);
  return Float64Array.from({ length: count }, (_, r) => {
    let s = 0;
    for (let c = 0; c < cols; c++) s += data[(first + r) * cols + c] * x[c];
    return s;
  });
}

/** The window when kvWindow is 0: kv_budget_window of section 4. */
export function archiveWindow3(g) {
  if (g.kvWindow) return g.kvWindow;
  const kd = g.kvHeads * g.qkDimension, vd = g.kvHeads * g.vDimension, d = g.hidden;
  const perLayer = kd + vd + (Math.floor(kd / 32) + Math.floor(vd / 32)) * 4;
  const perSite = d + Math.floor(d / 32) * 4;
  const globals = g.global.filter(Boolean).length;
  if (!g.slidingWindow) {
    const perPos = g.layers * perLayer + g.siteCount * perSite;
    return Math.max(160, Math.min(Math.floor(Math.floor(KV_BUDGET_BYTES / perPos) / 32) * 32, g.maximumSequence));
  }
  const local = Math.min(g.slidingWindow, g.maximumSequence);
  const fixed = ((g.layers - globals) * perLayer + g.siteCount * perSite) * local;
  if (!globals) return fixed <= KV_BUDGET_BYTES ? g.maximumSequence : Math.max(160, local);
  const w = Math.floor(Math.floor((KV_BUDGET_BYTES - fixed) / (globals * perLayer)) / 32) * 32;
  return Math.max(160, Math.min(w, g.maximumSequence));
}

/** Whether layer i lets a query at p read key t: its band, then the engine's window and sinks. */
function allowed(state, g, i, p, t) {
  const band = g.global[i] || p - t < g.slidingWindow;
  return t <= p && state.valid[t] && band && (p - t < state.window || t < state.sinks);
}

/** The causal depthwise convolution of one raw projection sequence at p (taps [C, width]). */
function convolve(taps, raw, p, C, width, valid) {
  const out = new Float64Array(width);
  for (let j = 0; j < C; j++) {
    if (p - j < 0 || !valid(p - j)) continue;
    for (let c = 0; c < width; c++) out[c] += taps[j * width + c] * raw[p - j][c];
  }
  return out;
}

function attention(archive, state, i, p, hIn) {
  const g = archive.geometry, lw = archive.weights.layers[i];
  const qk = g.qkDimension, vd = g.vDimension, H = g.queryHeads, KV = g.kvHeads;
  const raw = state.raw[i];
  raw.q[p] = product(state, lw.q, hIn);
  raw.k[p] = product(state, lw.k, hIn);
  raw.v[p] = product(state, lw.v, hIn);
  // The convolution reads the positions this layer's mask allows (a padded batch drops the rest).
  const valid = (t) => state.valid[t] && (g.global[i] || p - t < g.slidingWindow);
  const C = g.convTaps;
  const q = C ? convolve(lw.qTaps, raw.q, p, C, H * qk, valid) : raw.q[p];
  const k = C ? convolve(lw.kTaps, raw.k, p, C, KV * qk, valid) : raw.k[p];
  const v = C ? convolve(lw.vTaps, raw.v, p, C, KV * vd, valid) : raw.v[p];
  const int8 = state.a8 && g.kvBits === 8;
  const index = state.kvIndices && Array.from({ length: KV }, () => ({ k: [], v: [] }));
  const cache = (x, into) => (state.kvLevels ? kvQuantise(x, state.kvLevels, into) : int8 ? fakeQuantA8(x) : x);
  state.keys[i][p] = Array.from({ length: KV },
    (_, j) => cache(rope(zcrms(k.subarray(j * qk, (j + 1) * qk), lw.kNorm), p, g.ropeTheta), index?.[j].k));
  state.values[i][p] = Array.from({ length: KV },
    (_, j) => cache(Float64Array.from(v.subarray(j * vd, (j + 1) * vd)), index?.[j].v));
  if (index) state.kvIndices[i][p] = index;
  const o = new Float64Array(H * vd);
  for (let qh = 0; qh < H; qh++) {
    let qv = rope(zcrms(q.subarray(qh * qk, (qh + 1) * qk), lw.qNorm), p, g.ropeTheta);
    if (state.a8) qv = fakeQuantA8(qv);
    const kv = Math.floor(qh / (H / KV));
    const ts = [];
    for (let t = 0; t <= p; t++) if (allowed(state, g, i, p, t)) ts.push(t);
    const scores = ts.map((t) => dot(qv, state.keys[i][t][kv]) / Math.sqrt(qk));
    const lse = logSumExp(scores);
    ts.forEach((t, n) => {
      const w = Math.exp(scores[n] - lse), vt = state.values[i][t][kv];
      for (let c = 0; c < vd; c++) o[qh * vd + c] += w * vt[c];
    });
  }
  const gate = product(state, lw.gate, hIn);
  const gated = Float64Array.from(o, (x, j) => x * sigmoid(gate[j]));
  return product(state, lw.out, gated);
}

/** F(z) = w_a^T Z w_b over z viewed as a row-major [ba, bb] matrix Z. */
function kroneckerStage(z, wa, wb, ba, bb) {
  const t = new Float64Array(ba * bb); // t[k][j] = sum_i wa[i][k] Z[i][j]
  for (let k = 0; k < ba; k++) {
    for (let i = 0; i < ba; i++) {
      const a = wa[i * ba + k];
      for (let j = 0; j < bb; j++) t[k * bb + j] += a * z[i * bb + j];
    }
  }
  const out = new Float64Array(ba * bb);
  for (let k = 0; k < ba; k++) {
    for (let l = 0; l < bb; l++) {
      let s = 0;
      for (let j = 0; j < bb; j++) s += t[k * bb + j] * wb[j * bb + l];
      out[k * bb + l] = s;
    }
  }
  return out;
}

/** mlp_i(x) of section 4: conditioning, three Kronecker stages, two permutations. */
export function kroneckerMlp(archive, lw, x) {
  const N = archive.geometry.hadamardDimension, d = x.length, [ba, bb] = kronecker(N);
  const logits = Array.from({ length: 8 }, (_, r) => x.reduce((s, xc, c) => s + xc * lw.condV[c * 8 + r], 0));
  const lse = logSumExp(logits);
  const cond = Float64Array.from({ length: N }, (_, m) => 1 + logits.reduce((s, l, r) => s + Math.exp(l - lse) * lw.condU[r * N + m], 0));
  const gather = (z, perm) => Float64Array.from(perm, (j) => z[j]);
  let z = Float64Array.from({ length: N }, (_, m) => (m < d ? lw.d1[m] * x[m] : 0));
  z = gather(kroneckerStage(z, lw.w1a, lw.w1b, ba, bb), archive.weights.p1);
  z = Float64Array.from(z, (v, m) => silu(lw.d2[m] * cond[m] * v + lw.b2[m]));
  z = gather(kroneckerStage(z, lw.w2a, lw.w2b, ba, bb), archive.weights.p2);
  z = kroneckerStage(Float64Array.from(z, (v, m) => lw.d3[m] * v), lw.w3a, lw.w3b, ba, bb);
  return Float64Array.from({ length: d }, (_, m) => lw.d4[m] * z[m]);
}

function block(archive, state, i, p, x) {
  const lw = archive.weights.layers[i];
  const attn = zcrms(attention(archive, state, i, p, zcrms(x, lw.normIn)), lw.postNorm);
  const x1 = Float64Array.from(x, (v, c) => v + sigmoid(lw.attnGate) * attn[c]);
  const mlp = kroneckerMlp(archive, lw, zcrms(x1, lw.preHada));
  return Float64Array.from(x1, (v, c) => v + mlp[c]);
}

function mhcCoefficients(archive, state, i, X) {
  const n = archive.geometry.lanes, m = archive.weights.mhc;
  let nx = rmsUnit(Float64Array.from(X.flatMap((lane) => Array.from(lane))));
  if (state.a8) nx = fakeQuantA8(nx); // new in Needle 3
  const c = i % n;
  const pre = rowsTimes(m.phiPre, i * n, n, nx), post = rowsTimes(m.phiPost, i * n, n, nx);
  const res = rowsTimes(m.phiRes, i * n * n, n * n, nx);
  return {
    hpre: Float64Array.from(pre, (v, j) => sigmoid(m.aPre[i] * v + m.bPre[i * n + j] + (j === c ? 4 : -4))),
    hpost: Float64Array.from(post, (v, j) => 2 * sigmoid(m.aPost[i] * v + m.bPost[i * n + j] + (j === c ? 0 : -4))),
    R: sinkhorn(Float64Array.from(res, (v, ab) => m.aRes[i] * v + m.bRes[i * n * n + ab]), n),
  };
}

/** Engram k and v0 of site s at p; table o*heads + e is seeded with o*stride + e + 1. */
function engramAt(archive, state, s, p) {
  const memo = state.engram[s];
  if (memo.has(p)) return memo.get(p);
  const g = archive.geometry, site = archive.weights.sites[s];
  const heads = g.engramTables / g.orderCount, stride = g.engramSeedHeads || heads, sub = g.engramSubDimension;
  const e = new Float64Array(g.engramTables * sub);
  for (let o = 0; o < g.orderCount; o++) {
    const order = g.orders[o];
    const oldest = p - (order - 1);
    if (oldest < 0 || !state.valid[oldest]) continue;
    const recent = Array.from({ length: order }, (_, j) => state.ids[p - j]);
    for (let h = 0; h < heads; h++) {
      const t = o * heads + h;
      e.set(matrixRow(site.tables, t * g.engramSlots + engramSlot(o * stride + h, recent, g.engramSlots)), t * sub);
    }
  }
  const out = { k: product(state, site.key, e), v0: product(state, site.value, e) };
  memo.set(p, out);
  return out;
}

function engramInject(archive, state, s, p, u) {
  const g = archive.geometry, taps = archive.weights.sites[s].taps, d = g.hidden;
  const ev = new Float64Array(d);
  for (let m = 0; m < g.engramTaps; m++) {
    const t = p - m * g.engramDilation;
    if (t < 0 || !state.valid[t]) continue;
    const v0 = engramAt(archive, state, s, t).v0;
    for (let c = 0; c < d; c++) ev[c] += taps[m * d + c] * v0[c];
  }
  const alpha = sigmoid(dot(rmsUnit(u), rmsUnit(engramAt(archive, state, s, p).k)) / Math.sqrt(d));
  return Float64Array.from(u, (x, c) => x + alpha * ev[c]);
}

function step(archive, state, p) {
  const g = archive.geometry, d = g.hidden;
  const x0 = Float64Array.from(matrixRow(archive.weights.embedding, state.ids[p]), (v) => v * Math.sqrt(d));
  let X = Array.from({ length: g.lanes }, () => Float64Array.from(x0));
  const cells = [x0];
  for (let i = 0; i < g.layers; i++) {
    const { hpre, hpost, R } = mhcCoefficients(archive, state, i, X);
    const u = Float64Array.from(X[0], (_, c) => X.reduce((s, lane, j) => s + hpre[j] * lane[c], 0));
    const s = g.sites.indexOf(i);
    const out = block(archive, state, i, p, s >= 0 ? engramInject(archive, state, s, p, u) : u);
    const y = Float64Array.from(out, (v, c) => v - u[c]);
    X = X.map((_, a) => Float64Array.from(y, (yc, c) => X.reduce((acc, lane, b) => acc + R[a * g.lanes + b] * lane[c], hpost[a] * yc)));
    cells.push(laneMean(X));
  }
  let x = zcrms(cells[cells.length - 1], archive.weights.finalNorm);
  if (state.q8) return { logits: matVecQ8(archive.weights.embedding, x, g.outVocabulary), cells };
  if (state.a8) x = fakeQuantA8(x);
  const E = denseMatrix(archive.weights.embedding);
  const logits = Float64Array.from({ length: g.outVocabulary }, (_, r) => {
    let acc = 0;
    for (let c = 0; c < d; c++) acc += E.data[r * d + c] * x[c];
    return acc;
  });
  return { logits, cells };
}

/** The whole sequence, position by position. */
export function referenceForward3(archive, ids, opts = {}) {
  const g = archive.geometry;
  const state = {
    ids: Array.from(ids),
    valid: opts.valid ? Array.from(opts.valid, Boolean) : ids.map(() => true),
    window: opts.window ? opts.window : archiveWindow3(g),
    sinks: opts.sinks || 0,
    kvLevels: kvLevels(archive, opts.kvQuant === undefined ? true : opts.kvQuant),
    a8: Boolean(opts.a8),
    q8: Boolean(opts.q8),
    raw: Array.from({ length: g.layers }, () => ({ q: [], k: [], v: [] })),
    keys: Array.from({ length: g.layers }, () => []),
    values: Array.from({ length: g.layers }, () => []),
    engram: Array.from({ length: g.siteCount }, () => new Map()),
    kvIndices: opts.kvIndices ? Array.from({ length: g.layers }, () => []) : null,
  };
  const logits = [], cells = [];
  for (let p = 0; p < state.ids.length; p++) {
    const out = step(archive, state, p);
    logits.push(out.logits);
    cells.push(out.cells);
  }
  return { logits, cells, kvIndices: state.kvIndices };
}
