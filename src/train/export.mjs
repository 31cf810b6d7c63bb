// Writes the trained weights as a .cact archive through the project's own
// writer (js/cact-writer.js), which quantises every CQ matrix as the trainer's
// fake quantisation does.
//
//   node src/train/export.mjs WEIGHTS_DIR TOKENIZER.model OUT.cact
//
// WEIGHTS_DIR holds weights.json ({ geometry, group, bits: {name: 2|3|4},
// tensors: {name: {shape, offset}} }) and weights.f32 (little-endian float32,
// offsets in values), both written by train.py.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeCact } from '../../js/cact-writer.js';
import { tokenizerBlobFromModel } from '../../js/sentencepiece-model.js';

const [dir, tokenizerModel, out] = process.argv.slice(2);
if (!out) {
  console.error('usage: node src/train/export.mjs WEIGHTS_DIR TOKENIZER.model OUT.cact');
  process.exit(2);
}
const index = JSON.parse(readFileSync(join(dir, 'weights.json'), 'utf8'));
const raw = readFileSync(join(dir, 'weights.f32'));
const values = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);

function weights(name, shape) {
  const t = index.tensors[name];
  if (!t) throw new Error(`weights.json has no tensor ${name}`);
  if (t.shape.join('x') !== shape.join('x')) throw new Error(`${name}: shape ${t.shape} != ${shape}`);
  const count = shape.reduce((a, b) => a * b, 1);
  return values.subarray(t.offset, t.offset + count);
}

const bytes = writeCact({
  geometry: index.geometry,
  tokenizer: tokenizerBlobFromModel(new Uint8Array(readFileSync(tokenizerModel))),
  heads: true,
  weights,
  bits: (name) => index.bits[name],
  group: index.group,
});
writeFileSync(out, bytes);
console.log(`wrote ${out} (${bytes.length} bytes)`);
