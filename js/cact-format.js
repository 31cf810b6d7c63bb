// cact-format.js: the constants of the .cact archive and the canonical list of
// tensors a geometry implies (names, kinds, shapes, in file order). The engine
// reads tensors by position only; the names here exist for writers, tests and
// error messages. See shared/seed (archive layout) and spec section 2 (shapes).
// ES module, no dependencies.

export const TAG = 0x05e12a83;
export const HEADER_BYTES = 120;   // 29 u32 fields, then the f32 rope theta
export const RECORD_BYTES = 44;
export const ALIGN = 64;           // every blob starts on a 64-byte boundary
export const CODEBOOK_LENGTH = 28; // CQ2 levels 0..3, CQ3 4..11, CQ4 12..27
export const CODEBOOK_OFFSETS = { 2: 0, 3: 4, 4: 12 };
export const DTYPE = { FP16: 1, FP32: 2, CQ: 3, RAW: 4 };
export const TERNARY_RECORD_BITS = 5; // a format marker: stored as 2-bit crumbs
export const TERNARY_LEVEL = 1.2240064;
export const HEAD_CODES = { contrastive: 1, confidence: 2 };
// Probe heads in canonical order: probes per head and projection outputs.
export const HEAD_SHAPES = {
  contrastive: { probes: 4, out: 128 },
  confidence: { probes: 8, out: 1 },
};

// Lloyd-Max levels of a unit Gaussian, in float64, as the reference exporter
// derives them (200 iterations over 400000 samples of numpy's RandomState(0)
// randn); obtained by running that procedure, so archives written here carry
// the same f32 codebook bytes as the reference's.
export const LLOYD_MAX_LEVELS = {
  // Binary (Needle 3 only, not in the header): the analytic +-sqrt(2/pi).
  1: [-Math.sqrt(2 / Math.PI), Math.sqrt(2 / Math.PI)],
  2: [-1.5066708475715247, -0.4514406093934405, 0.4529474939511613, 1.5099326242547164],
  3: [-2.141247862845774, -1.3337164609389893, -0.7483982925010272, -0.23774016363616238,
    0.2500446195658646, 0.7555868210708537, 1.3379826350451236, 2.1476362705161427],
  4: [-2.709990028558534, -2.0444556051349223, -1.5947570221842275, -1.2333361910827123,
    -0.9222139662739897, -0.6395373737252813, -0.37266394934485414, -0.11445072030649898,
    0.14380628677643076, 0.4039889754802918, 0.6726933686864702, 0.9614053009735016,
    1.275525783123495, 1.6370587960592822, 2.0844263722579237, 2.7410141261982846],
};

/** Levels of one CQ width for a quantisation group, as f32 values (sorted
 *  ascending): Lloyd-Max / sqrt(group), or the three ternary levels when bits
 *  is 'ternary' or the record marker 5. */
export function cqLevels(bits, group) {
  const unit = bits === 'ternary' || bits === TERNARY_RECORD_BITS
    ? [-TERNARY_LEVEL, 0, TERNARY_LEVEL] : LLOYD_MAX_LEVELS[bits];
  if (!unit) throw new Error(`no CQ codebook for bits ${bits}`);
  const scale = Math.sqrt(group);
  return Float32Array.from(unit, (v) => v / scale);
}

/** The 28 shared header levels (CQ2 | CQ3 | CQ4) for a group. */
export function headerCodebook(group) {
  const out = new Float32Array(CODEBOOK_LENGTH);
  for (const bits of [2, 3, 4]) out.set(cqLevels(bits, group), CODEBOOK_OFFSETS[bits]);
  return out;
}

// Header fields after the tag, in file order (u32 unless noted).
export const HEADER_FIELDS = [
  'tensorCount', 'codebookLength', 'kvWindow', 'kvBits', 'vocabulary', 'hidden',
  'queryHeads', 'kvHeads', 'layers', 'headDimension', 'maximumSequence',
  'hadamardDimension', 'lanes', 'engramSlots', 'engramSubDimension', 'engramTables',
  'engramTaps', 'engramDilation', 'orderCount', 'orders[4]', 'siteCount', 'sites[4]',
  'ropeTheta (f32)',
];

/** Spec section 1: the released base model. tensorCount and codebookLength are
 *  filled in by the writer. */
export const RELEASED_GEOMETRY = Object.freeze({
  kvWindow: 256, kvBits: 8,
  vocabulary: 8192, hidden: 512, queryHeads: 8, kvHeads: 4, layers: 27,
  headDimension: 64, maximumSequence: 2048, hadamardDimension: 512, lanes: 4,
  engramSlots: 8192, engramSubDimension: 128, engramTables: 4, engramTaps: 4,
  engramDilation: 3, orderCount: 2, orders: Object.freeze([2, 3]),
  siteCount: 2, sites: Object.freeze([2, 15]), ropeTheta: 100000,
});

/** A small model for tests: every feature of the released one (GQA, lanes,
 *  two engram sites with two orders and two hash heads each, padding of CQ
 *  rows when the group exceeds the width). vocabulary null = taken from the
 *  tokenizer blob. */
