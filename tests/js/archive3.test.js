// Needle 3 archives (needle3-model.md sections 1-3, 10): the writer's
// canonical walk against the spec's figures for the released file, and the
// engine's validation in wasm against archives js/cact3-writer.js writes and
// then breaks one way each, as archive.test.js does for Needle 2.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { STATUS, archiveEditors, assertRejected, checkPrefix, startEngine } from './archive-check.js';
import { makeTestTokenizerBlob, syntheticPieces } from '../../js/cact-writer.js';
import { writeCact3 } from '../../js/cact3-writer.js';
import {
  RELEASED3_GEOMETRY, RELEASED3_HEADS, TINY3_GEOMETRY, canonicalTensors3, kroneckerSplit,
} from '../../js/cact3-format.js';
import { Model } from '../../js/model.js';

const DIRECTORY = 196 + 28 * 4;
const UNSUPPORTED = 9; // NEEDLE_E_UNSUPPORTED: a valid archive this version does not run

before(() => startEngine(true));

const tokenizer = makeTestTokenizerBlob(syntheticPieces(300));
const HEADS = [{ kind: 'embedding', probes: 2, queries: 3 }, { kind: 'confidence', probes: 4, queries: 4 },
  { kind: 'router', probes: 1, queries: 2 }];
const make = (options = {}) => writeCact3({ geometry: TINY3_GEOMETRY, tokenizer, heads: HEADS, group: 32, seed: 3, ...options });
const names = canonicalTensors3({ ...TINY3_GEOMETRY, vocabulary: 300 }, { heads: HEADS }).map((t) => t.name);
const { at, view, rec, blobOffset, setField, setRec32, setF32, setF16 } = archiveEditors(DIRECTORY, names);

test('the released walk has the spec\'s 581 tensors, dtype split and element count', () => {
  const tensors = canonicalTensors3(RELEASED3_GEOMETRY, { heads: RELEASED3_HEADS });
  const count = (kind) => tensors.filter((t) => t.kind === kind).length;
  assert.equal(tensors.length, 581);
  assert.deepEqual([count('cq'), count('fp16'), count('fp32'), count('raw')], [122, 456, 2, 1]);
  const elements = tensors.reduce((n, t) => n + (t.kind === 'raw' ? 0 : t.shape.reduce((a, b) => a * b, 1)), 0);
  assert.equal(elements, 121021910);
  assert.deepEqual([kroneckerSplit(1024), kroneckerSplit(512), kroneckerSplit(1)], [[32, 32], [16, 32], [1, 1]]);
});

test('a released-geometry archive is valid and lays out its bytes as the released file', () => {
  const bytes = writeCact3({ tokenizer: makeTestTokenizerBlob(syntheticPieces(8192)), heads: RELEASED3_HEADS, seed: 1 });
  assert.deepEqual(checkPrefix(bytes), { status: STATUS.OK, message: '' });
  // The released file is 35,335,380 bytes with a 109,140-byte tokenizer blob
  // (spec section 1: 104,242 B plus the 4,898 its writer lacked), so its
  // tokenizer starts at 35,226,240: every byte before it has the same layout.
  assert.equal(blobOffset(bytes, 580), 35335380 - 109140);
});

test('writer-made Needle 3 archives are valid, whole and in every streamed prefix', () => {
  const bytes = make();
  assert.deepEqual(checkPrefix(bytes), { status: STATUS.OK, message: '' });
  const directoryEnd = rec(names.length);
  for (let n = 0; n < bytes.length; n += n < directoryEnd ? 13 : 997) {
    const { status, message } = checkPrefix(bytes, n);
    assert.equal(status, n < directoryEnd ? STATUS.INCOMPLETE : STATUS.OK, `prefix ${n}: ${message}`);
  }
  // No convolution (24 tensors a layer), no heads, the older all-FP16 head
  // layout, binary and ternary CQ, every layer global.
  for (const options of [{ geometry: { ...TINY3_GEOMETRY, qkvConvTaps: 0 } }, { heads: [] },
    { heads: [{ kind: 'confidence', probes: 4, queries: 4, dense: true }] }, { bits: 1 }, { bits: 'ternary', group: 64 },
    { geometry: { ...TINY3_GEOMETRY, slidingWindow: 0, globalLayers: [] } }]) {
    assert.deepEqual(checkPrefix(make(options)), { status: STATUS.OK, message: '' }, JSON.stringify(options));
  }
});

