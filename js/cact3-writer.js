// cact3-writer.js: writes Needle 3 archives (cact3-format.js) with
// deterministic random (or given) weights, for tests. Encoding, codebooks and
// layout are Needle 2's (cact-writer.js); what differs is the header, the
// walk, the FP32 permutations and the heads' own probe and query counts.
//
//   import { writeCact3 } from './cact3-writer.js';
//   import { TINY3_GEOMETRY } from './cact3-format.js';
//   const bytes = writeCact3({ geometry: TINY3_GEOMETRY, tokenizer: blob,
//     heads: [{ kind: 'confidence', probes: 4, queries: 4 }] });

import { CODEBOOK_LENGTH, DTYPE } from './cact-format.js';
import {
  HEAD3_CODES, HEADER3_BYTES, RELEASED3_GEOMETRY, canonicalTensors3, header3Words, released3Bits,
} from './cact3-format.js';
import {
  assembleArchive, bitsFor, denseValues, fp16Blob, groupFor, makeRng, quantiseCq,
} from './cact-writer.js';

/** The geometry an archive will carry: the released one overridden by the
 *  caller's fields, hadamardDimension derived from hidden unless given,
 *  vocabulary null = the tokenizer's piece count. */
export function resolveGeometry3(geometry = {}, tokenizer) {
  const g = { ...RELEASED3_GEOMETRY, ...geometry };
  for (const key of ['orders', 'sites', 'globalLayers']) g[key] = [...g[key]];
  if (geometry.hidden && geometry.hadamardDimension === undefined) {
    g.hadamardDimension = 2 ** Math.ceil(Math.log2(g.hidden));
  }
  const pieces = new DataView(tokenizer.buffer, tokenizer.byteOffset, tokenizer.byteLength).getUint32(0, true);
  if (g.vocabulary === null || g.vocabulary === undefined) g.vocabulary = pieces;
  if (pieces > g.vocabulary) throw new Error(`tokenizer has ${pieces} pieces, more than vocabulary ${g.vocabulary}`);
  if (g.layers > 64 || g.globalLayers.some((i) => i >= g.layers)) {
    throw new Error(`global layers ${g.globalLayers} must lie below layers ${g.layers} (at most 64)`);
  }
  return g;
}

/** A seeded permutation of 0..n-1 (Fisher-Yates), as the stored floats. */
function permutation(n, rng) {
  const p = Float32Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.next() % (i + 1);
    [p[i], p[j]] = [p[j], p[i]];
  }
  return p;
}

function encodeTensor3(options, { name, kind, shape }, index, heads) {
  const record = (dtype, blob, group = 0, bits = 0) => ({ dtype, shape, blob, group, bits });
  if (kind === 'raw') return record(DTYPE.RAW, options.tokenizer);
  if (name === 'heads.manifest') return record(DTYPE.FP16, fp16Blob(heads.map((h) => HEAD3_CODES[h.kind])));
  if (kind === 'fp32') {
    const given = options.weights?.(name, shape);
    const values = given ?? permutation(shape[0], makeRng(options.seed ?? 0, index));
    return record(DTYPE.FP32, new Uint8Array(Float32Array.from(values).buffer));
  }
  const values = denseValues(options, name, shape, index);
  if (kind === 'fp16') return record(DTYPE.FP16, fp16Blob(values));
  const bits = bitsFor(options.bits ?? released3Bits, name, index, [1, 2, 3, 4]);
  const group = groupFor(options.group ?? 128, name, index);
  const rows = shape[0], cols = shape[shape.length - 1];
  return record(DTYPE.CQ, quantiseCq(values, rows, cols, bits, group), group, bits);
}

/** Writes a whole Needle 3 archive and returns its bytes. options: geometry
 *  (fields of RELEASED3_GEOMETRY), tokenizer (RAW blob), seed, heads ([{ kind,
 *  probes, queries, dense }] in manifest order), bits (1 | 2 | 3 | 4 |
 *  'ternary' or (name, index) => that; default released3Bits), group (default
 *  128), weights ((name, shape) => dense values or null), as writeCact. */
export function writeCact3(options) {
  const g = resolveGeometry3(options.geometry, options.tokenizer);
  const heads = options.heads ?? [];
  const tensors = canonicalTensors3(g, { heads });
  const encoded = tensors.map((t, i) => encodeTensor3(options, t, i, heads));
  return assembleArchive(HEADER3_BYTES, (view) => {
    header3Words(g, tensors.length, CODEBOOK_LENGTH).forEach((v, i) => view.setUint32(i * 4, v, true));
    view.setFloat32(48 * 4, g.ropeTheta, true);
  }, encoded);
}
