// needle2.js: the real Needle 2, one call away. loadNeedle2() downloads the
// released archive from Hugging Face at a pinned revision (released-model.js:
// progress, Cache Storage for offline visits, size cap and timeouts), checks
// its SHA-256, loads it, and checks its shape: tensor count, geometry (spec
// section 1), CQ group and probe heads. Errors are NeedleErrors in plain
// words (codes in released-model.js; a wrong file is 'NOT_NEEDLE2').
//   import { loadNeedle2 } from 'needle-wasm';
//   const model = await loadNeedle2({ onProgress: ({ loaded, total }) => {} });

import { loadRelease, verifyRelease } from './released-model.js';

// The revision and digest that chamsechan/OpenNeedle pins in
// scripts/download_official.py (other public projects give the same digest
// for this 13,737,807-byte file).
const REVISION = '32e9e3a93b205f786929697446ae669cf0a84579';

/** Where Needle 2 lives: Hugging Face Cactus-Compute/needle2 at REVISION (it redirects to its CDN). */
export const NEEDLE2_URL = `https://huggingface.co/Cactus-Compute/needle2/resolve/${REVISION}/needle2.cact`;

/** The released archive's figures, which a download must match: its bytes
 *  (size, tag, SHA-256) and its shape (spec section 1). */
export const NEEDLE2_FIGURES = Object.freeze({
  size: 13737807,
  sha256: 'b43aabfcaf1a6db6acf488076eab71d823c08697c7af4521fc1d174b60ede5ba',
  tag: 0x05e12a83,
  tensors: 405,
  group: 128,
  heads: Object.freeze(['contrastive', 'confidence']),
  geometry: Object.freeze({
    generation: 2, vocabulary: 8192, hidden: 512, queryHeads: 8, kvHeads: 4, headDimension: 64, layers: 27, lanes: 4,
    hadamardDimension: 512, orders: Object.freeze([2, 3]), engramTables: 4, engramSubDimension: 128,
    engramSlots: 8192, engramTaps: 4, engramDilation: 3, sites: Object.freeze([2, 15]), ropeTheta: 100000,
    maximumSequence: 2048, kvWindow: 256,
  }),
});

/** Needle 2 as released-model.js and the CLI's cache (released-cache.js) take it. */
export const NEEDLE2 = Object.freeze({
  name: 'Needle 2', file: 'needle2.cact', code: 'NOT_NEEDLE2', loader: 'loadNeedle2()',
  url: NEEDLE2_URL, figures: NEEDLE2_FIGURES,
});

/**
 * Loads Needle 2 and returns the model (a worker model in pages, as
 * loadModel). options: loadModel's onProgress ({ loaded, total }), signal,
 * cache, wasm, threads, worker, workerUrl; url (another address of it: a
 * mirror, or in Node a path); expect (figures that override
 * NEEDLE2_FIGURES, e.g. { size, sha256 } of another revision; sha256: null
 * checks the shape only); timeoutMs (the whole download, default 10 min)
 * and idleTimeoutMs (no byte, default 30 s). model.source.fromCache says it
 * came from the cache.
 */
export function loadNeedle2(options) {
  return loadRelease(NEEDLE2, options);
}

/** Throws NOT_NEEDLE2 unless the loaded model (Model or WorkerModel) has the
 *  shape `expect` describes (default: Needle 2's); label names the file in
 *  the message (default: model.source.label). The digest is checked by
 *  loadNeedle2, which has the bytes. */
export function verifyNeedle2(model, options) {
  return verifyRelease(NEEDLE2, model, options);
}
