// The float64 reference's reader of Needle 3 archives (needle3-model.md
// sections 2 and 3): the 196-byte header and the canonical walk, written from
// the spec like archive.js (whose record decoding it shares), not from js/ or
// src/. The heads (section 3) are read into dense matrices for heads3.js.
//
//   readArchive3(bytes) -> { geometry, codebook, weightGroup, tensors, weights, tokenizer }

import { DTYPE, RECORD_BYTES, decodeTensor, denseMatrix, readRecord, tokenizerInfo } from './archive.js';

export const HEAD3_CODES = { EMBEDDING: 1, CONFIDENCE: 2, ROUTER: 3 };
const HEAD3_OUTPUTS = { 1: 128, 2: 1, 3: 3 };

export const TAG3 = 0x05e12a84;
export const HEADER3_BYTES = 196;

function readHeader3(view) {
  const u32 = (field) => view.getUint32(field * 4, true);
  if (u32(0) !== TAG3) throw new Error(`not a Needle 3 archive: tag 0x${u32(0).toString(16)}`);
  const mask = BigInt(u32(17)) | (BigInt(u32(18)) << 32n);
  const layers = u32(10);
  return {
    tensorCount: u32(1), codebookLength: u32(2), kvWindow: u32(3), kvBits: u32(4), vocabulary: u32(5),
    outVocabulary: u32(6) || u32(5), hidden: u32(7), queryHeads: u32(8), kvHeads: u32(9), layers,
    qkDimension: u32(11), vDimension: u32(12), maximumSequence: u32(13), hadamardDimension: u32(14),
    lanes: u32(15), slidingWindow: u32(16),
    global: Array.from({ length: layers }, (_, i) => u32(16) === 0 || Boolean((mask >> BigInt(i)) & 1n)),
    convTaps: u32(19), engramSlots: u32(20), engramSubDimension: u32(21), engramTables: u32(22),
    engramTaps: u32(23), engramDilation: u32(24), engramSeedHeads: u32(25),
    orderCount: u32(26), orders: [27, 28, 29, 30].map(u32).slice(0, u32(26)),
    siteCount: u32(31), sites: Array.from({ length: 16 }, (_, i) => u32(32 + i)).slice(0, u32(31)),
    ropeTheta: view.getFloat32(48 * 4, true),
  };
}

/** The Kronecker split [ba, bb] of N: ba = 2^floor(bitlen(N-1)/2). */
export function kronecker(N) {
  const ba = 2 ** Math.floor((32 - Math.clz32(N - 1)) / 2); // bitlen(N - 1): 0 for N = 1
  return [ba, N / ba];
}