test('the tag decides the generation, and any other tag is refused naming both', () => {
  for (const tag of [0x05e12a85, 0]) {
    const got = checkPrefix(Uint8Array.from([tag & 0xff, (tag >> 8) & 0xff, (tag >> 16) & 0xff, tag >>> 24]), 4, 1 << 20);
    assert.equal(got.status, STATUS.FORMAT);
    assert.match(got.message, /expected 0x05e12a83 \(Needle 2\) or 0x05e12a84 \(Needle 3\), not a \.cact archive/);
  }
  assertRejected(setTag(make(), 0x05e12a83), /^header field /); // read as Needle 2, its header is nonsense
});

function setTag(bytes, tag) {
  view(bytes).setUint32(0, tag, true);
  return bytes;
}

// [description, mutate(bytes) or a function returning new bytes, expected message]
const CASES = [
  ['out vocabulary above the vocabulary', setField(6, 301), /^header field outVocabulary \(offset 24\) is 301: exceeds vocabulary 300/],
  ['65 layers', setField(10, 65), /^header field layers \(offset 40\) is 65: expected 1\.\.64$/],
  ['odd q/k head width', setField(11, 13), /^header field qkHeadDimension \(offset 44\) is 13: must be even/],
  ['a global layer beyond the layers', setField(17, 0b1100), /^header field globalMaskLo \(offset 68\) is 12: marks a layer at or beyond layers 3 as global$/],
  ['a global bit in the high word', setField(18, 1), /^header field globalMaskHi \(offset 72\) is 1: marks a layer/],
  ['3 engram taps', setField(23, 3), /^header field engramTaps \(offset 92\) is 3: expected 4$/],
  ['a dilation other than the largest order', setField(24, 2), /^header field engramDilation \(offset 96\) is 2: expected 3 \(the largest order\)$/],
  ['17 sites', setField(31, 17), /^header field siteCount \(offset 124\) is 17: expected 0\.\.16$/],
  ['a site beyond the layers', setField(33, 3), /^header field sites\[1\] \(offset 132\) is 3: not below layers 3$/],
  ['convolution off while the file has taps', setField(19, 0), /^header field tensorCount \(offset 4\) is 127: expected 98 \(no heads\), or 99 plus the heads' 6, 7, 12, 13 or 19 tensors/],
  ['convolution of another width', setField(19, 4), /^tensor 5 \(layer 0 q_taps\): shape\[0\] is 3, expected 4$/],
  ['a v head width the file does not have', setField(12, 8), /^tensor 4 \(layer 0 v_proj\): shape\[0\] is 32, expected 16$/],
  ['hadamard not the next power of two', setField(14, 128), /^header field hadamardDimension \(offset 56\) is 128: expected 64/],
  ['a Kronecker factor of another size', setRec32('layer00.w1a', 4, 16), /^tensor 20 \(layer 0 w1a\): shape\[0\] is 16, expected 8$/],
  ['cond_v transposed', setRec32('layer01.cond_v', 4, 8), /^tensor 53 \(layer 1 cond_v\): shape\[0\] is 8, expected 48$/],
  ['a permutation that repeats an index', (b) => setF32('hada_p1', 5, view(b).getFloat32(blobOffset(b, at('hada_p1')) + 16, true))(b),
    /^tensor 91 \(hada_p1\): element 5 repeats index \d+: not a permutation$/],
  ['a permutation with a fraction', setF32('hada_p2', 0, 2.5), /^tensor 92 \(hada_p2\): element 0 is 2\.5, expected an index in 0\.\.63$/],
  ['a permutation out of range', setF32('hada_p2', 7, 64), /^tensor 92 \(hada_p2\): element 7 is 64, expected an index in 0\.\.63$/],
  ['a permutation stored as FP16', (b) => { b[rec(at('hada_p1'))] = 1; }, /^tensor 91 \(hada_p1\): dtype is 1 \(FP16\), expected 2 \(FP32\)$/],
  ['probes not a multiple of the cells', setRec32('embedding_head.probes', 4, 9), /^tensor 107 \(head 0 \(embedding\) probes\): shape\[0\] is 9, expected \(layers\+1\)\*k = 4\*k$/],
  ['a gain of another k', setRec32('embedding_head.gain', 8, 3), /^tensor 108 \(head 0 \(embedding\) gain\): shape\[1\] is 3, expected 2$/],
  ['row biases of another query count', setRec32('confidence_head.row_bias', 4, 5), /^tensor 116 \(head 1 \(confidence\) row_bias\): shape\[0\] is 5, expected 4$/],
  ['65 queries', setRec32('confidence_head.query', 4, 65), /^tensor 115 \(head 1 \(confidence\) query\): shape\[0\] is 65, expected 1\.\.64 queries$/],
  ['a router projection of one output', setRec32('router_head.proj', 4, 1), /^tensor 123 \(head 2 \(router\) proj\): shape\[0\] is 1, expected 3 \(router\)$/],
  ['manifest codes out of order', (b) => { setF16('heads.manifest', 0, 0x4000)(b); setF16('heads.manifest', 1, 0x3c00)(b); },
    /^tensor 106 \(heads manifest\): element 1 is 1 after 2: codes must rise \(1, 2, 3\)$/],
  ['a router code where a 6-tensor head stands', setF16('heads.manifest', 0, 0x4200),
    /^tensor 106 \(heads manifest\): element 0 is 3, expected 1 \(embedding\) or 2 \(confidence\) \(the tensor count gives this head 6 tensors\)$/],
  ['bits 6', setRec32('layer00.q_proj', 40, 6), /^tensor 2 \(layer 0 q_proj\): bits is 6, expected 1, 2, 3, 4 or 5 \(ternary\)$/],
  ['truncated inside the header', (b) => b.slice(0, 200), /^file is 200 bytes, shorter than the 308-byte header and codebooks$/],
  ['NaN in a Kronecker factor', setF16('layer02.w3b', 5, 0x7e00), /^tensor 79 \(layer 2 w3b\): element 5 is nan \(fp16 0x7e00\)$/],
];

for (const [what, mutate, pattern] of CASES) {
  test(`rejects Needle 3: ${what}`, () => {
    const bytes = make();
    assertRejected(mutate(bytes) ?? bytes, pattern);
  });
}

test('rejects Needle 3: an older dense head with no probes', () => {
  const heads = [{ kind: 'confidence', probes: 4, queries: 4, dense: true }];
  const bytes = make({ heads });
  const probes = canonicalTensors3({ ...TINY3_GEOMETRY, vocabulary: 300 }, { heads }).findIndex((t) => t.name === 'confidence_head.probes');
  view(bytes).setUint32(rec(probes) + 8, 0, true); // [layers+1, k, hidden] with k = 0
  assertRejected(bytes, new RegExp(`^tensor ${probes} \\(head 0 \\(confidence\\) probes\\): has 0 probes per cell, expected 1\\.\\.64$`));
});

test('a streamed Needle 3 prefix names a head kind from its projection before the manifest is read', () => {
  const bytes = make();
  setRec32('router_head.proj', 4, 128)(bytes); // an embedding's width in the router's slot
  const got = checkPrefix(bytes, rec(at('router_head.proj') + 1), bytes.length);
  assert.equal(got.status, STATUS.FORMAT);
  assert.match(got.message, /^tensor 123 \(head 2 proj\): shape\[0\] is 128, expected 3 \(router\)$/);
});

test('the shipped modules refuse a Needle 3 archive by its tag, saying which module reads it', async () => {
  await assert.rejects(Model.fromBytes(make(), { wasm: 'simd' }),
    (e) => e.code === UNSUPPORTED && /0x05e12a84: Needle 3, read by the needle3 variant only/.test(e.message));
});

test('a Needle 3 archive loads into a needle3 variant by its tag, from bytes or streamed, and runs', async () => {
  const bytes = make();
  const path = join(mkdtempSync(join(tmpdir(), 'needle3-')), 'tiny3.cact');
  writeFileSync(path, bytes);
  const models = [await Model.fromBytes(bytes), await Model.load(path), await Model.fromBytes(bytes, { threads: 1 })];
  for (const [i, model] of models.entries()) {
    try {
      // The threaded build where threads run (Node on 2 cores), else the single-threaded one.
      assert.equal(model.engine.variant, model.engine.threads.count > 1 ? 'needle3-threads' : 'needle3', `model ${i}`);
      if (i === 2) assert.equal(model.engine.variant, 'needle3');
      const { geometry, tensors } = model.inspect();
      assert.equal(geometry.generation, 3);
      assert.deepEqual([geometry.headDimension, geometry.vHeadDimension, geometry.qkvConvTaps, geometry.slidingWindow,
        geometry.globalMaskLo, geometry.sites.length], [12, 16, 3, 8, 4, 3]);
      assert.equal(tensors.length, names.length);
      assert.deepEqual([tensors[5].name, tensors[91].name, tensors[125].name, tensors[126].dtype],
        ['layer 0 q_taps', 'hada_p1', 'head 2 (router) calibration', 'RAW']);
      assert.ok(model.tokenize('hello world').length > 0);
      const [logits] = model.logits(model.tokenize('hello world'));
      assert.equal(logits.length, model.vocabulary);
      assert.ok(logits.every(Number.isFinite));
    } finally {
      await model.free();
    }
  }
});
