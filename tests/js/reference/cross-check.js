// A second formulation of the forward pass, used only by reference.test.js to
// catch slips in model.js: it works on the whole sequence at once, layer by
// layer, the way the reference's training code does (an attention mask
// matrix, shifted token and validity arrays for the engram, offsets written
// as 8*lane - 4 and -4*(1 - lane), the repeat idiom for GQA, explicit
// Hadamard matrices in the MLP). Shares only the separately tested
// primitives (rms_unit, zcrms, RoPE, sinkhorn, engram hash, KV quantiser).
// Exact K/V unless kvLevels is given; no A8.

import { denseMatrix, matrixRow } from './archive.js';
import { hadamardMatrix, applyMatrix } from './hadamard.js';
import { rmsUnit, zcrms, rope, sinkhorn, engramSlot, kvQuantise, sigmoid } from './model.js';

const times = (m, x) => {
  const { rows, cols, data } = denseMatrix(m);
  return Array.from({ length: rows }, (_, r) => x.reduce((s, v, c) => s + data[r * cols + c] * v, 0));
};
const slice = (m, first, count, x) => {
  const { cols, data } = denseMatrix(m);
  return Array.from({ length: count }, (_, r) => x.reduce((s, v, c) => s + data[(first + r) * cols + c] * v, 0));
};
/** shift_right(a, k): a[t - k], `fill` before the start. */
const shiftRight = (a, k, fill) => a.map((_, t) => (t - k >= 0 ? a[t - k] : fill));

function engramSequence(archive, s, ids, valid) {
  const g = archive.geometry;
  const site = archive.weights.sites[s];
  const heads = g.engramTables / g.orderCount;
  const T = ids.length;
  const e = Array.from({ length: T }, () => new Float64Array(g.engramTables * g.engramSubDimension));
  g.orders.forEach((order, o) => {
    const ok = shiftRight(valid, order - 1, false);
    for (let h = 0; h < heads; h++) {
      const table = o * heads + h;
      for (let t = 0; t < T; t++) {
        const recent = Array.from({ length: order }, (_, j) => shiftRight(ids, j, 0)[t]);
        if (!ok[t]) continue;
        const row = matrixRow(site.tables, table * g.engramSlots + engramSlot(table, recent, g.engramSlots));
        e[t].set(row, table * g.engramSubDimension);
      }
    }
  });
  const k = e.map((v) => times(site.key, v));
  const v0 = e.map((v) => times(site.value, v));
  const ev = v0.map(() => new Array(g.hidden).fill(0));
  for (let j = 0; j < g.engramTaps; j++) {
    const shifted = shiftRight(v0, j * g.engramDilation, null);
    const ok = shiftRight(valid, j * g.engramDilation, false);
    for (let t = 0; t < T; t++) {
      if (!ok[t]) continue;
      for (let c = 0; c < g.hidden; c++) ev[t][c] += site.taps[j * g.hidden + c] * shifted[t][c];
    }
  }
  return { k, ev };
}

function attentionSequence(archive, i, H, mask, kvLevels) {
  const g = archive.geometry;
  const lw = archive.weights.layers[i];
  const hd = g.headDimension;
  const T = H.length;
  const heads = (v, count) => Array.from({ length: count }, (_, j) => v.slice(j * hd, (j + 1) * hd));
  const Q = H.map((h, t) => heads(times(lw.q, h), g.queryHeads).map((q) => rope(zcrms(q, lw.qNorm), t, g.ropeTheta)));
  let K = H.map((h, t) => heads(times(lw.k, h), g.kvHeads).map((k) => rope(zcrms(k, lw.kNorm), t, g.ropeTheta)));
  let V = H.map((h) => heads(times(lw.v, h), g.kvHeads));
  if (kvLevels) {
    K = K.map((ks) => ks.map((k) => kvQuantise(k, kvLevels)));
    V = V.map((vs) => vs.map((v) => kvQuantise(v, kvLevels)));
  }
  const repeat = g.queryHeads / g.kvHeads; // jnp.repeat(k, repeat, axis=heads)
  const kvOf = Array.from({ length: g.kvHeads }, (_, j) => new Array(repeat).fill(j)).flat();
  return H.map((h, p) => {
    const o = [];
    for (let qh = 0; qh < g.queryHeads; qh++) {
      const logits = Array.from({ length: T }, (_, t) => (mask[p][t]
        ? Q[p][qh].reduce((s, x, c) => s + x * K[t][kvOf[qh]][c], 0) / Math.sqrt(hd) : -Infinity));
      const m = Math.max(...logits);
      const w = logits.map((l) => Math.exp(l - m));
      const z = w.reduce((a, b) => a + b, 0);
      for (let c = 0; c < hd; c++) o.push(w.reduce((s, wt, t) => s + (wt / z) * V[t][kvOf[qh]][c], 0));
    }
    const gate = times(lw.gate, h);
    return times(lw.out, o.map((x, j) => x * sigmoid(gate[j])));
  });
}