/** Names every tensor of the walk (section 3) and checks its dtype and shape. */
function nameTensors3(g, tensors) {
  const cells = g.layers + 1;
  const d = g.hidden, n = g.lanes, L = g.layers, qk = g.qkDimension, vd = g.vDimension;
  const N = g.hadamardDimension, C = g.convTaps, [ba, bb] = kronecker(N);
  let at = 0;
  const take = (what, dtypes, shape) => {
    const t = tensors[at];
    if (!t) throw new Error(`missing tensor ${at} (${what})`);
    if (!dtypes.includes(t.dtype)) throw new Error(`tensor ${at} (${what}): dtype ${t.dtype}, expected ${dtypes}`);
    if (t.shape.length !== shape.length || t.shape.some((s, i) => s !== shape[i])) {
      throw new Error(`tensor ${at} (${what}): shape [${t.shape}], expected [${shape}]`);
    }
    at += 1;
    return t;
  };
  const cq = [DTYPE.CQ], dense = [DTYPE.FP16, DTYPE.FP32];
  const data = (what, shape) => take(what, dense, shape).data;
  const w = { embedding: take('embedding', cq, [g.vocabulary, d]), layers: [], sites: [] };
  for (let i = 0; i < L; i++) {
    const name = (t) => `layer ${i} ${t}`;
    const layer = {
      normIn: data(name('norm_in'), [d]),
      q: take(name('q_proj'), cq, [g.queryHeads * qk, d]),
      k: take(name('k_proj'), cq, [g.kvHeads * qk, d]),
      v: take(name('v_proj'), cq, [g.kvHeads * vd, d]),
    };
    if (C) {
      layer.qTaps = data(name('q_taps'), [C, g.queryHeads * qk]);
      layer.kTaps = data(name('k_taps'), [C, g.kvHeads * qk]);
      layer.vTaps = data(name('v_taps'), [C, g.kvHeads * vd]);
    }
    Object.assign(layer, {
      qNorm: data(name('q_norm'), [qk]), kNorm: data(name('k_norm'), [qk]),
      gate: take(name('gate_proj'), cq, [g.queryHeads * vd, d]),
      out: take(name('out_proj'), cq, [d, g.queryHeads * vd]),
      postNorm: data(name('post_norm'), [d]), attnGate: data(name('attn_gate'), [1])[0],
      preHada: data(name('pre_hada'), [d]),
    });
    for (const t of ['d1', 'd2', 'b2', 'd3', 'd4']) layer[t] = data(name(t), [N]);
    for (const s of [1, 2, 3]) {
      layer[`w${s}a`] = data(name(`w${s}a`), [ba, ba]);
      layer[`w${s}b`] = data(name(`w${s}b`), [bb, bb]);
    }
    layer.condV = data(name('cond_v'), [d, 8]);
    layer.condU = data(name('cond_u'), [8, N]);
    w.layers.push(layer);
  }
  w.mhc = {
    aPre: data('a_pre', [L]), aPost: data('a_post', [L]), aRes: data('a_res', [L]),
    bPre: data('b_pre', [L, n]), bPost: data('b_post', [L, n]), bRes: data('b_res', [L, n, n]),
    phiPre: take('phi_pre', cq, [L * n, n * d]), phiPost: take('phi_post', cq, [L * n, n * d]),
    phiRes: take('phi_res', cq, [L * n * n, n * d]),
  };
  w.p1 = take('hada_p1', [DTYPE.FP32], [N]).data;
  w.p2 = take('hada_p2', [DTYPE.FP32], [N]).data;
  const width = g.engramTables * g.engramSubDimension;
  for (let s = 0; s < g.siteCount; s++) {
    w.sites.push({
      layer: g.sites[s],
      tables: take(`site ${s} tables`, cq, [g.engramTables * g.engramSlots, g.engramSubDimension]),
      key: take(`site ${s} key_proj`, cq, [d, width]),
      value: take(`site ${s} value_proj`, cq, [d, width]),
      taps: data(`site ${s} taps`, [g.engramTaps, d]),
    });
  }
  w.finalNorm = data('final_norm', [d]);
  w.heads = [];
  if (at < tensors.length - 1) {
    const codes = data('heads.manifest', [tensors[at].shape[0]]);
    const matrix = (what, rows, cols) => {
      const t = tensors[at];
      const shape = t?.shape.length === 3 ? [cells, rows / cells, cols] : [rows, cols]; // the older dense probes
      const taken = take(what, [...cq, ...dense], shape);
      return taken.dtype === DTYPE.CQ ? denseMatrix(taken).data : taken.data;
    };
    for (const code of codes) {
      const probes = tensors[at];
      const k = probes.shape.length === 3 ? probes.shape[1] : probes.shape[0] / cells;
      const head = { code, k, probes: matrix(`head ${code} probes`, cells * k, d) };
      head.gain = data(`head ${code} gain`, [cells, k]);
      head.q = tensors[at].shape[0];
      head.query = matrix(`head ${code} query`, head.q, d);
      head.rowBias = data(`head ${code} row_bias`, [head.q, cells, k]);
      head.out = code === HEAD3_CODES.EMBEDDING ? tensors[at].shape[0] : HEAD3_OUTPUTS[code]; // an embedding's width is its proj's rows
      head.proj = matrix(`head ${code} proj`, head.out, head.q * d);
      head.bias = data(`head ${code} bias`, [head.out]);
      if (code === HEAD3_CODES.ROUTER) head.calibration = data('router calibration', [3]);
      w.heads.push(head);
    }
  }
  if (at !== tensors.length - 1) throw new Error(`${tensors.length - 1 - at} tensors after the walk`);
  return w;
}

/** Parses a whole Needle 3 archive (Uint8Array); one precise line on bad input. */
export function readArchive3(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const geometry = readHeader3(view);
  const directory = HEADER3_BYTES + geometry.codebookLength * 4;
  const codebook = new Float64Array(geometry.codebookLength);
  for (let i = 0; i < codebook.length; i++) codebook[i] = view.getFloat32(HEADER3_BYTES + 4 * i, true);
  const records = Array.from({ length: geometry.tensorCount },
    (_, i) => readRecord(view, directory + i * RECORD_BYTES, bytes.length, i));
  const weightGroup = records[0].group;
  const tensors = records.map((r, i) => decodeTensor(bytes, r, i, codebook, weightGroup));
  const tokenizer = tensors[tensors.length - 1].data;
  return {
    geometry, codebook, weightGroup, records, tensors, weights: nameTensors3(geometry, tensors),
    tokenizer, tokenizerInfo: tokenizerInfo(tokenizer),
  };
}
