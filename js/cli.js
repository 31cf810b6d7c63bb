#!/usr/bin/env node
// needle-wasm command line: inspect, tokenize and run .cact archives with the
// same wasm engine that runs in browsers. `needle-wasm help` lists commands.

import { parseArgs } from 'node:util';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { loadModel, DEMO_ARCHIVE_URL, Needle } from './index.js';

const USAGE = `usage: needle-wasm <command> [FILE] [options]
  inspect [FILE] [--json]             geometry and tensor table of an archive
  tokenize [FILE]                     UTF-8 lines on stdin -> one JSON array of ids per line
  detokenize [FILE]                   JSON arrays of ids on stdin -> one line of text each
  logits [FILE] --ids 2,17,99 [--all] [--window N] [--sinks K] [--exact]
  generate [FILE] --prompt TEXT [--raw] [--max-tokens N] [--temperature T]
           [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R] [--seed S]
           [--exact]
  complete [FILE] --query TEXT [--tools tools.json] [--system S] [--seed N] [--temperature T]
           [--max-tokens N] [--exact]   one agent turn: prints the envelope JSON
  demo                                one command through the built-in demo model
  make-random OUT [--tiny]            write an archive of random weights (released geometry, or tiny)
  bench [FILE] [--json] [--quick]     decode/prefill tok/s, stage shares, GEMV GMAC/s, memory
Without FILE, commands use the built-in demo model (dist/demo.cact: a small model trained
by this project on the 18 tools of dist/demo-tools.json, the default of complete --tools).`;

