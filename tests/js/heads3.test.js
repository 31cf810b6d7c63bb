// Needle 3's probe heads (needle3-model.md section 5) in the engine against
// the float64 reference (tests/js/reference/heads3.js): the embedding, the
// confidence and the router, with CQ head matrices (1-bit and 4-bit) and the
// older dense layout, on the tiny geometry and the released one. Exact mode
// within 1e-3 (relative to the largest output; measured 3e-8 to 4e-7); the
// default mode against the reference in the numerics fast mode computes (the
// makers' engine numerics for the weight products, A8 at the mHC stream, the
// query heads and the int8 K/V) within 1e-2 (measured 3.2e-5 to 4.5e-3; the
// confidence as an absolute probability). Also: pooling is the same whether the tokens come in one
// prefill or one by one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeTestTokenizerBlob, syntheticPieces } from '../../js/cact-writer.js';
import { writeCact3 } from '../../js/cact3-writer.js';
import { RELEASED3_HEADS, TINY3_GEOMETRY } from '../../js/cact3-format.js';
import { Model } from '../../js/model.js';
import { randomIds } from './logit-checks.js';
import { readArchive3 } from './reference/archive3.js';
import { referenceHeads3 } from './reference/heads3.js';

const KINDS = { embedding: 1, confidence: 2, router: 3 };
const WIDTH = { embedding: 128, confidence: 1, router: 3 };
const ALL_HEADS = [{ kind: 'embedding', probes: 2, queries: 3 }, { kind: 'confidence', probes: 4, queries: 4 },
  { kind: 'router', probes: 1, queries: 2 }];

const CASES = [
  { name: 'tiny, all three heads, 4-bit head matrices', heads: ALL_HEADS, bits: (n) => (n.includes('head') ? 4 : 2) },
  { name: 'tiny, 1-bit weights everywhere, the older dense head layout', bits: 1,
    heads: ALL_HEADS.map((h) => ({ ...h, dense: true })) },
  { name: 'the released geometry and its confidence head', released: true, heads: RELEASED3_HEADS, length: 5 },
];

function archiveFor(c, seed) {
  if (c.released) return writeCact3({ seed, heads: c.heads, tokenizer: makeTestTokenizerBlob(syntheticPieces(8192)) });
  return writeCact3({ geometry: TINY3_GEOMETRY, seed, bits: c.bits, group: 32, heads: c.heads,
    tokenizer: makeTestTokenizerBlob(syntheticPieces(320)) });
}

/** Every head's output after feeding ids (in one feed or one by one). */
function engineHeads(model, ids, { exact, stepwise = false }) {
  const session = model.session({ exact });
  const { engine } = model;
  const out = engine.malloc(128 * 4);
  try {
    if (stepwise) for (const id of ids) session.feed([id]);
    else session.feed(ids);
    const result = {};
    for (const [kind, code] of Object.entries(KINDS)) {
      const status = engine.x.needle_session_head(session.handle, code, out, engine.err);
      result[kind] = status ? null : Float32Array.from(new Float32Array(engine.memory.buffer, out, WIDTH[kind]));
    }
    return result;
  } finally {
    engine.x.free(out);
    session.free();
  }
}

const relative = (got, want) => {
  const scale = Math.max(...Array.from(want, Math.abs));
  return Math.max(...Array.from(want, (w, i) => Math.abs(got[i] - w))) / scale;
};
// The confidence is a probability: its error is absolute.
const error = (kind, got, want) => (kind === 'confidence' ? Math.abs(got[0] - want) : relative(got, want));

for (const [i, c] of CASES.entries()) {
  test(`Needle 3 heads = float64 reference: ${c.name}`, async () => {
    const bytes = archiveFor(c, 40 + i);
    const model = await Model.fromBytes(bytes, { wasm: 'needle3' });
    const reference = readArchive3(bytes);
    const ids = randomIds(c.length ?? 12, model.vocabulary, 70 + i);
    const want = referenceHeads3(reference, ids);
    const got = engineHeads(model, ids, { exact: true });
    const wantFast = referenceHeads3(reference, ids, { a8: true, q8: true });
    const fast = engineHeads(model, ids, { exact: false });
    const report = [], checks = [];
    for (const kind of Object.keys(KINDS)) {
      const declared = c.heads.some((h) => h.kind === kind);
      assert.equal(got[kind] !== null, declared, `${kind}: present in the engine iff declared`);
      if (!declared) continue;
      const exactError = error(kind, got[kind], want[kind]);
      const fastError = error(kind, fast[kind], wantFast[kind]);
      const shift = error(kind, kind === 'confidence' ? [wantFast[kind]] : wantFast[kind], want[kind]);
      report.push(`${kind} exact ${exactError.toExponential(2)} fast ${fastError.toExponential(2)} (that reference vs exact ${shift.toExponential(2)})`);
      checks.push(() => {
        assert.ok(exactError <= 1e-3, `${kind}: exact mode is ${exactError} off the reference`);
        assert.ok(fastError <= 1e-2, `${kind}: the default mode is ${fastError} off the reference's fast numerics`);
      });
    }
    console.log(`# ${c.name}: ${report.join('; ')}`);
    for (const check of checks) check();
    const stepwise = engineHeads(model, ids, { exact: true, stepwise: true });
    for (const kind of Object.keys(KINDS)) {
      if (got[kind]) assert.ok(relative(stepwise[kind], got[kind]) <= 1e-5, `${kind}: prefill and decode pool alike`);
    }
    model.free();
  });
}
