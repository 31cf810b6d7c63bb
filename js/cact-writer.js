// cact-writer.js: writes .cact archives with deterministic random (or given)
// weights, in any geometry, so every engine test can build the model it needs.
// The layout follows shared/seed: 120-byte header, 28 f32 codebook levels,
// 44-byte records, 64-byte aligned blobs in canonical order, RAW tokenizer last.
// CQ matrices are quantised from dense weights exactly as the reference
// exporter does (per group: Hadamard rotation, L2 norm, nearest level with ties
// to the lower level, fp16 norm), in float64. Only integer, +-*/ and sqrt are
// used on random values, so the bytes are the same in every JS engine.
// ES module, no dependencies (writeRandomArchive alone needs Node).
//
//   import { writeCact, TINY_GEOMETRY } from './cact-writer.js';
//   const bytes = writeCact({ geometry: TINY_GEOMETRY, seed: 7, tokenizer: blob, heads: true });

import {
  ALIGN, CODEBOOK_LENGTH, DTYPE, HEADER_BYTES, HEAD_CODES, HEAD_SHAPES, RECORD_BYTES,
  RELEASED_GEOMETRY, TAG, TERNARY_RECORD_BITS, TINY_GEOMETRY, canonicalTensors, cqLevels,
  headKinds, headerCodebook, releasedBits,
} from './cact-format.js';

export { RELEASED_GEOMETRY, TINY_GEOMETRY, canonicalTensors, releasedBits };

// ---------------------------------------------------------------- randomness

// splitmix32 finaliser: spreads a 32-bit word over all bits.
function mix32(x) {
  x = Math.imul(x ^ (x >>> 16), 0x21f0aaad);
  x = Math.imul(x ^ (x >>> 15), 0x735a2d97);
  return (x ^ (x >>> 15)) >>> 0;
}

/** xoshiro128** stream for (seed, stream): each tensor draws from its own
 *  stream, so its values do not depend on the bits or order of the others. */
export function makeRng(seed, stream = 0) {
  if (!Number.isSafeInteger(seed)) throw new Error(`seed must be a safe integer, got ${seed}`);
  const wide = BigInt.asUintN(64, BigInt(seed));
  const lo = Number(wide & 0xffffffffn), hi = Number(wide >> 32n);
  let x = mix32(lo ^ mix32(hi ^ mix32(stream + 0x9e3779b9)));
  const state = new Uint32Array(4);
  for (let i = 0; i < 4; i++) { x = (x + 0x9e3779b9) >>> 0; state[i] = mix32(x) | (i === 0); }
  let [s0, s1, s2, s3] = state;
  const next = () => {
    const m = Math.imul(s1, 5);
    const result = Math.imul((m << 7) | (m >>> 25), 9) >>> 0;
    const t = s1 << 9;
    s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = (s3 << 11) | (s3 >>> 21);
    return result;
  };
  const SQRT3 = Math.sqrt(3);
  const rng = {
    next,
    /** Uniform in (0, 1). */
    uniform: () => (next() + 0.5) / 4294967296,
    /** Unit-variance approximate Gaussian: Irwin-Hall sum of four 16-bit
     *  uniforms (tails end at +-3.46; no transcendental functions). */
    gauss: () => {
      const a = next(), b = next();
      const sum = (a & 0xffff) + (a >>> 16) + (b & 0xffff) + (b >>> 16) + 2;
      return (sum / 65536 - 2) * SQRT3;
    },
  };
  /** out[i] = std * gauss(), the same values as calling gauss() in a loop,
   *  inlined because the big matrices make this the hot path. */
  rng.gaussFill = (out, std) => {
    for (let i = 0; i < out.length; i++) {
      const a = next(), b = next();
      const sum = (a & 0xffff) + (a >>> 16) + (b & 0xffff) + (b >>> 16) + 2;
      out[i] = (sum / 65536 - 2) * SQRT3 * std;
    }
  };
  return rng;
}

