// An independent, minimal .cact reader for the float64 reference model (the
// test oracle). It follows the archive layout (seed 000) and the tensor table
// of spec needle2-model.md section 2 directly, shares no code with js/ or src/,
// and favours clarity over speed: FP16/FP32 tensors become Float64Arrays, CQ
// matrices are dequantised in float64 on first use and cached on the tensor.
//
//   readArchive(bytes) -> { geometry, codebook, weightGroup, tensors, weights,
//                           tokenizer, tokenizerInfo, heads }

import { fwht, isPowerOfTwo } from './hadamard.js';

export const TAG = 0x05e12a83;
export const HEADER_BYTES = 120;
export const RECORD_BYTES = 44;
export const DTYPE = { FP16: 1, FP32: 2, CQ: 3, RAW: 4 };
export const TERNARY_RECORD_BITS = 5;
export const TERNARY_LEVEL = 1.2240064;
export const HEAD_CODE = { CONTRASTIVE: 1, CONFIDENCE: 2 };
const CODEBOOK_OFFSET = { 2: 0, 3: 4, 4: 12 }; // CQ2 0..3, CQ3 4..11, CQ4 12..27
const CODEBOOK_LENGTH = 28;
const PER_LAYER = 14;
const MHC_COUNT = 9;
const PER_SITE = 4;

/** IEEE binary16 bits -> number (exact). */
export function halfToNumber(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 31) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** number -> nearest binary16 value (ties to even) -> number: what fp16(x) means in the spec. */
export function roundToHalf(x) {
  if (!Number.isFinite(x) || x === 0) return x;
  const a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  while (2 ** e > a) e -= 1; // guard log2 rounding near powers of two
  while (2 ** (e + 1) <= a) e += 1;
  const ulp = 2 ** (Math.max(e, -14) - 10); // half spacing: 10 mantissa bits, subnormals below 2^-14
  const q = a / ulp; // exact: scaling by a power of two
  const f = Math.floor(q);
  const r = q - f > 0.5 || (q - f === 0.5 && f % 2 === 1) ? f + 1 : f;
  const y = r * ulp;
  return Math.sign(x) * (y > 65504 ? Infinity : y);
}

function readHeader(view) {
  const u32 = (field) => view.getUint32(field * 4, true);
  if (u32(0) !== TAG) throw new Error(`not a .cact archive: tag 0x${u32(0).toString(16)}`);
  return {
    tensorCount: u32(1), codebookLength: u32(2), kvWindow: u32(3), kvBits: u32(4),
    vocabulary: u32(5), hidden: u32(6), queryHeads: u32(7), kvHeads: u32(8), layers: u32(9),
    headDimension: u32(10), maximumSequence: u32(11), hadamardDimension: u32(12), lanes: u32(13),
    engramSlots: u32(14), engramSubDimension: u32(15), engramTables: u32(16),
    engramTaps: u32(17), engramDilation: u32(18),
    orderCount: u32(19), orders: [u32(20), u32(21), u32(22), u32(23)].slice(0, u32(19)),
    siteCount: u32(24), sites: [u32(25), u32(26), u32(27), u32(28)].slice(0, u32(24)),
    ropeTheta: view.getFloat32(29 * 4, true),
  };
}

function checkGeometry(g) {
  const fail = (why) => { throw new Error(`bad geometry: ${why}`); };
  if (g.codebookLength !== CODEBOOK_LENGTH) fail(`codebookLength ${g.codebookLength} != 28`);
  for (const f of ['vocabulary', 'hidden', 'queryHeads', 'kvHeads', 'layers', 'headDimension', 'lanes']) {
    if (g[f] === 0) fail(`${f} is 0`);
  }
  if (g.queryHeads % g.kvHeads) fail(`queryHeads ${g.queryHeads} not a multiple of kvHeads ${g.kvHeads}`);
  if (g.headDimension % 2) fail(`headDimension ${g.headDimension} is odd (RoPE half split)`);
  if (!isPowerOfTwo(g.hadamardDimension) || g.hadamardDimension < g.hidden) {
    fail(`hadamardDimension ${g.hadamardDimension} is not a power of two >= hidden ${g.hidden}`);
  }
  if (g.orderCount > 4 || g.siteCount > 4) fail('more than 4 orders or sites');
  if (g.siteCount > 0) {
    if (g.orderCount === 0 || g.engramTables % g.orderCount) fail(`engramTables ${g.engramTables} vs orderCount ${g.orderCount}`);
    if (g.engramSlots === 0 || g.engramSubDimension === 0 || g.engramTaps === 0) fail('zero engram dimension');
    if (g.orders.some((o) => o === 0)) fail('engram order 0');
    if (new Set(g.sites).size !== g.sites.length) fail(`engram sites repeat a layer: ${g.sites}`);
    if (g.sites.some((s) => s >= g.layers)) fail(`engram site beyond layer ${g.layers - 1}`);
  }
  if (![2, 3, 4, 8].includes(g.kvBits)) fail(`kvBits ${g.kvBits}`);
}

