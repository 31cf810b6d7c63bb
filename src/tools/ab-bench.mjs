#!/usr/bin/env node
// ab-bench.mjs A B [--rounds N] [--archive FILE] [--json]: a change measured
// against the build it replaces. A and B are two checkouts of this project,
// each built (./build.sh wasm); their engines run in this one process,
// alternately, round after round, so both see the same machine load: on
// small shared machines that is a steadier measure than two bench runs.
//
// Per round and build, on one thread: decode tok/s at 256 tokens of context
// (16 steps), prefill tok/s of a 512-token prompt, and the bench's command
// (a 40-token query, maxNewTokens 96, one required call); on two threads
// decode and prefill again. Prints the medians and B's ratio to A (above 1:
// B is faster). Default archive: B's dist/released-random.cact.

import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const COMMAND_TOOLS = [{ name: 'set_light', description: 'Turn the lights of a room on or off', parameters: {
  type: 'object', properties: { room: { type: 'string', enum: ['kitchen', 'hall', 'bedroom'] }, on: { type: 'boolean' } },
  required: ['room', 'on'], additionalProperties: false } }];

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** n token ids in [4, vocabulary), deterministic (the bench's generator). */
function tokenIds(n, vocabulary, seed) {
  let s = seed >>> 0 || 1;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return 4 + (s % (vocabulary - 4));
  });
}

async function load(root, bytes, threads) {
  const url = (file) => pathToFileURL(resolve(root, file)).href;
  const { Model } = await import(url('js/model.js'));
  const { Needle } = await import(url('js/agent.js'));
  return { model: await Model.fromBytes(bytes.slice(), { threads }), Needle };
}

function decodeTps(model) {
  const session = model.session();
  try {
    session.feed(tokenIds(256, model.vocabulary, 256));
    const steps = tokenIds(16, model.vocabulary, 7);
    const t0 = performance.now();
    for (const id of steps) session.feed([id]);
    return steps.length / ((performance.now() - t0) / 1000);
  } finally {
    session.free();
  }
}

function prefillTps(model, length) {
  const session = model.session();
  try {
    const ids = tokenIds(length, model.vocabulary, length + 1);
    const t0 = performance.now();
    session.feed(ids);
    return length / ((performance.now() - t0) / 1000);
  } finally {
    session.free();
  }
}

async function commandMs({ model, Needle }, i) {
  const agent = await Needle.create({ model, tools: COMMAND_TOOLS, temperature: 0, requireCall: true });
  try {
    const query = model.detokenize(tokenIds(40, model.vocabulary, 1000 + i));
    const t0 = performance.now();
    const envelope = await agent.complete(query, { maxNewTokens: 96 });
    if (!envelope.success && envelope.error_code !== 'truncated') throw new Error(envelope.error);
    return performance.now() - t0;
  } finally {
    agent.free();
  }
}

/** Interleaved medians of builds a and b (checkout roots). */
export async function abBench(a, b, { rounds = 5, archive = resolve(b, 'dist/released-random.cact') } = {}) {
  const bytes = new Uint8Array(await readFile(archive));
  const result = {};
  for (const threads of [1, 2]) {
    const builds = { a: await load(a, bytes, threads), b: await load(b, bytes, threads) };
    const runs = { a: { decode: [], prefill: [], command: [] }, b: { decode: [], prefill: [], command: [] } };
    try {
      for (const k of ['a', 'b']) decodeTps(builds[k].model), prefillTps(builds[k].model, 64); // warm up
      for (let round = 0; round < rounds; round++) {
        for (const k of ['a', 'b']) {
          runs[k].decode.push(decodeTps(builds[k].model));
          runs[k].prefill.push(prefillTps(builds[k].model, 512));
          if (threads === 1) for (let i = 0; i < 3; i++) runs[k].command.push(await commandMs(builds[k], i));
        }
      }
    } finally {
      for (const k of ['a', 'b']) builds[k].model.free();
    }
    for (const figure of threads === 1 ? ['decode', 'prefill', 'command'] : ['decode', 'prefill']) {
      const ma = median(runs.a[figure]), mb = median(runs.b[figure]);
      result[`${figure}_t${threads}`] = { a: ma, b: mb, ratio: figure === 'command' ? ma / mb : mb / ma };
    }
  }
  return result;
}

async function main(argv) {
  const [a, b] = argv.filter((x) => !x.startsWith('--'));
  const option = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
  if (!a || !b) {
    console.error('usage: node src/tools/ab-bench.mjs A B [--rounds N] [--archive FILE] [--json]');
    process.exit(2);
  }
  const result = await abBench(a, b, { rounds: Number(option('--rounds') ?? 5), archive: option('--archive') });
  if (argv.includes('--json')) {
    console.log(JSON.stringify(result));
    return;
  }
  const unit = { decode: 'tok/s', prefill: 'tok/s', command: 'ms' };
  for (const [name, { a: ma, b: mb, ratio }] of Object.entries(result)) {
    const [figure, threads] = name.split('_');
    console.log(`${figure.padEnd(8)} ${threads === 't1' ? '1 thread ' : '2 threads'}  A ${ma.toFixed(1).padStart(7)}  `
      + `B ${mb.toFixed(1).padStart(7)} ${unit[figure].padEnd(5)}  B/A x${ratio.toFixed(2)}`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main(process.argv.slice(2));
