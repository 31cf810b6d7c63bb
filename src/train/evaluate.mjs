// Scores the demo model on held-out commands through the public agent API
// (Needle.create + complete, greedy), as a user's code would run it. The
// trainer's manifest figures and tests/js/demo-model.test.js both come from
// here.
//
//   node src/train/evaluate.mjs [ARCHIVE] [--exact] [--variant simd|nosimd|threads] [--all-tools]
//        [--heldout FILE] [--limit N] [--failures]
//
// Prints one JSON summary. As a module: evaluate(model, examples, options).

import { readFileSync } from 'node:fs';
import { Needle, loadModelInThread } from '../../js/index.js';

const here = new URL('./', import.meta.url);
export const DEMO_MODEL_DIR = new URL('demo-model/', here);
export const catalogue = () => JSON.parse(readFileSync(new URL('../../web/tools.json', here), 'utf8'));
export const heldout = (file = new URL('heldout.jsonl', DEMO_MODEL_DIR)) => readFileSync(file, 'utf8')
  .split('\n').filter(Boolean).map((line) => JSON.parse(line));
/** Commands and small talk written as a new user would, apart from the
 *  generator's templates, each with the demo page's 18 tools and system text. */
export const everyday = () => heldout(new URL('everyday.jsonl', here));

/** JSON equality with object keys in any order (numbers by value). */
export function sameJson(a, b) {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  }
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a), kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]));
  }
  return a === b;
}

/**
 * Runs every example's turns on a fresh agent over `model`. options: exact,
 * allTools (declare the whole catalogue, so retrieval picks the five
 * rendered). Returns one result per example: { example, correct, turns:
 * [{ calls, expected, correct, confidence, ms, rendered }] }.
 */
export async function evaluate(model, examples, { exact = false, allTools = false, sampling = {} } = {}) {
  const tools = catalogue();
  const byName = new Map(tools.map((t) => [t.name, t]));
  const results = [];
  for (const example of examples) {
    const declared = allTools ? tools : example.tools.map((n) => byName.get(n));
    const agent = await Needle.create({ model, tools: declared, system: example.system, exact, ...sampling });
    try {
      const turns = [];
      for (const [i, turn] of example.turns.entries()) {
        const start = performance.now();
        const envelope = 'query' in turn
          ? await agent.complete(turn.query, { kind: 'query' })
          : await agent.complete(turn.result, { kind: 'tool_result' });
        const ms = performance.now() - start;
        if (!envelope.success) throw new Error(`turn ${i} of ${example.template} failed: ${envelope.error}`);
        const expected = turn.calls;
        turns.push({
          calls: envelope.function_calls, expected, ms, confidence: envelope.confidence,
          reasoning: envelope.reasoning, type: envelope.type,
          correct: sameJson(envelope.function_calls, expected),
          rendered: agent.renderedTools().map((t) => t.name),
        });
        if (!turns.at(-1).correct) break; // a wrong call gets no tool result to follow it
      }
      results.push({ example, turns, correct: turns.length === example.turns.length && turns.every((t) => t.correct) });
    } finally {
      agent.free();
    }
  }
  return results;
}

/** Area under the ROC curve of scores separating positives from negatives (ties count half). */
export function auroc(positives, negatives) {
  let wins = 0;
  for (const p of positives) for (const n of negatives) wins += p > n ? 1 : p === n ? 0.5 : 0;
  return wins / (positives.length * negatives.length);
}

/** How well the envelope's confidence separates right first-turn calls
 *  from wrong ones: AUROC and a reliability table (accuracy per tenth). */
export function confidenceFigures(results) {
  const scored = results.map((r) => r.turns[0]).filter((t) => t.confidence !== null);
  const right = scored.filter((t) => t.correct).map((t) => t.confidence);
  const wrong = scored.filter((t) => !t.correct).map((t) => t.confidence);
  const reliability = [];
  for (let b = 0; b < 10; b++) {
    const inBin = scored.filter((t) => Math.min(9, Math.floor(t.confidence * 10)) === b);
    if (inBin.length) {
      reliability.push({ confidence: `${b / 10}-${(b + 1) / 10}`, calls: inBin.length,
        accuracy: inBin.filter((t) => t.correct).length / inBin.length });
    }
  }
  return { auroc: auroc(right, wrong), right: right.length, wrong: wrong.length, reliability };
}

