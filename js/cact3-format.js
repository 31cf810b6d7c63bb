// cact3-format.js: the Needle 3 generation of the .cact archive (tag
// 0x05E12A84, needle3-model.md sections 1-3): its header fields and the
// canonical list of tensors a geometry implies. Records, codebooks, blobs and
// the tokenizer are as in Needle 2 (cact-format.js). ES module, no dependencies.

export const TAG3 = 0x05e12a84;
export const HEADER3_BYTES = 196; // 48 u32 fields, then the f32 rope theta
export const MAX_SITES3 = 16;
export const COND_RANK = 8;       // rank of the MLP's conditioning term
// Manifest codes; the router (3) has one tensor more (calibration) and comes last.
export const HEAD3_CODES = { embedding: 1, confidence: 2, router: 3 };
export const HEAD3_OUTPUTS = { embedding: 128, confidence: 1, router: 3 };

/** The header's u32 words in file order (the f32 rope theta follows). */
export function header3Words(g, tensorCount, codebookLength) {
  const mask = (g.globalLayers ?? []).reduce((m, i) => m | (1n << BigInt(i)), 0n);
  const pad = (list, count, n) => Array.from({ length: n }, (_, i) => (i < count ? list[i] : 0));
  return [TAG3, tensorCount, codebookLength, g.kvWindow, g.kvBits, g.vocabulary, g.outVocabulary,
    g.hidden, g.queryHeads, g.kvHeads, g.layers, g.headDimension, g.vHeadDimension, g.maximumSequence,
    g.hadamardDimension, g.lanes, g.slidingWindow, Number(mask & 0xffffffffn), Number(mask >> 32n),
    g.qkvConvTaps, g.engramSlots, g.engramSubDimension, g.engramTables, g.engramTaps, g.engramDilation,
    g.engramSeedHeads, g.orders.length, ...pad(g.orders, g.orders.length, 4), g.sites.length,
    ...pad(g.sites, g.sites.length, MAX_SITES3)];
}

/** Section 1: the released base model (headDimension is the q/k width). */
export const RELEASED3_GEOMETRY = Object.freeze({
  kvWindow: 256, kvBits: 8, vocabulary: 8192, outVocabulary: 8192, hidden: 768, queryHeads: 12,
  kvHeads: 2, layers: 20, headDimension: 48, vHeadDimension: 64, maximumSequence: 8192,
  hadamardDimension: 1024, lanes: 4, slidingWindow: 1024, globalLayers: Object.freeze([4, 9, 14, 19]),
  qkvConvTaps: 3, engramSlots: 18432, engramSubDimension: 128, engramTables: 6, engramTaps: 4,
  engramDilation: 3, engramSeedHeads: 0, orders: Object.freeze([2, 3]),
  sites: Object.freeze([3, 7, 11, 15, 19]), ropeTheta: 100000,
});
/** The released file's heads: the confidence head with 4 probes per cell and 4 queries. */
export const RELEASED3_HEADS = Object.freeze([Object.freeze({ kind: 'confidence', probes: 4, queries: 4 })]);

/** A small Needle 3 for tests: split q/k and v widths, the convolution, a
 *  sliding window with one global layer, three engram sites, a non-square
 *  Kronecker split (N 64 = 8 x 8; hidden 48 pads to it). */
export const TINY3_GEOMETRY = Object.freeze({
  kvWindow: 32, kvBits: 8, vocabulary: null, outVocabulary: 0, hidden: 48, queryHeads: 4, kvHeads: 2,
  layers: 3, headDimension: 12, vHeadDimension: 16, maximumSequence: 256, hadamardDimension: 64,
  lanes: 2, slidingWindow: 8, globalLayers: Object.freeze([2]), qkvConvTaps: 3, engramSlots: 32,
  engramSubDimension: 8, engramTables: 4, engramTaps: 4, engramDilation: 3, engramSeedHeads: 0,
  orders: Object.freeze([2, 3]), sites: Object.freeze([0, 1, 2]), ropeTheta: 10000,
});

/** The Kronecker split of the MLP width N: [ba, bb], ba = 2^floor(bitlen(N-1)/2). */
export function kroneckerSplit(n) {
  const ba = 2 ** Math.floor((32 - Math.clz32(n - 1)) / 2); // bitlen(N-1), 0 for N = 1
  return [ba, n / ba];
}

const LAYER3 = (g) => {
  const d = g.hidden, N = g.hadamardDimension, C = g.qkvConvTaps;
  const qw = g.queryHeads * g.headDimension, kw = g.kvHeads * g.headDimension;
  const vw = g.kvHeads * g.vHeadDimension, ow = g.queryHeads * g.vHeadDimension;
  const [ba, bb] = kroneckerSplit(N);
  return [
    ['norm_in', 'fp16', [d]], ['q_proj', 'cq', [qw, d]], ['k_proj', 'cq', [kw, d]], ['v_proj', 'cq', [vw, d]],
    ...(C ? [['q_taps', 'fp16', [C, qw]], ['k_taps', 'fp16', [C, kw]], ['v_taps', 'fp16', [C, vw]]] : []),
    ['q_norm', 'fp16', [g.headDimension]], ['k_norm', 'fp16', [g.headDimension]],
    ['gate_proj', 'cq', [ow, d]], ['out_proj', 'cq', [d, ow]], ['post_norm', 'fp16', [d]],
    ['attn_gate', 'fp16', [1]], ['pre_hada', 'fp16', [d]],
    ...['d1', 'd2', 'b2', 'd3', 'd4'].map((n) => [n, 'fp16', [N]]),
    ...['w1', 'w2', 'w3'].flatMap((n) => [[`${n}a`, 'fp16', [ba, ba]], [`${n}b`, 'fp16', [bb, bb]]]),
    ['cond_v', 'fp16', [d, COND_RANK]], ['cond_u', 'fp16', [COND_RANK, N]],
  ];
};