export function readRecord(view, offset, fileLength, index) {
  const rank = view.getUint8(offset + 1);
  if (rank > 4) throw new Error(`tensor ${index}: rank ${rank} > 4`);
  const start = view.getBigUint64(offset + 20, true);
  const length = view.getBigUint64(offset + 28, true);
  if (start + length > BigInt(fileLength)) {
    throw new Error(`tensor ${index}: blob [${start}, +${length}) beyond file end ${fileLength}`);
  }
  return {
    dtype: view.getUint8(offset),
    shape: Array.from({ length: rank }, (_, i) => view.getUint32(offset + 4 + i * 4, true)),
    offset: Number(start),
    bytes: Number(length),
    group: view.getUint32(offset + 36, true),
    bits: view.getUint32(offset + 40, true),
  };
}

const product = (shape) => shape.reduce((a, b) => a * b, 1);

/** Levels of one CQ record: header levels * sqrt(weightGroup / recordGroup) (spec section 5);
 *  ternary (bits 5) crumbs 0, 1, 3 are 0, +c, -c over sqrt(recordGroup); crumb 2 is invalid. */
function recordLevels(codebook, weightGroup, record) {
  if (record.bits === 1) { // binary (Needle 3): the analytic +-sqrt(2/pi)
    const c = Math.sqrt(2 / Math.PI) / Math.sqrt(record.group);
    return Float64Array.from([-c, c]);
  }
  if (record.bits === TERNARY_RECORD_BITS) {
    const c = TERNARY_LEVEL / Math.sqrt(record.group);
    return Float64Array.from([0, c, NaN, -c]);
  }
  const o = CODEBOOK_OFFSET[record.bits];
  const rescale = Math.sqrt(weightGroup / record.group);
  return Float64Array.from(codebook.subarray(o, o + (1 << record.bits)), (l) => l * rescale);
}

function decodeCq(bytes, record, index, codebook, weightGroup) {
  const { shape, group, bits } = record;
  if (shape.length !== 2) throw new Error(`tensor ${index}: CQ rank ${shape.length} != 2`);
  if (!isPowerOfTwo(group)) throw new Error(`tensor ${index}: CQ group ${group} not a power of two`);
  if (![1, 2, 3, 4, TERNARY_RECORD_BITS].includes(bits)) throw new Error(`tensor ${index}: CQ bits ${bits}`);
  const [rows, cols] = shape;
  const streamBits = bits === TERNARY_RECORD_BITS ? 2 : bits;
  const groups = Math.ceil(cols / group);
  if ((groups * group * streamBits) % 8) throw new Error(`tensor ${index}: CQ row is not whole bytes`);
  const rowBytes = (groups * group * streamBits) / 8;
  const packedBytes = rows * rowBytes;
  if (record.bytes !== packedBytes + rows * groups * 2) {
    throw new Error(`tensor ${index}: CQ blob ${record.bytes} bytes, expected ${packedBytes + rows * groups * 2}`);
  }
  const packed = bytes.subarray(record.offset, record.offset + packedBytes);
  const normView = new DataView(bytes.buffer, bytes.byteOffset + record.offset + packedBytes, rows * groups * 2);
  const norms = new Float64Array(rows * groups);
  for (let i = 0; i < norms.length; i++) norms[i] = halfToNumber(normView.getUint16(i * 2, true));
  return {
    dtype: DTYPE.CQ, shape, rows, cols, group, bits, streamBits, groups, rowBytes,
    levels: recordLevels(codebook, weightGroup, record), packed, norms,
    cache: { dense: null, rows: new Map() },
  };
}

export function decodeTensor(bytes, record, index, codebook, weightGroup) {
  const { dtype, shape, offset } = record;
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, record.bytes);
  if (dtype === DTYPE.FP16 || dtype === DTYPE.FP32) {
    const size = dtype === DTYPE.FP16 ? 2 : 4;
    const count = product(shape);
    if (record.bytes !== count * size) throw new Error(`tensor ${index}: ${record.bytes} bytes for ${count} values`);
    const data = new Float64Array(count);
    for (let i = 0; i < count; i++) {
      data[i] = size === 2 ? halfToNumber(view.getUint16(2 * i, true)) : view.getFloat32(4 * i, true);
    }
    return { dtype, shape, data };
  }
  if (dtype === DTYPE.CQ) return decodeCq(bytes, record, index, codebook, weightGroup);
  if (dtype === DTYPE.RAW) return { dtype, shape, data: bytes.subarray(offset, offset + record.bytes) };
  throw new Error(`tensor ${index}: unknown dtype ${dtype}`);
}