// ---------------------------------------------------------------- numerics

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** binary16 bits of a number, rounded first to f32 and then to nearest even
 *  (numpy's float32.astype(float16)). */
export function toFp16(value) {
  f32[0] = value;
  const x = u32[0], sign = (x >>> 16) & 0x8000, ax = x & 0x7fffffff;
  if (ax >= 0x7f800000) return sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0);
  if (ax >= 0x477ff000) return sign | 0x7c00;
  if (ax < 0x38800000) { // subnormal half (or zero)
    if (ax < 0x33000000) return sign;
    const e = ax >>> 23, m = (ax & 0x7fffff) | 0x800000, shift = 126 - e;
    let half = m >>> shift;
    const rem = m & ((1 << shift) - 1), mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1))) half++;
    return sign | half;
  }
  let h = (ax >>> 13) - (112 << 10);
  const rem = ax & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
  return sign | h;
}

/** In-place normalised fast Walsh-Hadamard transform (Sylvester order) of
 *  v[off .. off+n), n a power of two. */
export function fwht(v, off, n) {
  for (let h = 1; h < n; h <<= 1) {
    for (let i = off; i < off + n; i += h << 1) {
      for (let j = i; j < i + h; j++) {
        const a = v[j], b = v[j + h];
        v[j] = a + b; v[j + h] = a - b;
      }
    }
  }
  const scale = 1 / Math.sqrt(n);
  for (let i = off; i < off + n; i++) v[i] *= scale;
}

/** Index of the level nearest to u (levels ascending), ties to the lower one:
 *  the reference's searchsorted rule, so an exact midpoint picks the lower.
 *  Exported for tests. */
export function nearestLevel(levels, u) {
  const last = levels.length - 1;
  let pos = 1; // first index >= 1 with levels[pos] >= u, at most last
  while (pos < last && levels[pos] < u) pos++;
  return Math.abs(u - levels[pos - 1]) <= Math.abs(u - levels[pos]) ? pos - 1 : pos;
}

const LUT_SIZE = 8192;

/** nearestLevel as a table over [-1, 1] (a unit vector's coordinates): a
 *  bucket holds the index when nearestLevel is the same at both (slightly
 *  widened) ends, which fixes it inside since nearestLevel is monotone in u,
 *  else -1 (decide exactly). Random data makes the search branches
 *  unpredictable; the table makes the quantiser several times faster. */
function levelTable(levels) {
  const lut = new Int8Array(LUT_SIZE);
  const width = 2 / LUT_SIZE;
  for (let j = 0; j < LUT_SIZE; j++) {
    const a = nearestLevel(levels, -1 + (j - 0.01) * width);
    lut[j] = a === nearestLevel(levels, -1 + (j + 1.01) * width) ? a : -1;
  }
  return lut;
}

/** Bytes of one packed CQ row and of the whole blob. */
export function cqLayout(rows, cols, bits, group) {
  const padded = Math.ceil(cols / group) * group;
  const streamBits = bits === TERNARY_RECORD_BITS ? 2 : bits;
  const rowBytes = (padded * streamBits) / 8;
  const groups = padded / group;
  return { padded, groups, rowBytes, streamBits, bytes: rows * rowBytes + rows * groups * 2 };
}

/** Appends one row of indices to blob at `at` as an LSB-first bitstream:
 *  eight indices fill exactly `bits` bytes, so each chunk of eight is built
 *  in a word and emitted byte by byte (bits <= 4 keeps the word in 32 bits). */
function packRow(idx, count, bits, blob, at) {
  for (let k = 0; k < count; k += 8) {
    let word = 0;
    for (let i = 0; i < 8; i++) word |= idx[k + i] << (i * bits);
    for (let b = 0; b < bits; b++) blob[at++] = (word >>> (8 * b)) & 0xff;
  }
}

/** Quantises a dense row-major [rows, cols] matrix into a CQ blob: packed
 *  index rows (LSB-first bitstream; ternary as crumbs 3,0,1) then fp16 norms
 *  [rows][groups]. bits: 2, 3, 4 or 5 (ternary marker). */