const OPTIONS = {
  json: { type: 'boolean' }, quick: { type: 'boolean' }, all: { type: 'boolean' }, exact: { type: 'boolean' },
  raw: { type: 'boolean' }, tiny: { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
  ids: { type: 'string' }, window: { type: 'string' }, sinks: { type: 'string' },
  prompt: { type: 'string' }, 'max-tokens': { type: 'string' }, temperature: { type: 'string' },
  'top-k': { type: 'string' }, 'top-p': { type: 'string' }, 'min-p': { type: 'string' },
  'repetition-penalty': { type: 'string' }, seed: { type: 'string' },
  tools: { type: 'string' }, query: { type: 'string' }, system: { type: 'string' },
};

const COMMANDS = { inspect, tokenize, detokenize, logits, generate, complete, demo, 'make-random': makeRandom, bench };

class UsageError extends Error {}

function number(values, name, fallback) {
  if (values[name] === undefined) return fallback;
  const n = Number(values[name]);
  if (!Number.isFinite(n)) throw new UsageError(`--${name} must be a number, got "${values[name]}"`);
  return n;
}

async function inspect([file], values) {
  const model = await loadModel(file ?? DEMO_ARCHIVE_URL);
  const { geometry, tensors } = model.inspect();
  if (values.json) {
    console.log(JSON.stringify({ geometry, tensors }));
    return;
  }
  console.log(Object.entries(geometry).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(',') : v}`).join('\n'));
  console.log('\nindex  name                              dtype  shape              bits group       bytes');
  let total = 0;
  for (const t of tensors) {
    total += t.bytes;
    console.log(`${String(t.index).padStart(5)}  ${t.name.padEnd(32)}  ${t.dtype.padEnd(5)}  ` +
      `${JSON.stringify(t.shape).padEnd(17)}  ${String(t.bits || '').padStart(4)} ${String(t.group || '').padStart(5)} ${String(t.bytes).padStart(11)}`);
  }
  console.log(`\n${tensors.length} tensors, ${total} bytes of tensor data`);
}

async function eachLine(fn) {
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) fn(line);
}

async function tokenize([file]) {
  const model = await loadModel(file ?? DEMO_ARCHIVE_URL);
  await eachLine((line) => console.log(JSON.stringify(model.tokenize(line))));
}

async function detokenize([file]) {
  const model = await loadModel(file ?? DEMO_ARCHIVE_URL);
  await eachLine((line) => {
    if (line.trim()) console.log(model.detokenize(JSON.parse(line)));
  });
}

async function logits([file], values) {
  if (!values.ids) throw new UsageError('logits needs --ids, e.g. --ids 2,17,99');
  const ids = values.ids.split(',').map((s) => {
    const id = Number(s);
    if (!Number.isInteger(id)) throw new UsageError(`--ids: "${s}" is not an integer`);
    return id;
  });
  const model = await loadModel(file ?? DEMO_ARCHIVE_URL);
  const rows = model.logits(ids, {
    all: !!values.all, exact: !!values.exact,
    window: number(values, 'window', 0), sinks: number(values, 'sinks', 0),
  });
  console.log(JSON.stringify({ logits: rows.map((r) => Array.from(r)) }));
}

async function generate([file], values) {
  if (values.prompt === undefined) throw new UsageError('generate needs --prompt TEXT');
  const model = await loadModel(file ?? DEMO_ARCHIVE_URL);
  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  for await (const { text } of model.generate(values.prompt, {
    raw: !!values.raw, exact: !!values.exact,
    maxTokens: number(values, 'max-tokens', 128), temperature: number(values, 'temperature', 0),
    topK: number(values, 'top-k', 0), topP: number(values, 'top-p', 1), minP: number(values, 'min-p', 0),
    repetitionPenalty: number(values, 'repetition-penalty', 1), seed: number(values, 'seed', 0),
    signal: controller.signal,
  })) {
    process.stdout.write(text);
  }
  process.stdout.write('\n');
}

const DEMO_TOOLS = new URL('../dist/demo-tools.json', import.meta.url);

async function complete([file], values) {
  if (values.query === undefined) throw new UsageError('complete needs --query TEXT');
  if (file && !values.tools) throw new UsageError('complete FILE needs --tools tools.json');
  const { readFile } = await import('node:fs/promises');
  const tools = JSON.parse(await readFile(values.tools ?? DEMO_TOOLS, 'utf8'));
  if (!Array.isArray(tools)) throw new UsageError(`${values.tools} must hold a JSON array of tools`);
  const agent = await Needle.create({
    model: file ?? DEMO_ARCHIVE_URL, tools, system: values.system ?? '', exact: !!values.exact,
    temperature: number(values, 'temperature', 0), seed: number(values, 'seed', 0),
  });
  try {
    const envelope = await agent.complete(values.query, { maxNewTokens: number(values, 'max-tokens', 256) });
    console.log(JSON.stringify(envelope));
  } finally {
    agent.free();
  }
}

async function demo() {
  const query = 'set a timer for 10 minutes';
  console.log('needle-wasm demo: the built-in model, trained by this project on 18 everyday tools');
  console.log('(not Needle 2: load needle2.cact for that, e.g. needle-wasm complete needle2.cact --tools ...)');
  console.log(`query: ${query}`);
  await complete([], { query });
}

async function bench([file], values) {
  const { runBench, formatBench } = await import('./bench.js');
  const progress = (what) => { if (!values.json) process.stderr.write(`bench: ${what}\n`); };
  const result = await runBench({ file, quick: !!values.quick, progress });
  console.log(values.json ? JSON.stringify(result) : formatBench(result));
}

async function makeRandom([out], values) {
  if (!out) throw new UsageError('make-random needs an output path');
  const { writeRandomArchive } = await import('./cact-writer.js');
  await writeRandomArchive(out, { tiny: !!values.tiny });
}

async function main(argv) {
  const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true });
  const [command, ...rest] = positionals;
  if (!command || values.help || command === 'help') {
    console.log(USAGE);
    return 0;
  }
  const run = COMMANDS[command];
  if (!run) throw new UsageError(`unknown command "${command}"`);
  await run(rest, values);
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === (await import('node:fs')).realpathSync(process.argv[1])) {
  // `needle-wasm inspect | head`: a reader that stops early ends the command quietly.
  process.stdout.on('error', (error) => { if (error.code === 'EPIPE') process.exit(0); throw error; });
  main(process.argv.slice(2)).then(
    (code) => { process.exitCode = code; },
    (error) => {
      console.error(`needle-wasm: ${error.message}`);
      if (error instanceof UsageError) console.error(USAGE);
      process.exitCode = error instanceof UsageError ? 2 : 1;
    },
  );
}

export { main };