/** Index k of row r of a CQ tensor: a little-endian bitstream per row. */
export function cqIndex(t, r, k) {
  const bit = k * t.streamBits;
  const at = r * t.rowBytes + (bit >> 3);
  const low = t.packed[at];
  const high = (bit & 7) + t.streamBits > 8 ? t.packed[at + 1] : 0;
  return ((low | (high << 8)) >> (bit & 7)) & ((1 << t.streamBits) - 1);
}

/** Row r of a CQ tensor, dequantised: per group (levels[idx] * norm) @ Hg, padding dropped. Cached. */
export function cqRow(t, r) {
  const cached = t.cache.rows.get(r);
  if (cached) return cached;
  const row = new Float64Array(t.groups * t.group);
  for (let gi = 0; gi < t.groups; gi++) {
    const norm = t.norms[r * t.groups + gi];
    const rotated = new Float64Array(t.group);
    for (let k = 0; k < t.group; k++) {
      const level = t.levels[cqIndex(t, r, gi * t.group + k)];
      if (Number.isNaN(level)) throw new Error(`CQ row ${r}: invalid ternary crumb 2`);
      rotated[k] = level * norm;
    }
    row.set(fwht(rotated), gi * t.group); // Hg symmetric: rotated @ Hg == Hg rotated
  }
  const out = row.slice(0, t.cols);
  t.cache.rows.set(r, out);
  return out;
}

/** A rank-2 tensor as { rows, cols, data } (row-major float64); CQ dequantised once and cached. */
export function denseMatrix(t) {
  if (t.dtype !== DTYPE.CQ) {
    if (t.shape.length !== 2) throw new Error(`denseMatrix: rank ${t.shape.length}`);
    return { rows: t.shape[0], cols: t.shape[1], data: t.data };
  }
  if (!t.cache.dense) {
    const data = new Float64Array(t.rows * t.cols);
    for (let r = 0; r < t.rows; r++) data.set(cqRow(t, r), r * t.cols);
    t.cache.rows.clear(); // the dense copy supersedes the per-row cache
    t.cache.dense = { rows: t.rows, cols: t.cols, data };
  }
  return t.cache.dense;
}

/** A row gather (embedding, engram tables) without dequantising the whole matrix. */
export function matrixRow(t, r) {
  if (t.dtype === DTYPE.CQ) {
    if (t.cache.dense) return t.cache.dense.data.subarray(r * t.cols, (r + 1) * t.cols);
    return cqRow(t, r);
  }
  const cols = t.shape[1];
  return t.data.subarray(r * cols, (r + 1) * cols);
}

export function tokenizerInfo(blob) {
  if (blob.length < 24) throw new Error(`tokenizer blob of ${blob.length} bytes < 24`);
  const v = new DataView(blob.buffer, blob.byteOffset, blob.length);
  return {
    pieceCount: v.getUint32(0, true), padId: v.getUint32(4, true), eosId: v.getUint32(8, true),
    bosId: v.getUint32(12, true), unknownId: v.getUint32(16, true),
    addDummyPrefix: v.getUint8(20), byteFallback: v.getUint8(21),
  };
}