/** Share of examples whose first-turn calls are the same in two runs. */
export function agreement(a, b) {
  return a.filter((r, i) => sameJson(r.turns[0].calls, b[i].turns[0].calls)).length / a.length;
}

/** Whether turn i of an example is a later request: a new query after the first turn. */
const isLater = (example, i) => i > 0 && 'query' in example.turns[i];

/** Later requests that were reached, every turn before them right, and how many of those were right. */
export function laterRequests(results) {
  const reached = results.flatMap((r) => r.turns.filter((t, i) => isLater(r.example, i)));
  return { reached: reached.length, right: reached.filter((t) => t.correct).length };
}

/** The number arguments of a list of calls, as [tool, argument, value]. */
const numbersOf = (calls) => calls.flatMap((c) => Object.entries(c.arguments ?? {})
  .filter(([, v]) => typeof v === 'number').map(([k, v]) => [c.name, k, v]));

/** Commands whose expected first-turn calls hold a number, and those where
 *  the model's calls hold each of those numbers under the same tool and
 *  argument (whatever else they get wrong). */
export function numberFigures(results) {
  const withNumbers = results.filter((r) => numbersOf(r.example.turns[0].calls).length);
  const right = withNumbers.filter((r) => {
    const got = numbersOf(r.turns[0].calls ?? []);
    return numbersOf(r.example.turns[0].calls).every(([tool, key, value]) =>
      got.some(([t, k, v]) => t === tool && k === key && v === value));
  });
  return { commands: withNumbers.length, right: right.length };
}

/** Small talk (generate.py's "chatter"): the share that got no call. */
function smallTalk(results) {
  const chatter = results.filter((r) => r.example.kind === 'chatter');
  return { count: chatter.length, no_call: chatter.filter((r) => !r.turns[0].calls?.length).length };
}

/** The figures of one evaluation run. Small talk is scored apart, so that
 *  the exact-call figure stays one over the same kind of commands. */
export function summarise(all) {
  const results = all.filter((r) => r.example.kind !== 'chatter');
  const first = results.map((r) => r.turns[0]);
  const called = results.filter((r) => r.example.turns[0].calls.length);
  const retrieved = called.filter((r) => r.example.turns[0].calls.every((c) => r.turns[0].rendered.includes(c.name)));
  const byKind = {};
  for (const r of results) {
    const k = (byKind[r.example.kind] ??= { count: 0, correct: 0 });
    k.count++;
    k.correct += r.correct;
  }
  const ms = first.map((t) => t.ms).sort((a, b) => a - b);
  return {
    commands: results.length,
    exact_call: results.filter((r) => r.correct).length / results.length,
    by_kind: byKind,
    retrieval_top5: retrieved.length / called.length,
    numbers: numberFigures(results),
    ...(all.length > results.length && { small_talk: smallTalk(all) }),
    ...(results.some((r) => r.example.turns.some((t, i) => isLater(r.example, i))) && { later_requests: laterRequests(results) }),
    command_ms: { median: ms[Math.floor(ms.length / 2)], p90: ms[Math.floor(ms.length * 0.9)] },
  };
}

async function main(argv) {
  const option = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
  const file = argv.find((a, i) => !a.startsWith('--') && !argv[i - 1]?.match(/^--(variant|heldout|limit)$/))
    ?? new URL('needle-demo.cact', DEMO_MODEL_DIR);
  const variant = option('--variant') ?? 'simd';
  const examples = heldout(option('--heldout')).slice(0, Number(option('--limit') ?? Infinity));
  const model = await loadModelInThread(file, { wasm: variant, threads: variant === 'threads' ? 2 : 1 });
  try {
    const results = await evaluate(model, examples, { exact: argv.includes('--exact'), allTools: argv.includes('--all-tools') });
    const summary = summarise(results);
    if (argv.includes('--failures')) {
      summary.failures = results.filter((r) => !r.correct).map((r) => ({
        query: r.example.turns[0].query, expected: r.turns.map((t) => t.expected), got: r.turns.map((t) => t.calls),
        reasoning: r.turns[0].reasoning, rendered: r.turns[0].rendered,
      }));
    }
    console.log(JSON.stringify(summary, null, 1));
  } finally {
    await model.free();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.slice(2));
