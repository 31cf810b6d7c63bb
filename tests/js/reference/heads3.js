// The float64 reference of Needle 3's probe heads (needle3-model.md section
// 5), written from the spec: per cell c (the embedding cell, then the lane
// mean after each block) and probe j, a softmax over positions pools that
// cell; each pooled vector is rms-normalised and scaled by its gain; each
// query then softmax-pools the (c, j) vectors; out = proj concat + bias.
//
//   referenceHeads3(archive3, ids, opts) -> { embedding: Float64Array|null,
//                                             confidence: number|null, router: Float64Array|null }
// opts are referenceForward3's. ids hold no pad token (pads would also be
// masked out of attention, which referenceForward3 does not do).

import { HEAD3_CODES } from './archive3.js';
import { referenceForward3 } from './model3.js';
import { rmsUnit, sigmoid } from './model.js';

const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);

/** Softmax weights of scores. */
function softmax(scores) {
  const max = Math.max(...scores);
  const w = scores.map((s) => Math.exp(s - max));
  const total = w.reduce((a, b) => a + b, 0);
  return w.map((x) => x / total);
}

/** sum_i weights[i] * vectors[i]. */
function weightedSum(weights, vectors, d) {
  const out = new Float64Array(d);
  vectors.forEach((v, i) => { for (let c = 0; c < d; c++) out[c] += weights[i] * v[c]; });
  return out;
}

function headOut(head, cellsByPosition, d) {
  const cells = cellsByPosition[0].length, { k, q } = head, scale = 1 / Math.sqrt(d);
  const r = [];
  for (let c = 0; c < cells; c++) {
    const column = cellsByPosition.map((at) => at[c]);
    for (let j = 0; j < k; j++) {
      const probe = head.probes.subarray((c * k + j) * d, (c * k + j + 1) * d);
      const pooled = weightedSum(softmax(column.map((cell) => dot(cell, probe) * scale)), column, d);
      r.push(rmsUnit(pooled).map((x) => x * head.gain[c * k + j]));
    }
  }
  const concat = new Float64Array(q * d);
  for (let m = 0; m < q; m++) {
    const query = head.query.subarray(m * d, (m + 1) * d);
    const u = r.map((v, cj) => dot(v, query) * scale + head.rowBias[m * cells * k + cj]);
    concat.set(weightedSum(softmax(u), r, d), m * d);
  }
  return Float64Array.from({ length: head.out }, (_, o) =>
    head.bias[o] + dot(head.proj.subarray(o * q * d, (o + 1) * q * d), concat));
}

export function referenceHeads3(archive, ids, opts = {}) {
  const d = archive.geometry.hidden;
  const result = { embedding: null, confidence: null, router: null };
  if (!archive.weights.heads.length) return result;
  const { cells } = referenceForward3(archive, ids, opts);
  for (const head of archive.weights.heads) {
    const out = headOut(head, cells, d);
    if (head.code === HEAD3_CODES.CONFIDENCE) result.confidence = sigmoid(out[0]);
    else if (head.code === HEAD3_CODES.ROUTER) result.router = out;
    else {
      const norm = Math.sqrt(dot(out, out) + 1e-12);
      result.embedding = out.map((x) => x / norm);
    }
  }
  return result;
}