/** Names every tensor by canonical position (spec section 2) and checks its dtype and shape. */
function nameTensors(g, tensors) {
  const d = g.hidden, n = g.lanes, L = g.layers, hd = g.headDimension, N = g.hadamardDimension;
  let at = 0;
  const take = (what, dtypes, shape) => {
    const t = tensors[at];
    if (!t) throw new Error(`missing tensor ${at} (${what})`);
    if (!dtypes.includes(t.dtype)) throw new Error(`tensor ${at} (${what}): dtype ${t.dtype}, expected ${dtypes}`);
    if (shape && (t.shape.length !== shape.length || t.shape.some((s, i) => s !== shape[i]))) {
      throw new Error(`tensor ${at} (${what}): shape [${t.shape}], expected [${shape}]`);
    }
    at += 1;
    return t;
  };
  const cq = [DTYPE.CQ];
  const dense = [DTYPE.FP16, DTYPE.FP32];
  const vector = (what, len) => take(what, dense, [len]).data;
  const w = { embedding: take('embedding', cq, [g.vocabulary, d]), layers: [], sites: [], heads: [] };
  for (let i = 0; i < L; i++) {
    w.layers.push({
      normIn: vector(`layer ${i} norm_in`, d),
      q: take(`layer ${i} q_proj`, cq, [g.queryHeads * hd, d]),
      k: take(`layer ${i} k_proj`, cq, [g.kvHeads * hd, d]),
      v: take(`layer ${i} v_proj`, cq, [g.kvHeads * hd, d]),
      qNorm: vector(`layer ${i} q_norm`, hd),
      kNorm: vector(`layer ${i} k_norm`, hd),
      gate: take(`layer ${i} gate_proj`, cq, [g.queryHeads * hd, d]),
      out: take(`layer ${i} out_proj`, cq, [d, g.queryHeads * hd]),
      postNorm: vector(`layer ${i} post_norm`, d),
      attnGate: vector(`layer ${i} attn_gate`, 1)[0],
      preHada: vector(`layer ${i} pre_hada`, d),
      d1: vector(`layer ${i} d1`, N), d2: vector(`layer ${i} d2`, N), d3: vector(`layer ${i} d3`, N),
    });
  }
  w.mhc = {
    aPre: vector('a_pre', L), aPost: vector('a_post', L), aRes: vector('a_res', L),
    bPre: take('b_pre', dense, [L, n]).data, bPost: take('b_post', dense, [L, n]).data,
    bRes: take('b_res', dense, [L, n, n]).data,
    phiPre: take('phi_pre', cq, [L * n, n * d]), phiPost: take('phi_post', cq, [L * n, n * d]),
    phiRes: take('phi_res', cq, [L * n * n, n * d]),
  };
  const tableWidth = g.engramTables * g.engramSubDimension;
  for (let s = 0; s < g.siteCount; s++) {
    w.sites.push({
      layer: g.sites[s],
      tables: take(`site ${s} tables`, cq, [g.engramTables * g.engramSlots, g.engramSubDimension]),
      key: take(`site ${s} key_proj`, cq, [d, tableWidth]),
      value: take(`site ${s} value_proj`, cq, [d, tableWidth]),
      taps: take(`site ${s} taps`, dense, [g.engramTaps, d]).data,
    });
  }
  w.finalNorm = vector('final_norm', d);
  const hasTokenizer = tensors.length > 0 && tensors[tensors.length - 1].dtype === DTYPE.RAW;
  const extra = tensors.length - at - (hasTokenizer ? 1 : 0);
  if (extra > 0) {
    if ((extra - 1) % 3) throw new Error(`${extra} tensors after final_norm: not manifest + triples`);
    const codes = take('heads manifest', dense, [(extra - 1) / 3]).data;
    for (const code of codes) {
      const P = code === HEAD_CODE.CONTRASTIVE ? 4 : code === HEAD_CODE.CONFIDENCE ? 8 : 0;
      if (!P) throw new Error(`unknown head code ${code}`);
      const probes = take(`head ${code} probes`, dense, [P, d]);
      const proj = take(`head ${code} proj`, dense);
      if (proj.shape.length !== 2 || proj.shape[1] !== P * d) throw new Error(`head ${code} proj shape [${proj.shape}]`);
      const bias = take(`head ${code} bias`, dense, [proj.shape[0]]).data;
      w.heads.push({ code, P, probes: denseMatrix(probes), proj: denseMatrix(proj), bias });
    }
  }
  if (hasTokenizer) at += 1;
  if (at !== tensors.length) throw new Error(`${tensors.length} tensors, canonical order accounts for ${at}`);
  return w;
}

/** Parses a whole .cact archive (Uint8Array). Throws Error with one precise line on bad input. */
export function readArchive(bytes) {
  if (!(bytes instanceof Uint8Array)) throw new TypeError('readArchive: expected a Uint8Array');
  if (bytes.length < HEADER_BYTES) throw new Error(`archive of ${bytes.length} bytes < header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const geometry = readHeader(view);
  checkGeometry(geometry);
  const directory = HEADER_BYTES + geometry.codebookLength * 4;
  if (directory + geometry.tensorCount * RECORD_BYTES > bytes.length) throw new Error('directory beyond file end');
  const codebook = new Float64Array(geometry.codebookLength);
  for (let i = 0; i < codebook.length; i++) codebook[i] = view.getFloat32(HEADER_BYTES + 4 * i, true);
  const records = [];
  for (let i = 0; i < geometry.tensorCount; i++) {
    records.push(readRecord(view, directory + i * RECORD_BYTES, bytes.length, i));
  }
  // The codebooks were divided by sqrt of the export group: read it from the first record.
  if (records.length === 0 || records[0].dtype !== DTYPE.CQ) throw new Error('tensor 0 (embedding) is not CQ');
  const weightGroup = records[0].group;
  const tensors = records.map((r, i) => decodeTensor(bytes, r, i, codebook, weightGroup));
  const weights = nameTensors(geometry, tensors);
  const last = tensors[tensors.length - 1];
  const tokenizer = last.dtype === DTYPE.RAW ? last.data : null;
  return {
    geometry, codebook, weightGroup, records, tensors, weights, tokenizer,
    tokenizerInfo: tokenizer ? tokenizerInfo(tokenizer) : null,
  };
}
