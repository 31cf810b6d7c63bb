// The model's own first-turn calls, through the public agent API (greedy,
// fast mode, as users run it), on commands it was not trained on: a fresh
// seed of the generator, training templates, invented values. The confidence
// head (heads.py) learns from these real mistakes beside corrupted calls.
//
//   node src/train/own-calls.mjs ARCHIVE EXAMPLES.jsonl OUT.jsonl
//
// OUT has one line per example: { calls, correct, decodeProbability }. The
// archive's confidence head is held open (train.py), so the envelope's
// confidence, min(head, decode probability), is the decode probability alone.

import { readFileSync, writeFileSync } from 'node:fs';
import { loadModelInThread } from '../../js/index.js';
import { evaluate } from './evaluate.mjs';

const [archive, input, output] = process.argv.slice(2);
if (!output) {
  console.error('usage: node src/train/own-calls.mjs ARCHIVE EXAMPLES.jsonl OUT.jsonl');
  process.exit(2);
}
const examples = readFileSync(input, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line))
  .map((example) => ({ ...example, turns: example.turns.slice(0, 1) }));
const model = await loadModelInThread(archive, { threads: 1 });
try {
  const results = await evaluate(model, examples);
  writeFileSync(output, results.map((r) => JSON.stringify({
    calls: r.turns[0].calls, correct: r.correct, decodeProbability: r.turns[0].confidence,
  })).join('\n') + '\n');
  const right = results.filter((r) => r.correct).length;
  console.log(`own calls: ${right} of ${results.length} right`);
} finally {
  await model.free();
}
