// The engine's .cact validation, in wasm, against archives written by
// js/cact-writer.js and then broken one way each. Every rejection must name
// the right tensor or header field. The messages come from the engine's
// needle_archive_check_prefix (given the whole file it validates everything,
// blob contents included) and, when the module exports it, needle_model_load.
// Needle 3 archives: archive3.test.js.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';

import { STATUS, archiveEditors, assertRejected, checkPrefix, startEngine } from './archive-check.js';
import { writeCact, makeTestTokenizerBlob, syntheticPieces, TINY_GEOMETRY } from '../../js/cact-writer.js';
import { canonicalTensors } from '../../js/cact-format.js';

const DIRECTORY = 120 + 28 * 4;

before(startEngine);

// ---- a valid archive and helpers to break it ---------------------------

const tokenizer = makeTestTokenizerBlob(syntheticPieces(512));
const make = (options = {}) => writeCact({ geometry: TINY_GEOMETRY, seed: 3, heads: true, tokenizer, bits: 2, group: 32, ...options });
const names = canonicalTensors({ ...TINY_GEOMETRY, vocabulary: 512 }, { heads: true }).map((t) => t.name);
const { at, view, rec, blobOffset, setField, setRec32, setRec64 } = archiveEditors(DIRECTORY, names);

test('a writer-made archive is valid, whole and in every streamed prefix', () => {
  const bytes = make();
  assert.deepEqual(checkPrefix(bytes), { status: STATUS.OK, message: '' });
  const directoryEnd = DIRECTORY + 44 * names.length;
  for (let n = 0; n < bytes.length; n += n < directoryEnd ? 7 : 997) {
    const { status, message: m } = checkPrefix(bytes, n);
    assert.equal(status, n < directoryEnd ? STATUS.INCOMPLETE : STATUS.OK, `prefix ${n}: ${m}`);
  }
  assert.equal(checkPrefix(make({ heads: false })).status, STATUS.OK);
  assert.equal(checkPrefix(make({ bits: 'ternary', group: 64 })).status, STATUS.OK);
});

test('a wrong file fails in its first bytes while streaming', () => {
  const png = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const got = checkPrefix(png, 4, 1 << 20);
  assert.equal(got.status, STATUS.FORMAT);
  assert.match(got.message, /header field tag \(offset 0\) is 0x474e5089: .*not a \.cact archive/);
});

test('a bad record fails as soon as the directory shows it', () => {
  const bytes = make();
  setRec32('layer01.k_proj', 4, 99)(bytes);
  const end = rec(at('layer01.k_proj') + 1);
  assert.equal(checkPrefix(bytes, end - 1).status, STATUS.INCOMPLETE);
  const got = checkPrefix(bytes, end);
  assert.equal(got.status, STATUS.FORMAT);
  assert.match(got.message, /^tensor 17 \(layer 1 k_proj\): shape\[0\] is 99, expected 32$/);
});

