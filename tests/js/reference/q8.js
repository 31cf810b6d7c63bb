// The makers' engine numerics of a CQ product (src/kernels/cq_q8.h), as the
// engine's arithmetic: the activation rotated per group and held as f32, the
// engine's int8 quantiser (scale = amax * f32(1/127), round half away from
// zero) on it and on the levels, exact integer sums, and the f32 combine
// y[r] = sum over groups, ascending, of sum * ((norm * cbs) * sx), each
// operation rounded to f32 (Math.fround) as the engine rounds it. Part of the
// test oracle; never used by the engine.

import { cqIndex } from './archive.js';
import { fwht } from './hadamard.js';

const f = Math.fround;
const K127 = f(1 / 127);

/** The engine's quantiser of f32 values: { q: Int32Array, scale }. A NaN is 0 and never the maximum. */
export function quantiseInt8(values) {
  let amax = 0;
  for (const v of values) if (Math.abs(v) > amax) amax = Math.abs(v);
  const scale = amax > 0 ? f(amax * K127) : 1;
  const inv = f(1 / scale);
  const q = Int32Array.from(values, (v) => {
    const x = f(v * inv);
    if (Number.isNaN(x)) return 0;
    const r = Math.sign(x) * Math.round(Math.abs(x)); // half away from zero
    return Math.max(-128, Math.min(127, r));
  });
  return { q, scale };
}

/** y = W x for a CQ tensor in the engine's numerics (its first `rows` rows). */
export function matVecQ8(t, x, rows = t.rows) {
  if (x.length !== t.cols) throw new Error(`matVecQ8: ${x.length} inputs for ${t.cols} columns`);
  const levels = quantiseInt8(Array.from(t.levels, (l) => (Number.isNaN(l) ? 0 : f(l)))); // the engine's f32 levels
  const groups = [];
  for (let g = 0; g < t.groups; g++) {
    const part = new Float64Array(t.group);
    for (let k = 0; k < t.group && g * t.group + k < t.cols; k++) part[k] = x[g * t.group + k];
    groups.push(quantiseInt8(Array.from(fwht(Float64Array.from(part, f)), f)));
  }
  const y = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let acc = 0;
    for (let g = 0; g < t.groups; g++) {
      let sum = 0;
      for (let k = 0; k < t.group; k++) sum += levels.q[cqIndex(t, r, g * t.group + k)] * groups[g].q[k];
      const norm = t.norms[r * t.groups + g];
      acc = f(acc + f(sum * f(f(norm * levels.scale) * groups[g].scale)));
    }
    y[r] = acc;
  }
  return y;
}
