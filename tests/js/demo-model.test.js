// The trained demo model (src/train/demo-model/, the default archive):
// - three implementations agree on it: the trainer's PyTorch forward of the
//   dequantised weights (reference-logits.f32, written at training time), the
//   float64 JS reference and the engine's exact mode, every position within
//   1e-3 of the logit range; and the engine tokenizes the chat text to the
//   ids training used;
// - through the public agent API, greedy, on 600 held-out commands (held-out
//   templates and values) and 100 of small talk, the figures of manifest.json
//   hold: the exact call, the numbers, no call for small talk, the same calls in fast and exact mode and in the no-SIMD and threaded
//   builds, the expected tools among the five retrieved from all 18, the
//   confidence AUROC between right and wrong calls; and in 200 held-out
//   conversations, the calls of the requests after the first turn; and on 42
//   everyday commands and small talk written apart from the generator's
//   templates (src/train/everyday.jsonl), with the demo page's tools.
//   FLOORS are the measured figures less a margin for the noise of a few
//   commands; the goals of issue 49 (85% exact calls, 98% of numbers, 95%
//   quiet small talk, AUROC 0.85) are met for small talk only
//   (docs/demo-model.md).
// Needs dist/ (./build.sh).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { loadModelInThread, Needle } from '../../js/index.js';
import { PRESETS } from '../../web/presets.js';
import { readArchive, referenceForward } from './reference/index.js';
import {
  DEMO_MODEL_DIR, evaluate, summarise, agreement, confidenceFigures, heldout, everyday,
} from '../../src/train/evaluate.mjs';

const ARCHIVE = new URL('../../dist/demo.cact', import.meta.url);
const reference = JSON.parse(readFileSync(new URL('reference.json', DEMO_MODEL_DIR), 'utf8'));
const torchLogits = new Float32Array(readFileSync(new URL('reference-logits.f32', DEMO_MODEL_DIR)).buffer.slice(0));
const examples = heldout();
// Measured (manifest.json, fast mode in the makers' engine numerics): exact call 0.697 of 600;
// numbers right in 106 of the 121 commands that have one; no call for 97 of 100 held-out small
// talk lines; fast and exact mode agree on 0.99 of 600, no-SIMD and threaded builds on all;
// retrieval 0.987; confidence AUROC 0.803 over 700 commands and small talk (greedy); in 200
// held-out conversations, 206 later requests reached and 161 of them right.
// On the 42 everyday commands (src/train/everyday.jsonl), 37 right.
const FLOORS = {
  exactCall: 0.67, numbers: 0.84, smallTalk: 0.94, sameAsExact: 0.97, sameBuilds: 0.99, retrieval: 0.97, auroc: 0.78,
  laterReached: 195, laterRight: 0.75, everyday: 35,
};

/** Largest |a - b| at any position, over that position's logit range in b. */
function worstRelative(rows, ref, V) {
  let worst = 0;
  rows.forEach((row, p) => {
    const r = ref.subarray(p * V, (p + 1) * V);
    let lo = Infinity, hi = -Infinity, err = 0;
    for (let i = 0; i < V; i++) {
      lo = Math.min(lo, r[i]); hi = Math.max(hi, r[i]);
      err = Math.max(err, Math.abs(row[i] - r[i]));
    }
    worst = Math.max(worst, err / (hi - lo));
  });
  return worst;
}

async function withModel(options, fn) {
  const model = await loadModelInThread(ARCHIVE, options);
  try {
    return await fn(model);
  } finally {
    await model.free();
  }
}

test('the demo archive is the committed trained model, as its manifest describes it', async () => {
  const bytes = readFileSync(ARCHIVE);
  assert.deepEqual(bytes, readFileSync(new URL('needle-demo.cact', DEMO_MODEL_DIR)));
  const manifest = JSON.parse(readFileSync(new URL('manifest.json', DEMO_MODEL_DIR), 'utf8'));
  assert.equal(manifest.archive.bytes, bytes.length);
  await withModel({ threads: 1 }, (model) => {
    const { geometry, tensors } = model.inspect();
    for (const [field, value] of Object.entries(manifest.geometry)) assert.deepEqual(geometry[field], value, field);
    // The manifest names tensors as the writer does ("layerNN.q_proj", "engram0.tables").
    const bitOf = Object.fromEntries(Object.entries(manifest.quantisation.bits).flatMap(([bits, names]) =>
      names.map((n) => [n, Number(bits)])));
    for (const t of tensors.filter((x) => x.dtype === 'CQ')) {
      const name = t.name.replace(/^layer \d+ /, 'layerNN.').replace(/^engram site (\d+) /, 'engram$1.').replace(/^mhc /, 'mhc.');
      assert.equal(t.bits, bitOf[name], `${t.name}: ${t.bits} bits, the manifest says ${bitOf[name]}`);
    }
    assert.equal(model.pieceId('\u2581'), 14, 'the word boundary piece the manifest names');
  });
});