export function quantiseCq(dense, rows, cols, bits, group) {
  const { padded, groups, rowBytes, streamBits, bytes } = cqLayout(rows, cols, bits, group);
  const levels = Float64Array.from(cqLevels(bits, group));
  const code = Uint8Array.from(bits === TERNARY_RECORD_BITS ? [3, 0, 1] : levels.map((_, i) => i));
  const blob = new Uint8Array(bytes);
  const norms = new DataView(blob.buffer, rows * rowBytes);
  const buf = new Float64Array(padded);
  const idx = new Uint8Array(padded);
  const lut = levelTable(levels), scale = LUT_SIZE / 2;
  for (let r = 0; r < rows; r++) {
    buf.fill(0);
    for (let c = 0; c < cols; c++) buf[c] = dense[r * cols + c];
    for (let gi = 0; gi < groups; gi++) {
      const off = gi * group;
      fwht(buf, off, group);
      let sq = 0;
      for (let k = off; k < off + group; k++) sq += buf[k] * buf[k];
      const norm = Math.sqrt(sq), denom = Math.max(norm, 1e-12);
      for (let k = off; k < off + group; k++) {
        const u = buf[k] / denom;
        let level = lut[Math.min(Math.max(((u + 1) * scale) | 0, 0), LUT_SIZE - 1)];
        if (level < 0) level = nearestLevel(levels, u);
        idx[k] = code[level];
      }
      norms.setUint16((r * groups + gi) * 2, toFp16(norm), true);
    }
    packRow(idx, padded, streamBits, blob, r * rowBytes);
  }
  return blob;
}

export function fp16Blob(values) {
  const blob = new Uint8Array(values.length * 2);
  const view = new DataView(blob.buffer);
  for (let i = 0; i < values.length; i++) view.setUint16(i * 2, toFp16(values[i]), true);
  return blob;
}

// ---------------------------------------------------------------- random weights

const NORM_SCALES = /(norm_in|post_norm|pre_hada|q_norm|k_norm|final_norm)$/;

/** Random values for one tensor, scaled so activations stay near unit RMS:
 *  matrices ~ N(0, 1/fan_in), norm scales near 0 (zcrms uses 1 + s), Hadamard
 *  diagonals of magnitude near 1 with random signs, mHC gains in [0.1, 1]. */
export function randomValues(name, shape, rng) {
  const count = shape.reduce((a, b) => a * b, 1);
  const out = new Float32Array(count);
  const fill = (fn) => { for (let i = 0; i < count; i++) out[i] = fn(); return out; };
  const gaussian = (std) => { rng.gaussFill(out, std); return out; };
  const leaf = name.slice(name.lastIndexOf('.') + 1);
  if (name === 'embedding') return gaussian(1 / Math.sqrt(shape[1]));
  if (leaf === 'tables') return gaussian(1);
  if (shape.length === 2 && /(_proj|phi_\w+)$/.test(leaf) && !name.includes('_head.')) {
    return gaussian(1 / Math.sqrt(shape[1]));
  }
  if (NORM_SCALES.test(leaf)) return gaussian(0.1);
  if (leaf === 'attn_gate') return gaussian(1);
  if (/^d[1-4]$/.test(leaf)) return fill(() => (rng.next() & 1 ? -1 : 1) * (0.75 + 0.5 * rng.uniform()));
  if (/^a_(pre|post|res)$/.test(leaf)) return fill(() => 0.1 + 0.9 * rng.uniform());
  if (/^b_(pre|post|res)$/.test(leaf)) return gaussian(0.1);
  if (leaf === 'taps') return gaussian(0.5);
  // Needle 3: q/k/v convolution taps, the MLP's bias, Kronecker factors
  // (near-orthogonal) and conditioning, the heads' gains, queries and row biases.
  if (/^[qkv]_taps$/.test(leaf)) return gaussian(0.5);
  if (leaf === 'b2' || leaf === 'row_bias' || leaf === 'calibration') return gaussian(0.1);
  if (/^w[123][ab]$/.test(leaf)) return gaussian(1 / Math.sqrt(shape[shape.length - 1]));
  if (leaf === 'cond_v') return gaussian(1 / Math.sqrt(shape[0]));
  if (leaf === 'cond_u') return gaussian(0.1);
  if (leaf === 'gain' || leaf === 'query') return gaussian(1);
  if (leaf === 'probes') return gaussian(1);
  if (leaf === 'proj') return gaussian(1 / Math.sqrt(shape[1]));
  if (leaf === 'bias') return gaussian(0.1);
  throw new Error(`no random initialiser for tensor ${name}`);
}

