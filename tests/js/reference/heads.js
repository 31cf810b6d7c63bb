// The float64 reference of the probe heads (spec needle2-model.md section 4):
// the cells of every non-pad position (the embedding cell x0 and the lane
// mean after each layer), softmax-pooled by each probe over all cells at once,
// then proj pooled + bias. Pad positions are also masked out of attention and
// the engram rules, as the reference's padding mask does.
//
//   referenceHeads(archive, ids, opts) -> { contrastive: Float64Array|null,
//                                           confidence: number|null }
// opts are referenceForward's (window, sinks, kvQuant, a8): "the same masks
// as generation".

import { HEAD_CODE } from './archive.js';
import { referenceForward, sigmoid } from './model.js';

/** pool(probes): per probe k, softmax over cells c of (cell_c . probe_k)/sqrt(d), weighted sum; probe-major concat. */
export function probePool(cells, probes, d) {
  const P = probes.rows;
  const pooled = new Float64Array(P * d);
  for (let k = 0; k < P; k++) {
    const probe = probes.data.subarray(k * d, (k + 1) * d);
    const scores = cells.map((cell) => cell.reduce((s, x, c) => s + x * probe[c], 0) / Math.sqrt(d));
    const max = Math.max(...scores);
    const weights = scores.map((s) => Math.exp(s - max));
    const total = weights.reduce((a, b) => a + b, 0);
    cells.forEach((cell, n) => {
      for (let c = 0; c < d; c++) pooled[k * d + c] += (weights[n] / total) * cell[c];
    });
  }
  return pooled;
}

/** out = proj pooled + bias. */
function headOutput(head, pooled) {
  const { rows, cols, data } = head.proj;
  return Float64Array.from({ length: rows }, (_, r) => {
    let s = head.bias[r];
    for (let c = 0; c < cols; c++) s += data[r * cols + c] * pooled[c];
    return s;
  });
}

export function referenceHeads(archive, ids, opts = {}) {
  const d = archive.geometry.hidden;
  const padId = archive.tokenizerInfo ? archive.tokenizerInfo.padId : 0;
  const valid = Array.from(ids, (t) => t !== padId);
  const result = { contrastive: null, confidence: null };
  if (archive.weights.heads.length === 0) return result;
  const { cells } = referenceForward(archive, ids, { ...opts, valid, logits: false });
  const kept = cells.filter((_, p) => valid[p]).flat(); // position-major, then layer
  if (kept.length === 0) throw new Error('referenceHeads: no non-pad position');
  for (const head of archive.weights.heads) {
    const out = headOutput(head, probePool(kept, head.probes, d));
    if (head.code === HEAD_CODE.CONFIDENCE) {
      result.confidence = sigmoid(out[0]);
    } else {
      const norm = Math.sqrt(out.reduce((s, x) => s + x * x, 0) + 1e-12);
      result.contrastive = Float64Array.from(out, (x) => x / norm);
    }
  }
  return result;
}