export const TINY_GEOMETRY = Object.freeze({
  kvWindow: 32, kvBits: 8,
  vocabulary: null, hidden: 64, queryHeads: 4, kvHeads: 2, layers: 2,
  headDimension: 16, maximumSequence: 256, hadamardDimension: 64, lanes: 2,
  engramSlots: 64, engramSubDimension: 16, engramTables: 4, engramTaps: 4,
  engramDilation: 3, orderCount: 2, orders: Object.freeze([2, 3]),
  siteCount: 2, sites: Object.freeze([0, 1]), ropeTheta: 10000,
});

const LAYER_TENSORS = [
  ['norm_in', 'fp16', (g) => [g.hidden]],
  ['q_proj', 'cq', (g) => [g.queryHeads * g.headDimension, g.hidden]],
  ['k_proj', 'cq', (g) => [g.kvHeads * g.headDimension, g.hidden]],
  ['v_proj', 'cq', (g) => [g.kvHeads * g.headDimension, g.hidden]],
  ['q_norm', 'fp16', (g) => [g.headDimension]],
  ['k_norm', 'fp16', (g) => [g.headDimension]],
  ['gate_proj', 'cq', (g) => [g.queryHeads * g.headDimension, g.hidden]],
  ['out_proj', 'cq', (g) => [g.hidden, g.queryHeads * g.headDimension]],
  ['post_norm', 'fp16', (g) => [g.hidden]],
  ['attn_gate', 'fp16', () => [1]],
  ['pre_hada', 'fp16', (g) => [g.hidden]],
  ['d1', 'fp16', (g) => [g.hadamardDimension]],
  ['d2', 'fp16', (g) => [g.hadamardDimension]],
  ['d3', 'fp16', (g) => [g.hadamardDimension]],
];

const MHC_TENSORS = [
  ['a_pre', 'fp16', (g) => [g.layers]],
  ['a_post', 'fp16', (g) => [g.layers]],
  ['a_res', 'fp16', (g) => [g.layers]],
  ['b_pre', 'fp16', (g) => [g.layers, g.lanes]],
  ['b_post', 'fp16', (g) => [g.layers, g.lanes]],
  ['b_res', 'fp16', (g) => [g.layers, g.lanes, g.lanes]],
  ['phi_pre', 'cq', (g) => [g.layers * g.lanes, g.lanes * g.hidden]],
  ['phi_post', 'cq', (g) => [g.layers * g.lanes, g.lanes * g.hidden]],
  ['phi_res', 'cq', (g) => [g.layers * g.lanes * g.lanes, g.lanes * g.hidden]],
];

const SITE_TENSORS = [
  ['tables', 'cq', (g) => [g.engramTables * g.engramSlots, g.engramSubDimension]],
  ['key_proj', 'cq', (g) => [g.hidden, g.engramTables * g.engramSubDimension]],
  ['value_proj', 'cq', (g) => [g.hidden, g.engramTables * g.engramSubDimension]],
  ['taps', 'fp16', (g) => [g.engramTaps, g.hidden]],
];

/** Normalises the `heads` option to head kinds in canonical order. */
export function headKinds(heads) {
  if (heads === true) return ['contrastive', 'confidence'];
  if (!heads) return [];
  if (!Array.isArray(heads)) throw new Error('heads must be true, false or a list of head kinds');
  for (const kind of heads) {
    if (!(kind in HEAD_CODES)) throw new Error(`unknown probe head ${JSON.stringify(kind)}`);
  }
  return Object.keys(HEAD_CODES).filter((kind) => heads.includes(kind));
}

/** The tensors of an archive in canonical order: [{ name, kind, shape }],
 *  kind 'fp16' | 'cq' | 'raw'. The last entry is the RAW tokenizer (rank 0). */
export function canonicalTensors(geometry, { heads = false } = {}) {
  const g = geometry;
  const list = [{ name: 'embedding', kind: 'cq', shape: [g.vocabulary, g.hidden] }];
  const add = (prefix, table) => {
    for (const [name, kind, shape] of table) list.push({ name: prefix + name, kind, shape: shape(g) });
  };
  for (let i = 0; i < g.layers; i++) add(`layer${String(i).padStart(2, '0')}.`, LAYER_TENSORS);
  add('mhc.', MHC_TENSORS);
  for (let s = 0; s < g.siteCount; s++) add(`engram${s}.`, SITE_TENSORS);
  list.push({ name: 'final_norm', kind: 'fp16', shape: [g.hidden] });
  const kinds = headKinds(heads);
  if (kinds.length) {
    list.push({ name: 'heads.manifest', kind: 'fp16', shape: [kinds.length] });
    for (const kind of kinds) {
      const { probes, out } = HEAD_SHAPES[kind];
      list.push({ name: `${kind}_head.probes`, kind: 'fp16', shape: [probes, g.hidden] });
      list.push({ name: `${kind}_head.proj`, kind: 'fp16', shape: [out, probes * g.hidden] });
      list.push({ name: `${kind}_head.bias`, kind: 'fp16', shape: [out] });
    }
  }
  list.push({ name: 'tokenizer', kind: 'raw', shape: [] });
  return list;
}

/** Bits of the released archive (spec section 1): CQ4 for the embedding and
 *  the mHC Phi matrices, CQ2 for every other CQ matrix. */
export function releasedBits(name) {
  return name === 'embedding' || name.startsWith('mhc.phi_') ? 4 : 2;
}