// ---------------------------------------------------------------- geometry

const isPow2 = (n) => Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;

/** The geometry an archive will carry: preset fields overridden by the
 *  caller's, derived counts filled in, vocabulary checked against the
 *  tokenizer. Throws on anything the engine would reject. */
export function resolveGeometry(geometry, tokenizer, { kvWindow, kvBits } = {}) {
  const g = { ...RELEASED_GEOMETRY, ...geometry };
  g.orders = [...g.orders];
  g.sites = [...g.sites];
  if (geometry?.orders && geometry.orderCount === undefined) g.orderCount = g.orders.length;
  if (geometry?.sites && geometry.siteCount === undefined) g.siteCount = g.sites.length;
  if (geometry?.hidden && geometry.hadamardDimension === undefined) {
    g.hadamardDimension = 1 << Math.ceil(Math.log2(g.hidden));
  }
  if (kvWindow !== undefined) g.kvWindow = kvWindow;
  if (kvBits !== undefined) g.kvBits = kvBits;
  const pieces = tokenizerPieceCount(tokenizer);
  if (geometry?.vocabulary === null || geometry?.vocabulary === undefined) g.vocabulary = pieces;
  if (g.vocabulary !== pieces) {
    throw new Error(`geometry vocabulary ${g.vocabulary} != tokenizer piece count ${pieces}`);
  }
  checkGeometry(g);
  return g;
}

function checkGeometry(g) {
  const positive = ['vocabulary', 'hidden', 'queryHeads', 'kvHeads', 'layers', 'headDimension',
    'maximumSequence', 'hadamardDimension', 'lanes', 'engramSlots', 'engramSubDimension',
    'engramTables', 'engramTaps', 'engramDilation'];
  for (const key of positive) {
    if (!Number.isInteger(g[key]) || g[key] < 1 || g[key] > 0xffffffff) {
      throw new Error(`geometry ${key} must be a positive u32, got ${g[key]}`);
    }
  }
  if (g.queryHeads % g.kvHeads) throw new Error(`queryHeads ${g.queryHeads} not a multiple of kvHeads ${g.kvHeads}`);
  if (g.headDimension % 2) throw new Error(`headDimension ${g.headDimension} must be even (RoPE halves)`);
  if (!isPow2(g.hadamardDimension) || g.hadamardDimension < g.hidden) {
    throw new Error(`hadamardDimension ${g.hadamardDimension} must be a power of two >= hidden ${g.hidden}`);
  }
  if (![2, 3, 4, 8].includes(g.kvBits)) throw new Error(`kvBits ${g.kvBits} must be 2, 3, 4 or 8`);
  if (!Number.isInteger(g.kvWindow) || g.kvWindow < 0) throw new Error(`kvWindow ${g.kvWindow} must be >= 0`);
  if (g.orderCount < 1 || g.orderCount > 4 || g.orders.length < g.orderCount) {
    throw new Error(`orderCount ${g.orderCount} must be 1..4 with that many orders`);
  }
  if (g.engramTables % g.orderCount) {
    throw new Error(`engramTables ${g.engramTables} must be orderCount ${g.orderCount} x hash heads`);
  }
  if (g.siteCount < 0 || g.siteCount > 4 || g.sites.length < g.siteCount) {
    throw new Error(`siteCount ${g.siteCount} must be 0..4 with that many sites`);
  }
  const sites = g.sites.slice(0, g.siteCount);
  if (sites.some((s) => !Number.isInteger(s) || s < 0 || s >= g.layers) || new Set(sites).size !== sites.length) {
    throw new Error(`engram sites ${sites} must be distinct layers below ${g.layers}`);
  }
  if (!(g.ropeTheta > 0)) throw new Error(`ropeTheta ${g.ropeTheta} must be positive`);
}

