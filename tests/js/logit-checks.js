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

/** The share of cached K/V level indices (every layer, position, kv head) a
 *  fast-mode session shares with the reference's. */
export function kvLevelAgreement(model, ids, options, want) {
  const session = model.session({ exact: false, ...options });
  let same = 0, total = 0;
  try {
    session.feed(ids);
    want.forEach((positions, layer) => positions.forEach((heads, p) => heads.forEach((rows, head) => {
      for (const [which, ref] of [[0, rows.k], [1, rows.v]]) {
        const got = session.kvLevels(layer, head, p, which);
        ref.forEach((index, i) => { same += got[i] === index; total++; });
      }
    })));
  } finally {
    session.free();
  }
  return same / total;
}
