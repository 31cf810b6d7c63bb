// The normalised Walsh-Hadamard transform in float64, two ways: the fast
// butterfly (what the reference uses everywhere) and the explicit Sylvester
// matrix (H1 = [1], H2k = [[Hk, Hk], [Hk, -Hk]], divided by sqrt(n)), kept so
// the tests can check one against the other. Part of the float64 test oracle
// (spec needle2-model.md section 2); never used by the engine.

export function isPowerOfTwo(n) {
  return Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;
}

/** Returns H_n v / sqrt(n) as a new Float64Array (v is not modified). */
export function fwht(v) {
  const n = v.length;
  if (!isPowerOfTwo(n)) throw new Error(`fwht: length ${n} is not a power of two`);
  const out = Float64Array.from(v);
  for (let half = 1; half < n; half *= 2) {
    for (let start = 0; start < n; start += 2 * half) {
      for (let i = start; i < start + half; i++) {
        const a = out[i];
        const b = out[i + half];
        out[i] = a + b;
        out[i + half] = a - b;
      }
    }
  }
  const scale = 1 / Math.sqrt(n);
  for (let i = 0; i < n; i++) out[i] *= scale;
  return out;
}

/** The n x n normalised Sylvester Hadamard matrix, row-major. */
export function hadamardMatrix(n) {
  if (!isPowerOfTwo(n)) throw new Error(`hadamardMatrix: ${n} is not a power of two`);
  let h = new Float64Array([1]);
  for (let k = 1; k < n; k *= 2) {
    const next = new Float64Array(4 * k * k);
    for (let r = 0; r < k; r++) {
      for (let c = 0; c < k; c++) {
        const x = h[r * k + c];
        next[r * 2 * k + c] = x;
        next[r * 2 * k + c + k] = x;
        next[(r + k) * 2 * k + c] = x;
        next[(r + k) * 2 * k + c + k] = -x;
      }
    }
    h = next;
  }
  const scale = 1 / Math.sqrt(n);
  for (let i = 0; i < h.length; i++) h[i] *= scale;
  return h;
}

/** M v for a row-major n x n matrix. */
export function applyMatrix(m, v) {
  const n = v.length;
  const out = new Float64Array(n);
  for (let r = 0; r < n; r++) {
    let s = 0;
    for (let c = 0; c < n; c++) s += m[r * n + c] * v[c];
    out[r] = s;
  }
  return out;
}
