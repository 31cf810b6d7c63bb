// tokenizer.test.js: the C tokenizer, run in the wasm engine, against the
// real SentencePiece (spm_encode/spm_decode from Debian's sentencepiece) on
// the held-out corpus of tests/fixtures/tokenizer: identical ids for every
// line, decode(encode(line)) gives the line back, and spm_decode agrees.
// The engine is dist/needle.wasm, or the module named by env NEEDLE_WASM.
//   node --test tests/js/tokenizer.test.js

import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { instantiateEngine } from '../../js/wasm.js';
import { parseSentencePieceModel, tokenizerBlobFromModel } from '../../js/sentencepiece-model.js';
import { heldOutLines, MARKERS } from '../fixtures/tokenizer/make-corpus.mjs';

const fixtures = fileURLToPath(new URL('../fixtures/tokenizer/', import.meta.url));
const modelPath = join(fixtures, 'needle-test-bpe.model');
const modelBytes = readFileSync(modelPath);
const engineUrl = process.env.NEEDLE_WASM ? pathToFileURL(process.env.NEEDLE_WASM) : undefined;

// Runs a SentencePiece tool over lines (Buffers), one output line per input line.
function spm(tool, args, lines) {
  const dir = mkdtempSync(join(tmpdir(), 'needle-tok-'));
  try {
    const input = join(dir, 'in.txt');
    writeFileSync(input, Buffer.concat(lines.flatMap((l) => [l, Buffer.from('\n')])));
    const out = execFileSync(tool, [`--model=${modelPath}`, ...args, `--input=${input}`],
      { maxBuffer: 1 << 28 });
    const result = out.toString('latin1').split('\n');
    assert.equal(result.pop(), '', `${tool} output ends with a newline`);
    assert.equal(result.length, lines.length, `${tool} gives one line per input line`);
    return result.map((l) => Buffer.from(l, 'latin1'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const idsOf = (line) => (line.length ? line.toString().split(' ').map(Number) : []);

// A thin wrapper over the engine's tokenizer exports; heap views are re-read
// after every call because memory may grow.
class WasmTokenizer {
  constructor(engine, blob) {
    this.x = engine.exports;
    this.memory = engine.memory;
    this.err = this.x.malloc(260); // needle_error: int code + 256 chars
    const ptr = this.copyIn(blob);
    this.tok = this.x.needle_tokenizer_load(ptr, blob.length, this.err);
    this.x.free(ptr);
  }

  bytes() { return new Uint8Array(this.memory.buffer); }

  errorText() {
    const b = this.bytes().subarray(this.err + 4, this.err + 260);
    return Buffer.from(b.subarray(0, b.indexOf(0))).toString();
  }

  copyIn(bytes) {
    const ptr = this.x.malloc(Math.max(1, bytes.length));
    this.bytes().set(bytes, ptr);
    return ptr;
  }

  // Calls needle_tokenize with room for `cap` ids; returns { status, ids, count }.
  tokenize(bytes, cap) {
    const text = this.copyIn(bytes);
    const ids = this.x.malloc(4 * Math.max(1, cap));
    const count = this.x.malloc(4);
    const status = this.x.needle_tokenize(this.tok, text, bytes.length, ids, cap, count, this.err);
    const n = new Uint32Array(this.memory.buffer, count, 1)[0];
    const result = Array.from(new Int32Array(this.memory.buffer, ids, Math.min(n, cap)));
    [text, ids, count].forEach((p) => this.x.free(p));
    return { status, ids: result, count: n };
  }

  // Encodes with a buffer of one id per byte first, then again with the
  // count the engine asked for when that was too small (byte fallback of
  // ill-formed bytes can need three ids per byte).
  encode(bytes) {
    let r = this.tokenize(bytes, bytes.length);
    if (r.status === 3 && r.count > bytes.length) {
      assert.deepEqual(r.ids, this.tokenize(bytes, r.count).ids.slice(0, bytes.length));
      r = this.tokenize(bytes, r.count);
    }
    assert.equal(r.status, 0, `needle_tokenize failed: ${this.errorText()}`);
    assert.equal(r.ids.length, r.count);
    return r.ids;
  }

  decode(ids) {
    const p = this.copyIn(new Uint8Array(Int32Array.from(ids).buffer));
    const need = this.x.needle_detokenize(this.tok, p, ids.length, 0, 0);
    const out = this.x.malloc(need + 1);
    const n = this.x.needle_detokenize(this.tok, p, ids.length, out, need + 1);
    const text = Buffer.from(this.bytes().slice(out, out + n));
    this.x.free(p);
    this.x.free(out);
    return text;
  }

  decodeStreaming(ids) {
    const dec = this.x.needle_decoder_new(this.tok);
    const out = this.x.malloc(1 << 17);
    const parts = [];
    const take = (n) => parts.push(Buffer.from(this.bytes().slice(out, out + n)));
    for (const id of ids) take(this.x.needle_decoder_push(dec, id, out, 1 << 17));
    take(this.x.needle_decoder_flush(dec, out, 1 << 17));
    this.x.free(out);
    this.x.needle_decoder_free(dec);
    return parts;
  }
}

let engine;
let tok;
const lines = heldOutLines().map((l) => Buffer.from(l));

before(async () => {
  engine = await instantiateEngine(engineUrl);
  tok = new WasmTokenizer(engine, tokenizerBlobFromModel(modelBytes));
  assert.notEqual(tok.tok, 0, `needle_tokenizer_load: ${tok.errorText()}`);
});

test('the converted model has the specified ids and flags', () => {
  const { pieces } = parseSentencePieceModel(modelBytes);
  const blob = tokenizerBlobFromModel(modelBytes);
  const view = new DataView(blob.buffer, blob.byteOffset);
  assert.equal(view.getUint32(0, true), pieces.length);
  assert.equal(engine.exports.needle_tokenizer_size(tok.tok), 8192);
  assert.deepEqual([0, 1, 2, 3].map((w) => engine.exports.needle_tokenizer_special(tok.tok, w)), [0, 1, 2, 3]);
  assert.deepEqual([blob[20], blob[21]], [1, 1], 'addDummyPrefix and byteFallback');
  MARKERS.forEach((m, k) => {
    const p = tok.copyIn(Buffer.from(m));
    assert.equal(engine.exports.needle_tokenizer_piece_id(tok.tok, p, m.length), 4 + k, m);
    engine.exports.free(p);
  });
});

test('the held-out corpus is large and exercises byte fallback', () => {
  assert.ok(lines.length >= 2000);
  const pieces = spm('spm_encode', ['--output_format=piece'], lines).join('\n');
  assert.match(pieces, /<0x[0-9A-F]{2}>/, 'some line falls back to bytes');
  assert.ok(MARKERS.every((m) => pieces.includes(m)), 'every marker occurs');
});

test('encode gives exactly the ids of spm_encode on every held-out line', () => {
  const expected = spm('spm_encode', ['--output_format=id'], lines).map(idsOf);
  let same = 0;
  const firstDiffs = [];
  lines.forEach((line, i) => {
    const ours = tok.encode(line);
    if (JSON.stringify(ours) === JSON.stringify(expected[i])) same++;
    else if (firstDiffs.length < 5) firstDiffs.push({ line: line.toString(), ours, spm: expected[i] });
  });
  assert.deepEqual(firstDiffs, []);
  assert.equal(same, lines.length);
});

test('ill-formed UTF-8 is encoded as spm_encode does (one U+FFFD per bad byte)', () => {
  const bad = [[0x80], [0xff, 0x41], [0x61, 0xe2, 0x82], [0xc0, 0xaf, 0x20], [0xed, 0xa0, 0x80],
    [0xf4, 0x90, 0x80, 0x80], [0xf0, 0x9f, 0x98], [0x20, 0xc3], [0x3c, 0x74, 0x68, 0x69, 0x6e, 0x6b, 0xfe, 0x3e]];
  const samples = bad.map((b) => Buffer.from(b));
  for (let i = 0; i < 40; i++) { // and spliced into held-out lines
    const line = lines[(i * 53) % lines.length];
    const at = Math.floor(line.length / 2);
    samples.push(Buffer.concat([line.subarray(0, at), Buffer.from(bad[i % bad.length]), line.subarray(at)]));
  }
  const expected = spm('spm_encode', ['--output_format=id'], samples).map(idsOf);
  samples.forEach((s, i) => assert.deepEqual(tok.encode(s), expected[i], `sample ${i}: ${s.toString('hex')}`));
});

test('decode(encode(line)) is the line (U+2581 reads as a space) and matches spm_decode', () => {
  const encoded = lines.map((l) => tok.encode(l));
  const spmText = spm('spm_decode', ['--input_format=id'],
    encoded.map((ids) => Buffer.from(ids.join(' '))));
  lines.forEach((line, i) => {
    const ours = tok.decode(encoded[i]);
    const want = Buffer.from(line.toString().replaceAll('\u2581', ' '));
    assert.ok(ours.equals(want), `line ${i}: ${JSON.stringify(line.toString())} -> ${JSON.stringify(ours.toString())}`);
    assert.ok(ours.equals(spmText[i]), `line ${i} differs from spm_decode`);
  });
});

test('streaming decode gives the same text and never half a character', () => {
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  lines.forEach((line, i) => {
    const ids = tok.encode(line);
    const parts = tok.decodeStreaming(ids);
    parts.forEach((p) => utf8.decode(p)); // throws on a split character
    assert.ok(Buffer.concat(parts).equals(tok.decode(ids)), `line ${i}`);
  });
});

test('encode("") is empty and a malformed blob is refused with a message', () => {
  assert.deepEqual(tok.encode(Buffer.alloc(0)), []);
  const blob = tokenizerBlobFromModel(modelBytes);
  blob[24 + 4] = 9; // type of piece 0
  const bad = new WasmTokenizer(engine, blob);
  assert.equal(bad.tok, 0);
  assert.match(bad.errorText(), /piece 0 .*type 9/);
  assert.equal(new Int32Array(engine.memory.buffer, bad.err, 1)[0], 5, 'NEEDLE_E_TOKENIZER');
});

test('the model reader refuses a truncated or unsupported model', () => {
  assert.throws(() => tokenizerBlobFromModel(modelBytes.subarray(0, 1000)), /protobuf: .*runs past/);
  // A second trainer_spec merges into the first (protobuf rules): model_type (field 3) becomes UNIGRAM.
  const unigram = Buffer.concat([modelBytes, Buffer.from([0x12, 0x02, 0x18, 0x01])]);
  assert.throws(() => tokenizerBlobFromModel(unigram), /model_type 1 is not BPE/);
  // A normalizer_spec with remove_extra_whitespaces (field 4) set.
  const collapse = Buffer.concat([modelBytes, Buffer.from([0x1a, 0x02, 0x20, 0x01])]);
  assert.throws(() => tokenizerBlobFromModel(collapse), /remove_extra_whitespaces/);
});