function tokenizerPieceCount(tokenizer) {
  if (!(tokenizer instanceof Uint8Array) || tokenizer.length < 24) {
    throw new Error('options.tokenizer must be a RAW tokenizer blob (Uint8Array of at least 24 bytes)');
  }
  return new DataView(tokenizer.buffer, tokenizer.byteOffset, tokenizer.byteLength).getUint32(0, true);
}

// ---------------------------------------------------------------- writer

/** The record bits of a tensor from the `bits` option (Needle 3 adds 1). */
export function bitsFor(option, name, index, widths = [2, 3, 4]) {
  const bits = typeof option === 'function' ? option(name, index) : option;
  if (bits === 'ternary') return TERNARY_RECORD_BITS;
  if (!widths.includes(bits)) throw new Error(`tensor ${index} (${name}): bits ${bits} must be ${widths.join(', ')} or 'ternary'`);
  return bits;
}

export function groupFor(option, name, index) {
  const group = typeof option === 'function' ? option(name, index) : option;
  if (!isPow2(group) || group < 8 || group > 4096) {
    throw new Error(`tensor ${index} (${name}): group ${group} must be a power of two in 8..4096`);
  }
  return group;
}

export function denseValues(options, name, shape, index) {
  const count = shape.reduce((a, b) => a * b, 1);
  const given = options.weights ? options.weights(name, shape) : null;
  if (given !== null && given !== undefined) {
    if (given.length !== count) throw new Error(`weights for ${name}: ${given.length} values, shape needs ${count}`);
    return given;
  }
  return randomValues(name, shape, makeRng(options.seed ?? 0, index));
}

/** One encoded tensor: { record fields, blob }. */
function encodeTensor(options, tensor, index, kinds) {
  const { name, kind, shape } = tensor;
  if (kind === 'raw') return { dtype: DTYPE.RAW, shape, blob: options.tokenizer, group: 0, bits: 0 };
  if (name === 'heads.manifest') {
    return { dtype: DTYPE.FP16, shape, blob: fp16Blob(kinds.map((k) => HEAD_CODES[k])), group: 0, bits: 0 };
  }
  const values = denseValues(options, name, shape, index);
  if (kind === 'fp16') return { dtype: DTYPE.FP16, shape, blob: fp16Blob(values), group: 0, bits: 0 };
  const bits = bitsFor(options.bits ?? releasedBits, name, index);
  const group = groupFor(options.group ?? 128, name, index);
  return { dtype: DTYPE.CQ, shape, blob: quantiseCq(values, shape[0], shape[1], bits, group), group, bits };
}

const align = (n) => Math.ceil(n / ALIGN) * ALIGN;

/** Writes a whole archive and returns its bytes (a new Uint8Array).
 *  options: geometry (fields of RELEASED_GEOMETRY, missing ones from it;
 *  vocabulary null/absent = the tokenizer's piece count), tokenizer (RAW blob,
 *  required), seed (safe integer, default 0), heads (true | false | kinds),
 *  kvWindow, kvBits (override the geometry's), bits (2 | 3 | 4 | 'ternary' or
 *  (name, index) => that; default releasedBits), group (power of two or
 *  (name, index) => it; default 128), weights ((name, shape) => Float32Array
 *  of dense row-major values for any FP16 or CQ tensor but the manifest, or
 *  null for random ones). Names come from canonicalTensors: 'embedding',
 *  'layer00.q_proj', 'mhc.phi_pre', 'engram0.tables', 'confidence_head.proj'...
 *  The header codebook is divided by the embedding's group (tensor 0), the
 *  group the engine takes as the archive's. */
