// What the forward-pass tests (forward.test.js, forward3.test.js) measure of
// the engine's logits against a reference's.

/** n token ids: BOS, then pseudo-random ids past the ten markers and four specials. */
export function randomIds(n, vocabulary, seed) {
  const ids = [2];
  let x = seed >>> 0;
  while (ids.length < n) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    ids.push(14 + (x % (vocabulary - 14)));
  }
  return ids;
}

const argmax = (v) => v.reduce((best, x, i) => (x > v[best] ? i : best), 0);

/** Positions where want's top two are clear (over 1e-3 of its range apart) and got picks another token. */
export function greedyFlips(got, want) {
  let flips = 0, clear = 0;
  want.forEach((w, p) => {
    const sorted = Array.from(w).sort((a, b) => b - a);
    if (sorted[0] - sorted[1] <= 1e-3 * (sorted[0] - sorted[sorted.length - 1])) return;
    clear++;
    if (argmax(got[p]) !== argmax(w)) flips++;
  });
  return { flips, clear };
}

/** max|got - want| / max|want| (entries both -Infinity, never scored, count as equal). */
export function relativeError(got, want) {
  let diff = 0, scale = 0;
  for (let i = 0; i < want.length; i++) {
    if (want[i] === -Infinity && got[i] === -Infinity) continue;
    diff = Math.max(diff, Math.abs(got[i] - want[i]));
    scale = Math.max(scale, Math.abs(want[i]));
  }
  return diff / scale;
}