test('PyTorch, the float64 reference and the engine agree on the trained archive (1e-3 of the range)', async () => {
  const V = reference.vocabulary;
  assert.equal(torchLogits.length, reference.positions * V);
  await withModel({ threads: 1 }, (model) => {
    const ids = [model.ids.bos, ...model.tokenize(reference.prompt), ...model.tokenize(reference.target), model.ids.eos];
    assert.deepEqual(ids, reference.ids, 'the engine tokenizes the chat text as training did');
    const engine = model.logits(reference.ids, { all: true, exact: true });
    const e = worstRelative(engine, torchLogits, V);
    assert.ok(e < 1e-3, `engine exact vs PyTorch: ${e}`);
  });
  const { logits } = referenceForward(readArchive(new Uint8Array(readFileSync(ARCHIVE))), reference.ids);
  const r = worstRelative(logits, torchLogits, V);
  assert.ok(r < 1e-3, `float64 reference vs PyTorch: ${r}`);
});

test('held-out commands through the agent API: exact calls, the same calls in every build and mode', { timeout: 1800000 }, async (t) => {
  const fast = await withModel({ threads: 1 }, (m) => evaluate(m, examples));
  const summary = summarise(fast);
  t.diagnostic(JSON.stringify(summary));
  assert.equal(summary.commands, 600);
  assert.ok(summary.exact_call >= FLOORS.exactCall, `exact call on ${summary.exact_call} of held-out commands`);
  const { numbers, small_talk: smallTalk } = summary;
  assert.ok(numbers.right / numbers.commands >= FLOORS.numbers, `numbers right in ${numbers.right} of ${numbers.commands}`);
  assert.ok(smallTalk.no_call / smallTalk.count >= FLOORS.smallTalk, `no call for ${smallTalk.no_call} of ${smallTalk.count} small talk lines`);

  // The other builds and modes on the first 200 commands (the manifest has all 600): the slow
  // scalar build makes the full set take minutes.
  const some = examples.slice(0, 200);
  const exact = await withModel({ threads: 1 }, (m) => evaluate(m, some, { exact: true }));
  const nosimd = await withModel({ wasm: 'nosimd', threads: 1 }, (m) => evaluate(m, some));
  const threads = await withModel({ wasm: 'threads', threads: 2 }, (m) => evaluate(m, some));
  for (const [name, other, floor] of [['exact', exact, FLOORS.sameAsExact], ['no-SIMD', nosimd, FLOORS.sameBuilds],
    ['threaded', threads, FLOORS.sameBuilds]]) {
    const same = agreement(fast.slice(0, 200), other);
    t.diagnostic(`fast and ${name}: the same calls on ${same} of 200`);
    assert.ok(same >= floor, `fast and ${name} make the same calls on ${same}`);
  }
  const confidence = confidenceFigures(fast);
  t.diagnostic(JSON.stringify(confidence));
  assert.ok(confidence.auroc >= FLOORS.auroc, `confidence AUROC ${confidence.auroc}`);
});

test('conversations: later requests after the first turn get their calls', { timeout: 600000 }, async (t) => {
  const results = await withModel({ threads: 1 }, (m) => evaluate(m, heldout(new URL('conversations.jsonl', DEMO_MODEL_DIR))));
  const { later_requests: later } = summarise(results);
  t.diagnostic(JSON.stringify(later));
  assert.ok(later.reached >= FLOORS.laterReached, `${later.reached} later requests reached`);
  assert.ok(later.right / later.reached >= FLOORS.laterRight, `${later.right} of ${later.reached} later requests right`);
});

test('retrieval: with all 18 tools declared, the expected tools are among the five rendered', { timeout: 1800000 }, async (t) => {
  const results = await withModel({ threads: 1 }, (m) => evaluate(m, examples, { allTools: true }));
  const summary = summarise(results);
  t.diagnostic(JSON.stringify(summary));
  assert.ok(results.every((r) => r.turns[0].rendered.length === 5));
  assert.ok(summary.retrieval_top5 >= FLOORS.retrieval, `retrieval top-5 ${summary.retrieval_top5}`);
});

test('everyday commands, written apart from the templates, with the page\'s 18 tools', { timeout: 300000 }, async (t) => {
  const results = await withModel({ threads: 1 }, (m) => evaluate(m, everyday()));
  const missed = results.filter((r) => !r.correct).map((r) => `${r.example.turns[0].query}: ${JSON.stringify(r.turns[0].calls)}`);
  t.diagnostic(missed.join('; '));
  assert.equal(results.length, 42);
  assert.ok(results.length - missed.length >= FLOORS.everyday, `${results.length - missed.length} of 42 everyday commands right`);
});

test('the demo page\'s presets return their expected calls (its tools and system text, greedy)', { timeout: 300000 }, async () => {
  const page = readFileSync(new URL('../../web/index.html', import.meta.url), 'utf8');
  const system = page.match(/<input id="system" type="text" value="([^"]*)"/)[1];
  const tools = JSON.parse(readFileSync(new URL('../../web/tools.json', import.meta.url), 'utf8'));
  const sorted = (v) => (Array.isArray(v) ? v.map(sorted)
    : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v);
  await withModel({ threads: 1 }, async (model) => {
    const agent = await Needle.create({ model, tools, system });
    const wrong = [];
    for (const preset of PRESETS) {
      agent.reset();
      const calls = (await agent.complete(preset.query, { maxNewTokens: 256 })).function_calls
        .map(({ name, arguments: args }) => ({ name, arguments: args }));
      if (JSON.stringify(sorted(calls)) !== JSON.stringify(sorted(preset.expected))) wrong.push(`${preset.id}: ${JSON.stringify(calls)}`);
    }
    agent.free();
    assert.deepEqual(wrong, [], 'presets that miss their expected calls');
  });
});