// [description, mutate(bytes) or a function returning new bytes, expected message]
const CASES = [
  ['wrong tag', setField(0, 0xdeadbeef), /^header field tag \(offset 0\) is 0xdeadbeef/],
  ['vocabulary 0', setField(5, 0), /^header field vocabulary \(offset 20\) is 0: expected 1\.\.1048576$/],
  ['hidden 2^31', setField(6, 2 ** 31), /^header field hidden \(offset 24\) is 2147483648: expected 1\.\.8192$/],
  ['layers 10^6', setField(9, 1e6), /^header field layers \(offset 36\) is 1000000/],
  ['kvHeads not dividing', setField(8, 3), /^header field kvHeads \(offset 32\) is 3: queryHeads 4 is not a multiple$/],
  ['odd head dimension', setField(10, 15), /^header field headDimension \(offset 40\) is 15: must be even/],
  ['hadamard not next power of two', setField(12, 128), /^header field hadamardDimension \(offset 48\) is 128: expected 64/],
  ['kvBits 5', setField(4, 5), /^header field kvBits \(offset 16\) is 5: expected 2, 3, 4 or 8$/],
  ['lanes 9', setField(13, 9), /^header field lanes \(offset 52\) is 9: expected 1\.\.4$/],
  ['engramTables not a multiple of orderCount', setField(16, 5), /^header field engramTables \(offset 64\) is 5: not a multiple of orderCount 2$/],
  ['site >= layers', setField(26, 2), /^header field sites\[1\] \(offset 104\) is 2: not below layers 2$/],
  ['repeated site', setField(26, 0), /^header field sites\[1\] \(offset 104\) is 0: repeats sites\[0\]$/],
  ['heads count that does not fit', setField(1, names.length + 2), /^header field tensorCount \(offset 4\) is 57: expected 48 \(no heads\), 52 \(1 head\) or 55 \(2 heads\)/],
  ['ropeTheta NaN', (b) => view(b).setFloat32(116, NaN, true), /^header field ropeTheta \(offset 116\) is nan/],
  ['codebook inf', (b) => view(b).setFloat32(120 + 4 * 20, Infinity, true), /^codebook entry 20 \(offset 200\) is inf/],
  ['truncated inside the header', (b) => b.slice(0, 90), /^file is 90 bytes, shorter than the 232-byte header and codebooks$/],
  ['truncated inside the codebooks', (b) => b.slice(0, 180), /^file is 180 bytes/],
  ['truncated inside the directory', (b) => b.slice(0, rec(30)), /^file is 1552 bytes, shorter than its directory \(55 records end at byte 2652\)$/],
  ['truncated inside a blob', (b) => b.slice(0, blobOffset(b, at('mhc.phi_res')) + 10), /^tensor 37 \(mhc phi_res\): offset \d+ \+ bytes \d+ runs past the end of the file/],
  ['truncated inside the tokenizer', (b) => b.slice(0, b.length - 5), /^tensor 54 \(tokenizer\): offset \d+ \+ bytes \d+ runs past the end/],
  ['offset past the end', (b) => setRec64('layer00.d2', 20, b.length + 640)(b), /^tensor 13 \(layer 0 d2\): offset \d+ \+ bytes 128 runs past the end/],
  ['u64 offset + length overflow', setRec64('engram1.taps', 20, 2n ** 64n - 64n), /^tensor 45 \(engram site 1 taps\): offset 18446744073709551552 \+ bytes 512 runs past/],
  ['offset inside the directory', setRec64('final_norm', 20, 400), /^tensor 46 \(final_norm\): offset 400 lies inside the header, codebooks and directory/],
  ['overlapping blobs', (b) => setRec64('layer00.q_norm', 20, blobOffset(b, at('layer00.v_proj')) + 64)(b), /^tensor 5 \(layer 0 q_norm\): bytes \[\d+, \d+\) overlap tensor 4 \(layer 0 v_proj\)/],
  ['wrong rank of the embedding', (b) => { b[rec(0) + 1] = 1; }, /^tensor 0 \(embedding\): rank is 1, expected 2$/],
  ['wrong shape of k_proj', setRec32('layer01.k_proj', 4, 128), /^tensor 17 \(layer 1 k_proj\): shape\[0\] is 128, expected 32$/],
  ['wrong shape of b_res', setRec32('mhc.b_res', 12, 4), /^tensor 34 \(mhc b_res\): shape\[2\] is 4, expected 2$/],
  ['wrong shape of engram tables', setRec32('engram0.tables', 8, 32), /^tensor 38 \(engram site 0 tables\): shape\[1\] is 32, expected 16$/],
  ['FP16 where CQ belongs', (b) => { b[rec(at('mhc.phi_pre'))] = 1; }, /^tensor 35 \(mhc phi_pre\): dtype is 1 \(FP16\), expected 3 \(CQ\)$/],
  ['FP32 dtype with an FP16 length', (b) => { b[rec(at('layer00.attn_gate'))] = 2; }, /^tensor 10 \(layer 0 attn_gate\): bytes is 2, expected 4 \(4 per element\)$/],
  ['tokenizer not RAW', (b) => { b[rec(at('tokenizer'))] = 3; }, /^tensor 54 \(tokenizer\): dtype is 3 \(CQ\), expected 4 \(RAW\)$/],
  ['wrong CQ length', (b) => setRec64('layer00.gate_proj', 28, Number(view(b).getBigUint64(rec(7) + 28, true)) - 2)(b), /^tensor 7 \(layer 0 gate_proj\): bytes is \d+, expected \d+ \(rows\*rowBytes \+ rows\*groups\*2\)$/],
  ['bits 1', setRec32('layer00.out_proj', 40, 1), /^tensor 8 \(layer 0 out_proj\): bits is 1, expected 2, 3, 4 or 5 \(ternary\)$/],
  ['bits 6', setRec32('embedding', 40, 6), /^tensor 0 \(embedding\): bits is 6/],
  ['non-power-of-two group', setRec32('engram1.key_proj', 36, 48), /^tensor 43 \(engram site 1 key_proj\): group is 48, expected a power of two in 8\.\.1024$/],
  ['group 4096', setRec32('layer01.q_proj', 36, 4096), /^tensor 16 \(layer 1 q_proj\): group is 4096/],
  ['NaN in a norm', (b) => view(b).setUint16(blobOffset(b, at('layer01.pre_hada')) + 2 * 9, 0x7e00, true), /^tensor 25 \(layer 1 pre_hada\): element 9 is nan \(fp16 0x7e00\)$/],
  ['inf in a head projection', (b) => view(b).setUint16(blobOffset(b, at('confidence_head.proj')) + 2 * 300, 0x7c00, true), /^tensor 52 \(head 1 \(confidence\) proj\): element 300 is inf/],
  ['bad manifest code', (b) => view(b).setUint16(blobOffset(b, at('heads.manifest')) + 2, 0x4200, true), /^tensor 47 \(heads manifest\): element 1 is 3 \(fp16 0x4200\), expected 1 \(contrastive\) or 2 \(confidence\)$/],
  ['repeated manifest code', (b) => view(b).setUint16(blobOffset(b, at('heads.manifest')) + 2, 0x3c00, true), /^tensor 47 \(heads manifest\): element 1 repeats code 1$/],
  ['probe shape of the other head kind', setRec32('contrastive_head.probes', 4, 8), /^tensor 48 \(head 0 \(contrastive\) probes\): shape\[0\] is 8, expected 4$/],
];

for (const [what, mutate, pattern] of CASES) {
  test(`rejects: ${what}`, () => {
    const bytes = make();
    const broken = mutate(bytes) ?? bytes;
    assertRejected(broken, pattern);
  });
}

test('rejects: ternary crumb 2, naming the byte offset', () => {
  const bytes = make({ bits: 'ternary', group: 64 });
  const offset = blobOffset(bytes, at('layer00.q_proj')) + 3;
  bytes[offset] = (bytes[offset] & 0xf3) | 0x08; // crumb 2 in bits 2..3
  assertRejected(bytes, new RegExp(`^tensor 2 \\(layer 0 q_proj\\): ternary crumb 2 \\(invalid\\) at byte offset ${offset}, bits 2\\.\\.3$`));
});