const MHC3 = (g) => {
  const L = g.layers, n = g.lanes, nd = n * g.hidden;
  return [['a_pre', 'fp16', [L]], ['a_post', 'fp16', [L]], ['a_res', 'fp16', [L]],
    ['b_pre', 'fp16', [L, n]], ['b_post', 'fp16', [L, n]], ['b_res', 'fp16', [L, n, n]],
    ['phi_pre', 'cq', [L * n, nd]], ['phi_post', 'cq', [L * n, nd]], ['phi_res', 'cq', [L * n * n, nd]]];
};

const SITE3 = (g) => [
  ['tables', 'cq', [g.engramTables * g.engramSlots, g.engramSubDimension]],
  ['key_proj', 'cq', [g.hidden, g.engramTables * g.engramSubDimension]],
  ['value_proj', 'cq', [g.hidden, g.engramTables * g.engramSubDimension]],
  ['taps', 'fp16', [g.engramTaps, g.hidden]],
];

/** heads: [{ kind, probes (k), queries (q), dense, outputs }] in manifest
 *  order (embedding, confidence, router); dense writes the older all-FP16
 *  layout; outputs, the embedding's width (an export's embedding_dim), is
 *  HEAD3_OUTPUTS' by default. */
export function checkHeads3(heads) {
  const kinds = heads.map((h) => h.kind);
  const order = Object.keys(HEAD3_CODES);
  for (const h of heads) {
    if (!(h.kind in HEAD3_CODES)) throw new Error(`unknown Needle 3 head ${JSON.stringify(h.kind)}`);
    for (const key of ['probes', 'queries']) {
      if (!Number.isInteger(h[key]) || h[key] < 1 || h[key] > 64) throw new Error(`head ${h.kind}: ${key} must be 1..64`);
    }
    if (h.outputs !== undefined && (h.kind !== 'embedding' || !Number.isInteger(h.outputs) || h.outputs < 2)) {
      throw new Error(`head ${h.kind}: outputs is the embedding head's width, an integer >= 2`);
    }
  }
  if (kinds.some((k, i) => i && order.indexOf(k) <= order.indexOf(kinds[i - 1]))) {
    throw new Error(`heads must come once each in the order ${order.join(', ')}`);
  }
  return heads;
}

function headTensors(g, { kind, probes: k, queries: q, dense = false, outputs }) {
  const cells = g.layers + 1, d = g.hidden, out = outputs ?? HEAD3_OUTPUTS[kind], matrix = dense ? 'fp16' : 'cq';
  const list = [
    ['probes', matrix, dense ? [cells, k, d] : [cells * k, d]], ['gain', 'fp16', [cells, k]],
    ['query', matrix, [q, d]], ['row_bias', 'fp16', [q, cells, k]], ['proj', matrix, [out, q * d]],
    ['bias', 'fp16', [out]],
  ];
  if (kind === 'router') list.push(['calibration', 'fp16', [3]]);
  return list;
}

/** The tensors of a Needle 3 archive in canonical order: [{ name, kind, shape }],
 *  kind 'fp16' | 'fp32' | 'cq' | 'raw'. The last entry is the RAW tokenizer. */
export function canonicalTensors3(g, { heads = [] } = {}) {
  const list = [{ name: 'embedding', kind: 'cq', shape: [g.vocabulary, g.hidden] }];
  const add = (prefix, table) => {
    for (const [name, kind, shape] of table) list.push({ name: prefix + name, kind, shape });
  };
  for (let i = 0; i < g.layers; i++) add(`layer${String(i).padStart(2, '0')}.`, LAYER3(g));
  add('mhc.', MHC3(g));
  add('', [['hada_p1', 'fp32', [g.hadamardDimension]], ['hada_p2', 'fp32', [g.hadamardDimension]]]);
  for (let s = 0; s < g.sites.length; s++) add(`engram${s}.`, SITE3(g));
  list.push({ name: 'final_norm', kind: 'fp16', shape: [g.hidden] });
  if (heads.length) {
    list.push({ name: 'heads.manifest', kind: 'fp16', shape: [heads.length] });
    for (const head of checkHeads3(heads)) add(`${head.kind}_head.`, headTensors(g, head));
  }
  list.push({ name: 'tokenizer', kind: 'raw', shape: [] });
  return list;
}

/** Bits of the released file's scheme: CQ4 for the embedding, the mHC Phi
 *  matrices and the head matrices, CQ2 for every other CQ matrix. */
export function released3Bits(name) {
  return name === 'embedding' || name.startsWith('mhc.phi_') || name.includes('_head.') ? 4 : 2;
}