export function writeCact(options) {
  const g = resolveGeometry(options.geometry, options.tokenizer, options);
  const kinds = headKinds(options.heads ?? false);
  const tensors = canonicalTensors(g, { heads: kinds });
  const encoded = tensors.map((t, i) => encodeTensor(options, t, i, kinds));
  return assembleArchive(HEADER_BYTES, (view) => writeHeader(view, g, tensors.length), encoded);
}

/** The archive bytes: a header of headerBytes (filled by writeHeader(view)),
 *  the codebooks of record 0's group, the directory, then the encoded
 *  tensors' blobs, each 64-byte aligned. Both generations share this. */
export function assembleArchive(headerBytes, writeHeader, encoded) {
  const directory = headerBytes + CODEBOOK_LENGTH * 4;
  let pos = directory + encoded.length * RECORD_BYTES;
  for (const e of encoded) { e.offset = align(pos); pos = e.offset + e.blob.length; }
  if (!Number.isSafeInteger(pos)) throw new Error('archive too large');
  const bytes = new Uint8Array(pos);
  const view = new DataView(bytes.buffer);
  writeHeader(view);
  const codebook = headerCodebook(encoded[0].group);
  codebook.forEach((v, i) => view.setFloat32(headerBytes + i * 4, v, true));
  encoded.forEach((e, i) => {
    writeRecord(view, directory + i * RECORD_BYTES, e);
    bytes.set(e.blob, e.offset);
  });
  return bytes;
}

function writeHeader(view, g, tensorCount) {
  const fields = [TAG, tensorCount, CODEBOOK_LENGTH, g.kvWindow, g.kvBits, g.vocabulary, g.hidden,
    g.queryHeads, g.kvHeads, g.layers, g.headDimension, g.maximumSequence, g.hadamardDimension,
    g.lanes, g.engramSlots, g.engramSubDimension, g.engramTables, g.engramTaps, g.engramDilation,
    g.orderCount, ...pad4(g.orders, g.orderCount), g.siteCount, ...pad4(g.sites, g.siteCount)];
  fields.forEach((v, i) => view.setUint32(i * 4, v, true));
  view.setFloat32(29 * 4, g.ropeTheta, true);
}

const pad4 = (list, count) => [0, 1, 2, 3].map((i) => (i < count ? list[i] : 0));

function writeRecord(view, at, e) {
  view.setUint8(at, e.dtype);
  view.setUint8(at + 1, e.shape.length);
  e.shape.forEach((d, i) => view.setUint32(at + 4 + i * 4, d, true));
  view.setBigUint64(at + 20, BigInt(e.offset), true);
  view.setBigUint64(at + 28, BigInt(e.blob.length), true);
  view.setUint32(at + 36, e.group, true);
  view.setUint32(at + 40, e.bits, true);
}

// ---------------------------------------------------------------- tokenizers

const TYPE_BY_NAME = { '<pad>': 2, '</s>': 2, '<s>': 2, '<unk>': 1 };

/** A RAW tokenizer blob from pieces: strings (type inferred: <pad> </s> <s>
 *  control, <unk> unknown, <0xXX> byte, else normal; score -id) or
 *  { piece, score, type }. ids default to the base model's (pad 0, eos 1,
 *  bos 2, unk 3). */
export function makeTestTokenizerBlob(pieces, {
  padId = 0, eosId = 1, bosId = 2, unknownId = 3, addDummyPrefix = 1, byteFallback = 1,
} = {}) {
  const encoder = new TextEncoder();
  const records = pieces.map((p, id) => {
    const piece = typeof p === 'string' ? p : p.piece;
    const inferred = TYPE_BY_NAME[piece] ?? (/^<0x[0-9A-F]{2}>$/.test(piece) ? 4 : 0);
    const type = typeof p === 'string' || p.type === undefined ? inferred : p.type;
    const score = typeof p === 'string' || p.score === undefined ? -id : p.score;
    return { surface: encoder.encode(piece), type, score };
  });
  const size = records.reduce((n, r) => n + 7 + r.surface.length, 24);
  const blob = new Uint8Array(size);
  const view = new DataView(blob.buffer);
  [pieces.length, padId, eosId, bosId, unknownId].forEach((v, i) => view.setUint32(i * 4, v, true));
  view.setUint8(20, addDummyPrefix);
  view.setUint8(21, byteFallback);
  let at = 24;
  for (const r of records) {
    view.setFloat32(at, r.score, true);
    view.setUint8(at + 4, r.type);
    view.setUint16(at + 5, r.surface.length, true);
    blob.set(r.surface, at + 7);
    at += 7 + r.surface.length;
  }
  return blob;
}

