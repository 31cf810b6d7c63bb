// The float64 reference of Needle 3 (tests/js/reference/model3.js) against
// the Needle 2 reference on archives that make the two models the same: a
// Needle 3 archive whose new parts are neutral (identity convolution taps;
// F1 and F2 the Hadamard transform once their permutation is applied: w_a a
// Walsh matrix with its columns permuted, which only the spec's flattening
// and gather direction undo; identity F3, no conditioning, bias 0, d4 1,
// every layer global) and whose other tensors are a Needle 2 archive's. This
// checks the shared path and the conventions of the new parts (the Kronecker
// flattening, the gather, the tap order, the seeds) against the checked one.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { makeRng, makeTestTokenizerBlob, randomValues, syntheticPieces, writeCact } from '../../js/cact-writer.js';
import { writeCact3 } from '../../js/cact3-writer.js';
import { kroneckerSplit } from '../../js/cact3-format.js';
import { readArchive, referenceForward } from './reference/index.js';
import { readArchive3 } from './reference/archive3.js';
import { referenceForward3 } from './reference/model3.js';

const tokenizer = makeTestTokenizerBlob(syntheticPieces(300));
// N = 256 splits 16 x 16, whose Walsh entries (1/4) fp16 holds exactly.
const SHARED = {
  kvWindow: 32, kvBits: 8, vocabulary: null, hidden: 160, queryHeads: 4, kvHeads: 2, layers: 2,
  headDimension: 16, maximumSequence: 64, hadamardDimension: 256, lanes: 2, engramSlots: 64,
  engramSubDimension: 16, engramTables: 4, engramTaps: 4, engramDilation: 3, orders: [2, 3], sites: [0, 1],
  ropeTheta: 10000,
};
const V3 = { ...SHARED, outVocabulary: 0, vHeadDimension: 16, slidingWindow: 0, globalLayers: [], qkvConvTaps: 3,
  engramSeedHeads: 0 };

/** The same random values for a name in either archive. */
function shared(name, shape) {
  let seed = 0;
  for (const ch of name) seed = (Math.imul(seed, 31) + ch.charCodeAt(0)) >>> 0;
  return randomValues(name, shape, makeRng(seed));
}

function walsh(n) {
  const h = new Float32Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      let bits = i & j, sign = 1;
      while (bits) { sign = -sign; bits &= bits - 1; }
      h[i * n + j] = sign / Math.sqrt(n);
    }
  }
  return h;
}

const [BA, BB] = kroneckerSplit(V3.hadamardDimension);
// Row permutations sigma of stages 1 and 2 (k -> (k * a + b) mod BA, a odd).
const SIGMA = { 1: (k) => (k * 5 + 3) % BA, 2: (k) => (k * 7 + 1) % BA };

/** w_a = H Q: column k of the Walsh matrix H is column sigma^-1(k), so that
 *  F(Z) = w_a^T Z H = Q^T (H Z H), whose rows the gather by
 *  p[r*bb + l] = sigma(r)*bb + l puts back. */
function permutedWalsh(sigma) {
  const h = walsh(BA), out = new Float32Array(BA * BA);
  for (let r = 0; r < BA; r++) for (let i = 0; i < BA; i++) out[i * BA + sigma(r)] = h[i * BA + r];
  return out;
}

/** The new tensors, neutral; the rest as the Needle 2 archive's. */
function neutral(name, shape) {
  const leaf = name.slice(name.lastIndexOf('.') + 1);
  const count = shape.reduce((a, b) => a * b, 1);
  const stage = leaf.match(/^w([12])a$/)?.[1] ?? name.match(/^hada_p([12])$/)?.[1];
  if (/^[qkv]_taps$/.test(leaf)) return Float32Array.from({ length: count }, (_, i) => (i < shape[1] ? 1 : 0));
  if (/^w[12]a$/.test(leaf)) return permutedWalsh(SIGMA[stage]);
  if (/^w[12]b$/.test(leaf)) return walsh(BB);
  if (/^w3[ab]$/.test(leaf)) return Float32Array.from({ length: count }, (_, i) => (i % (shape[0] + 1) === 0 ? 1 : 0));
  if (['b2', 'cond_u'].includes(leaf)) return new Float32Array(count);
  if (leaf === 'd4') return new Float32Array(count).fill(1);
  if (stage) return Float32Array.from({ length: count }, (_, m) => SIGMA[stage](Math.floor(m / BB)) * BB + (m % BB));
  return shared(name, shape); // cond_v too: with cond_u 0 the conditioning is 1 whatever it is
}

test('the Needle 3 reference computes the Needle 2 model when the new parts are neutral', () => {
  const common = { tokenizer, bits: 4, group: 32 };
  const v2 = readArchive(writeCact({ ...common, geometry: SHARED, weights: shared }));
  const v3 = readArchive3(writeCact3({ ...common, geometry: V3, weights: neutral }));
  const ids = [2, 17, 99, 31, 5, 6, 250, 77, 42, 7, 13, 200];
  for (const options of [{}, { window: 6, sinks: 2 }]) {
    const a = referenceForward(v2, ids, options).logits, b = referenceForward3(v3, ids, options).logits;
    let worst = 0;
    a.forEach((row, p) => {
      const range = Math.max(...row) - Math.min(...row);
      row.forEach((x, i) => { worst = Math.max(worst, Math.abs(x - b[p][i]) / range); });
    });
    assert.ok(worst < 1e-14, `${JSON.stringify(options)}: max difference ${worst} of the logit range`);
  }
});
