// Publishes a training run into src/train/demo-model/: the archive, the
// held-out commands, the three-way check's reference, and manifest.json with
// what made the model and what it measures (held-out accuracy through the
// public agent API in fast, exact, no-SIMD and threaded builds, retrieval,
// confidence, time per command, the everyday commands of everyday.jsonl).
//
//   node src/train/publish.mjs build/train src/train/demo-model
//   node src/train/publish.mjs --measure src/train/demo-model
//        measures the published archive again (after an engine change) and
//        rewrites only the manifest's figures (heldout, conversations,
//        everyday, confidence)

import { copyFileSync, mkdirSync, readFileSync, writeFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { loadModelInThread } from '../../js/index.js';
import { canonicalTensors } from '../../js/cact-format.js';
import { evaluate, summarise, confidenceFigures, agreement, heldout, everyday } from './evaluate.mjs';

const measureOnly = process.argv[2] === '--measure';
const [from, to] = measureOnly ? [null, process.argv[3]] : process.argv.slice(2);
if (!to) {
  console.error('usage: node src/train/publish.mjs TRAIN_DIR OUT_DIR | --measure OUT_DIR');
  process.exit(2);
}
mkdirSync(to, { recursive: true });
if (!measureOnly) {
  copyFileSync(join(from, 'demo.cact'), join(to, 'needle-demo.cact'));
  for (const f of ['heldout.jsonl', 'conversations.jsonl', 'reference.json', 'reference-logits.f32']) {
    copyFileSync(join(from, f), join(to, f));
  }
}
const archive = join(to, 'needle-demo.cact');
const examples = heldout(join(to, 'heldout.jsonl'));

async function run(variant, options, list = examples) {
  const model = await loadModelInThread(archive, { wasm: variant, threads: variant === 'threads' ? 2 : 1 });
  try {
    return await evaluate(model, list, options);
  } finally {
    await model.free();
  }
}

const log = (msg) => process.stderr.write(`publish: ${msg}\n`);
const fast = await run('simd', {});
log(`fast ${JSON.stringify(summarise(fast))}`);
const exact = await run('simd', { exact: true });
const nosimd = await run('nosimd', {});
const threads = await run('threads', {});
const allTools = await run('simd', { allTools: true });
log(`all tools ${JSON.stringify(summarise(allTools))}`);
const sampled = await run('simd', { sampling: { temperature: 1, seed: 7 } });
const conversations = await run('simd', {}, heldout(join(to, 'conversations.jsonl')));
const everydayResults = await run('simd', {}, everyday());

const figures = {
  heldout: {
    fast: summarise(fast),
    exact: summarise(exact),
    fast_vs_exact_same_call: agreement(fast, exact),
    nosimd_vs_fast_same_call: agreement(nosimd, fast),
    threads_vs_fast_same_call: agreement(threads, fast),
    all_18_tools: summarise(allTools),
  },
  conversations: summarise(conversations),
  everyday: { commands: everydayResults.length, right: everydayResults.filter((r) => r.correct).length },
  confidence: {
    greedy: confidenceFigures(fast),
    sampled_temperature_1: confidenceFigures(sampled),
  },
};

/** Each training phase's last progress line in train.log: steps, schedule, loss, tokens/s, minutes. */
function phases(log) {
  return log.split(/^--- .*$/m).map((part) => {
    const lines = [...part.matchAll(/^step (\d+)\/(\d+) loss ([\d.]+) .* qat (\w+) (\d+) tok\/s ([\d.]+) min$/gm)];
    const last = lines.at(-1);
    return last && { steps: Number(last[1]), schedule: Number(last[2]), final_loss: Number(last[3]),
      tokens_per_second: Number(last[5]), minutes: Number(last[6]) };
  }).filter(Boolean);
}

/** What made the model: the archive, its geometry and bit map, seed, data and training. */
function provenance() {
  const train = readFileSync(join(from, 'train.log'), 'utf8');
  const counts = (list) => list.reduce((c, e) => ({ ...c, [e.kind]: (c[e.kind] ?? 0) + 1 }), {});
  const weights = JSON.parse(readFileSync(join(from, 'weights.json'), 'utf8'));
  // The trainer gives every matrix a width; the archive stores only its CQ tensors at one.
  const cq = canonicalTensors(weights.geometry).filter((t) => t.kind === 'cq').map((t) => t.name);
  const bitOf = Object.fromEntries(cq.map((n) => [n, weights.bits[n]]));
  const bitsUsed = [...new Set(Object.values(bitOf))].sort();
  const base = phases(train)[0];
  const recipeLine = train.match(/^recipe (.*)$/m);
  if (!recipeLine) throw new Error(`${join(from, 'train.log')} has no "recipe" line (train.py writes one at the start of a base run)`);
  const recipe = JSON.parse(recipeLine[1]);
  // The last heads run's (a run's heads can be trained again on its base).
  const headsLine = [...train.matchAll(/^heads recipe (.*)$/gm)].at(-1);
  if (!headsLine) throw new Error(`${join(from, 'train.log')} has no "heads recipe" line (train.py writes one at the start of a heads run)`);
  const heads = JSON.parse(headsLine[1]);
  const ownRight = [...train.matchAll(/^own calls: (\d+) of (\d+) right$/gm)].at(-1) ?? [null, 0]; // none with --own-calls 0
  return {
    model: 'needle-demo: a small Needle 2 architecture model trained by this project on the 18 tools of web/tools.json (not Needle 2)',
    command: 'bash build.sh train',
    archive: { file: 'needle-demo.cact', bytes: statSync(archive).size },
    geometry: weights.geometry,
    tokenizer: `SentencePiece BPE of ${weights.geometry.vocabulary} pieces (spm_train on the generated text): the chat markers at 4..13, the word `
      + 'boundary \u2581 as a piece of its own at 14, argument values cut out of the corpus lines',
    quantisation: {
      group: weights.group,
      bits: Object.fromEntries(bitsUsed.map((b) => [b, cq.filter((n) => bitOf[n] === b)
        .map((n) => n.replace(/^layer\d\d\./, 'layerNN.')).filter((n, i, all) => all.indexOf(n) === i)])),
      training: `CQ fake quantisation (straight-through) at this bit map with int8 levels, and int8 activations as fast mode quantises them, for the last ${Math.round(recipe.qat_share * 100)}% of steps`,
    },
    seed: recipe.seed,
    data: { generator: `src/train/generate.py --seed ${recipe.seed} --train ${recipe.train} --heldout ${examples.length}, `
      + `${Math.round(recipe.synthetic * 100)}% of the free-text values of training commands invented (--synthetic ${recipe.synthetic})`
      + (recipe.later ? `, ${Math.round(recipe.later * 100)}% of training conversations going on with one or two later requests (--later ${recipe.later})` : ''),
      heldout: counts(examples) },
    training: {
      phases: phases(train),
      note: `one phase: ${base.steps} steps of ${recipe.batch_tokens * (recipe.ranks ?? 1)} tokens`
        + `${recipe.ranks > 1 ? ` (${recipe.ranks} data-parallel ranks of ${recipe.batch_tokens})` : ''} on a cosine schedule (lr ${recipe.lr}, warmup `
        + `${recipe.warmup}), the last ${Math.round(recipe.qat_share * 100)}% with CQ and fast mode's int8 fake quantisation; then the heads `
        + `on the frozen base: ${heads.contrastive_steps} contrastive steps, and ${heads.confidence_steps} confidence steps `
        + `(lr ${heads.confidence_lr}) on ${heads.own_calls} of the base model's own calls on fresh commands `
        + `(${Math.round(heads.own_synthetic * 100)}% of their free-text values invented; ${ownRight[1]} of them right) `
        + `and ${heads.corrupted_examples} training targets and corrupted calls (train.log has each step)`,
    },
  };
}

const manifestFile = join(to, 'manifest.json');
const manifest = { ...(measureOnly ? JSON.parse(readFileSync(manifestFile, 'utf8')) : provenance()), ...figures };
writeFileSync(manifestFile, `${JSON.stringify(manifest, null, 1)}\n`);
console.log(JSON.stringify(manifest.heldout, null, 1));