const CHAT_MARKERS = ['<|im_start|>', '<|im_end|>', '<think>', '</think>', '<tools>', '</tools>',
  '<tool_call>', '</tool_call>', '<tool_result>', '</tool_result>'];
/** Needle 3's markers: the ten of Needle 2, then six more (ids 14..19). */
export const CHAT_MARKERS3 = Object.freeze([...CHAT_MARKERS,
  '<context>', '</context>', '<extract>', '</extract>', '<schema>', '</schema>']);

/** A synthetic vocabulary of `count` pieces laid out like the base model's:
 *  pad, eos, bos, unk, the chat markers (user-defined; Needle 2's ten unless
 *  given), 256 byte pieces, then normal pieces (ASCII letters, then made-up
 *  words). */
export function syntheticPieces(count, markers = CHAT_MARKERS) {
  const pieces = ['<pad>', '</s>', '<s>', '<unk>', ...markers.map((piece) => ({ piece, type: 3, score: 0 }))];
  for (let b = 0; b < 256; b++) pieces.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  for (const ch of `\u2581${letters}${letters.toUpperCase()}0123456789.,:;{}[]"'_-/()`) pieces.push(ch);
  for (let n = 0; pieces.length < count; n++) {
    let word = '';
    for (let v = n; ; v = Math.floor(v / 26) - 1) { word = letters[v % 26] + word; if (v < 26) break; }
    pieces.push(`\u2581${word}`);
    if (pieces.length < count && word.length > 1) pieces.push(word); // single letters are pieces already
  }
  return pieces.slice(0, count);
}

/** Node only: writes a random-weight archive (released geometry, kvWindow 256,
 *  kvBits 8, seed 1, both heads) or, with tiny, the tiny test archive (also
 *  with both heads), with the tokenizer of tests/fixtures/tokenizer/*.model
 *  when js/sentencepiece-model.js and the model exist, else a synthetic
 *  tokenizer. Returns { path, bytes, tensors, tokenizer: model path or
 *  'synthetic' }. */
export async function writeRandomArchive(path, { tiny = false } = {}) {
  const fs = await import('node:fs/promises');
  const { tokenizer, source } = await demoTokenizer(fs, tiny);
  const bytes = writeCact({
    geometry: tiny ? TINY_GEOMETRY : RELEASED_GEOMETRY,
    seed: 1, heads: true, tokenizer, kvWindow: tiny ? TINY_GEOMETRY.kvWindow : 256, kvBits: 8,
  });
  await fs.writeFile(path, bytes);
  return { path, bytes: bytes.length, tensors: new DataView(bytes.buffer).getUint32(4, true), tokenizer: source };
}

async function demoTokenizer(fs, tiny) {
  const dir = new URL('../tests/fixtures/tokenizer/', import.meta.url);
  let models = [];
  try { models = (await fs.readdir(dir)).filter((f) => f.endsWith('.model')).sort(); } catch { /* no fixture yet */ }
  if (models.length) {
    let convert = null;
    try { ({ tokenizerBlobFromModel: convert } = await import('./sentencepiece-model.js')); } catch { /* not written yet */ }
    if (convert) {
      const file = new URL(models[0], dir);
      return { tokenizer: convert(new Uint8Array(await fs.readFile(file))), source: file.pathname };
    }
  }
  const count = tiny ? 512 : RELEASED_GEOMETRY.vocabulary;
  return { tokenizer: makeTestTokenizerBlob(syntheticPieces(count)), source: 'synthetic' };
}