/** Logits of every position, computed a layer at a time over the whole sequence. */
export function sequenceForward(archive, ids, { window = Infinity, sinks = 0, kvLevels = null } = {}) {
  const g = archive.geometry;
  const w = archive.weights;
  const n = g.lanes, d = g.hidden, T = ids.length;
  const valid = ids.map(() => true);
  const mask = ids.map((_, p) => ids.map((__, t) => t <= p && (p - t < window || t < sinks)));
  const HN = hadamardMatrix(g.hadamardDimension);
  const engrams = g.sites.map((_, s) => engramSequence(archive, s, ids, valid));
  let X = ids.map((tok) => {
    const x = Array.from(matrixRow(w.embedding, tok), (v) => v * Math.sqrt(d));
    return Array.from({ length: n }, () => x.slice());
  });
  for (let i = 0; i < g.layers; i++) {
    const lane = Array.from({ length: n }, (_, j) => (j === i % n ? 1 : 0));
    const coef = X.map((lanes) => {
      const nx = rmsUnit(Float64Array.from(lanes.flat()));
      const hpre = slice(w.mhc.phiPre, i * n, n, nx)
        .map((v, j) => sigmoid(w.mhc.aPre[i] * v + w.mhc.bPre[i * n + j] + 8 * lane[j] - 4));
      const hpost = slice(w.mhc.phiPost, i * n, n, nx)
        .map((v, j) => 2 * sigmoid(w.mhc.aPost[i] * v + w.mhc.bPost[i * n + j] - 4 * (1 - lane[j])));
      const res = slice(w.mhc.phiRes, i * n * n, n * n, nx).map((v, ab) => w.mhc.aRes[i] * v + w.mhc.bRes[i * n * n + ab]);
      return { hpre, hpost, R: sinkhorn(Float64Array.from(res), n) };
    });
    const U = X.map((lanes, t) => lanes[0].map((_, c) => lanes.reduce((s, l, j) => s + coef[t].hpre[j] * l[c], 0)));
    const site = g.sites.indexOf(i);
    const BX = U.map((u, t) => {
      if (site < 0) return u;
      const { k, ev } = engrams[site];
      const ru = rmsUnit(Float64Array.from(u));
      const rk = rmsUnit(Float64Array.from(k[t]));
      const alpha = sigmoid(ru.reduce((s, x, c) => s + x * rk[c], 0) / Math.sqrt(d));
      return u.map((x, c) => x + alpha * ev[t][c]);
    });
    const lw = w.layers[i];
    const A = attentionSequence(archive, i, BX.map((x) => zcrms(Float64Array.from(x), lw.normIn)), mask, kvLevels);
    const Y = BX.map((x, t) => {
      const a = zcrms(Float64Array.from(A[t]), lw.postNorm);
      const x1 = x.map((v, c) => v + sigmoid(lw.attnGate) * a[c]);
      const pre = zcrms(Float64Array.from(x1), lw.preHada);
      const h = Array.from({ length: g.hadamardDimension }, (_, c) => (c < d ? lw.d1[c] * pre[c] : 0));
      const z = applyMatrix(HN, Float64Array.from(h));
      const z2 = applyMatrix(HN, Float64Array.from(z, (v, c) => { const a2 = lw.d2[c] * v; return a2 * sigmoid(a2); }));
      return x1.map((v, c) => v + lw.d3[c] * z2[c] - U[t][c]);
    });
    X = X.map((lanes, t) => lanes.map((_, a) => lanes[0].map((__, c) => {
      let s = coef[t].hpost[a] * Y[t][c];
      for (let b = 0; b < n; b++) s += coef[t].R[a * n + b] * lanes[b][c];
      return s;
    })));
  }
  return X.map((lanes) => {
    const mean = lanes[0].map((_, c) => lanes.reduce((s, l) => s + l[c], 0) / n);
    return Float64Array.from(times(w.embedding, zcrms(Float64Array.from(mean), w.finalNorm)));
  });
}
