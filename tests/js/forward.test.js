// The engine's forward pass against the float64 reference (tests/js/reference),
// on random archives of many geometries: every position's logits must agree
// within max|diff| <= 1e-3 * max|ref| in exact-float mode. Also: prefill of a
// whole sequence equals feeding it one token at a time, and the fast mode's
// error is reported.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeCact, makeTestTokenizerBlob, syntheticPieces } from '../../js/cact-writer.js';
import { Model } from '../../js/model.js';
import { readArchive, referenceForward } from './reference/index.js';

const TOKENIZER = makeTestTokenizerBlob(syntheticPieces(320));

const BASE = {
  kvWindow: 64, kvBits: 8, hidden: 64, queryHeads: 4, kvHeads: 2, layers: 2, headDimension: 16,
  maximumSequence: 128, lanes: 2, engramSlots: 64, engramSubDimension: 16, engramTables: 4,
  engramTaps: 4, engramDilation: 3, orders: [2, 3], sites: [0, 1], ropeTheta: 10000,
};

// Each case changes what it names; together they cover layers, widths, heads,
// lanes 1-4, one to four orders and sites, every CQ width, groups 32-256,
// windows shorter than the sequence with sinks, and kvBits 8 and below.
const CASES = [
  { name: 'tiny, 2-bit, group 32', geometry: {}, bits: 2, group: 32 },
  { name: 'hidden 48 (padded rows), 1 lane, 1 order, 1 site, 3-bit', bits: 3, group: 32,
    geometry: { hidden: 48, queryHeads: 3, kvHeads: 1, lanes: 1, orders: [2], engramTables: 2, sites: [1] } },
  { name: 'ternary, 3 lanes, 3 layers, three orders and sites', bits: 'ternary', group: 64,
    geometry: { lanes: 3, layers: 3, orders: [2, 3, 4], engramTables: 3, sites: [0, 1, 2] } },
  { name: '4-bit, group 128, 4 lanes, 4 orders, 4 sites, kvBits 4', bits: 4, group: 128,
    geometry: { hidden: 128, headDimension: 32, lanes: 4, layers: 4, orders: [1, 2, 3, 4], engramTables: 4,
      engramSubDimension: 32, sites: [0, 1, 2, 3], kvBits: 4 } },
  { name: 'window 8 with 3 sinks over 24 tokens', geometry: {}, bits: 2, group: 64, window: 8, sinks: 3, length: 24 },
  { name: 'kvBits 2, MQA, group 256, no engram site', bits: 2, group: 256,
    geometry: { hidden: 256, queryHeads: 4, kvHeads: 1, headDimension: 64, layers: 1, sites: [], kvBits: 2 } },
  { name: 'kvBits 3, dilation 1, 2 taps, mixed bits per tensor', group: 32,
    bits: (name) => (name.includes('proj') ? 3 : name.includes('phi') ? 4 : 2),
    geometry: { kvBits: 3, engramTaps: 2, engramDilation: 1 } },
  { name: 'archive window 0 (budget formula), 8 heads on 4 kv heads', bits: 2, group: 32,
    geometry: { kvWindow: 0, queryHeads: 8, kvHeads: 4, headDimension: 8 } },
];

function archiveFor(c, seed) {
  return writeCact({
    geometry: { ...BASE, ...c.geometry }, seed, bits: c.bits, group: c.group, heads: true, tokenizer: TOKENIZER,
  });
}

function randomIds(n, vocabulary, seed) {
  const ids = [2];
  let x = seed >>> 0;
  while (ids.length < n) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    ids.push(14 + (x % (vocabulary - 14)));
  }
  return ids;
}

function relativeError(got, want) {
  let diff = 0, scale = 0;
  for (let i = 0; i < want.length; i++) {
    diff = Math.max(diff, Math.abs(got[i] - want[i]));
    scale = Math.max(scale, Math.abs(want[i]));
  }
  return diff / scale;
}

for (const [i, c] of CASES.entries()) {
  test(`engine = float64 reference: ${c.name}`, async () => {
    const bytes = archiveFor(c, 100 + i);
    const model = await Model.fromBytes(bytes);
    const reference = readArchive(bytes);
    const ids = randomIds(c.length ?? 16, model.vocabulary, i + 1);
    const options = { window: c.window ?? 0, sinks: c.sinks ?? 0 };
    const want = referenceForward(reference, ids, options).logits;
    const got = model.logits(ids, { all: true, exact: true, ...options });
    assert.equal(got.length, ids.length);
    for (let p = 0; p < ids.length; p++) {
      const error = relativeError(got[p], want[p]);
      assert.ok(error <= 1e-3, `position ${p}: max|diff| / max|ref| = ${error.toExponential(2)}`);
    }
    // Fast mode (int8 KV and activations where the engine uses them): reported, bounded loosely.
    const fast = model.logits(ids, { all: true, exact: false, ...options });
    const fastError = Math.max(...fast.map((row, p) => relativeError(row, want[p])));
    console.log(`# ${c.name}: fast-mode max relative error ${fastError.toExponential(2)}`);
    assert.ok(fastError < 0.1, `fast mode drifted: ${fastError}`);
    model.free();
  });
}

test('prefill of a sequence equals feeding it token by token', async () => {
  const c = CASES[4];
  const model = await Model.fromBytes(archiveFor(c, 7));
  const ids = randomIds(20, model.vocabulary, 99);
  for (const exact of [true, false]) {
    const options = { exact, window: 8, sinks: 3 };
    const batched = model.logits(ids, { all: true, ...options });
    const session = model.session(options);
    const stepwise = ids.map((id) => session.feed([id])[0]);
    session.free();
    for (let p = 0; p < ids.length; p++) {
      const error = relativeError(batched[p], stepwise[p]);
      assert.ok(error <= 1e-5, `exact=${exact} position ${p}: ${error}`);
    }
  }
  model.free();
});
