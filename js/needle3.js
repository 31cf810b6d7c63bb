// needle3.js: the real Needle 3, one call away, as needle2.js is for Needle 2:
// loadNeedle3() downloads the released archive from Hugging Face at a pinned
// revision, checks its SHA-256, loads it (the loader picks the needle3
// engine by its tag) and checks its shape (the Needle 3 spec, section 1).
// A wrong file is 'NOT_NEEDLE3'; the other codes are in released-model.js.
//   import { loadNeedle3 } from 'needle-wasm';
//   const model = await loadNeedle3({ onProgress: ({ loaded, total }) => {} });

import { loadRelease, verifyRelease } from './released-model.js';

// The revision and digest that ddrscott/needle-rs pins in web/worker.js (and
// other public projects with it): the 35,335,380-byte needle3.cact.
const REVISION = 'b274efcb211a9eef48c9a88da4b43bd569696a39';

/** Where Needle 3 lives: Hugging Face Cactus-Compute/needle3 at REVISION. */
export const NEEDLE3_URL = `https://huggingface.co/Cactus-Compute/needle3/resolve/${REVISION}/needle3.cact`;

/** The released archive's figures: its bytes (size, tag, SHA-256) and its
 *  shape, as inspect() names the header fields (global layers 4, 9, 14 and
 *  19 are globalMaskLo 541200; heads.manifest [2] is the confidence head alone). */
export const NEEDLE3_FIGURES = Object.freeze({
  size: 35335380,
  sha256: 'c9d915eca282ed42d1a09b143b592adb4cc6744ffe2d294adf5cfc5548170c38',
  tag: 0x05e12a84,
  tensors: 581,
  group: 128,
  heads: Object.freeze(['confidence']),
  geometry: Object.freeze({
    generation: 3, codebookLength: 28, vocabulary: 8192, outVocabulary: 8192, hidden: 768, queryHeads: 12,
    kvHeads: 2, headDimension: 48, vHeadDimension: 64, layers: 20, maximumSequence: 8192, ropeTheta: 100000,
    hadamardDimension: 1024, lanes: 4, slidingWindow: 1024, globalMaskLo: 541200, globalMaskHi: 0,
    qkvConvTaps: 3, engramSlots: 18432, engramSubDimension: 128, engramTables: 6, engramTaps: 4,
    engramDilation: 3, engramSeedHeads: 0, orders: Object.freeze([2, 3]), sites: Object.freeze([3, 7, 11, 15, 19]),
    kvWindow: 256, kvBits: 8,
  }),
});

/** Needle 3 as released-model.js and the CLI's cache (released-cache.js) take it. */
export const NEEDLE3 = Object.freeze({
  name: 'Needle 3', file: 'needle3.cact', code: 'NOT_NEEDLE3', loader: 'loadNeedle3()',
  url: NEEDLE3_URL, figures: NEEDLE3_FIGURES,
});

/** Loads Needle 3 and returns the model; the options are loadNeedle2's
 *  (needle2.js), expect overriding NEEDLE3_FIGURES. */
export function loadNeedle3(options) {
  return loadRelease(NEEDLE3, options);
}

/** Throws NOT_NEEDLE3 unless the loaded model has the shape `expect`
 *  describes (default: Needle 3's); as verifyNeedle2. */
export function verifyNeedle3(model, options) {
  return verifyRelease(NEEDLE3, model, options);
}
