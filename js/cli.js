#!/usr/bin/env node
// needle-wasm command line: inspect, tokenize and run .cact archives with the
// same wasm engine that runs in browsers. `needle-wasm help` lists commands.

import { parseArgs } from 'node:util';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { loadModel, DEMO_ARCHIVE_URL, Needle } from './index.js';
import { nearest } from './options.js';

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
  serve [FILE] [--port N] [--host H]  an OpenAI-compatible endpoint: POST /v1/chat/completions,
        [--cors ORIGIN]               GET /v1/models (default 127.0.0.1:8000); --cors lets the pages
                                      of ORIGIN (https://app.example) call it; it may repeat
  fetch [needle2|needle3] [--url URL] [--cache-dir DIR] [--size BYTES] [--sha256 HEX]
                                      download Needle 2 (or 3) from Hugging Face, verify it, print its path
  postprocess                         Needle 3's call post-processor, no model: JSON lines {"tools", "system",
                                      "request", "conversation", "calls"} on stdin -> {"calls", "withhold", "strong"}
  version, --version, -v                the package version
Without FILE, commands use the built-in demo model (dist/demo.cact: a small model trained
by this project on the 18 tools of dist/demo-tools.json, the default of complete --tools).
FILE may be the name needle2 or needle3 once fetched: the verified copy in the cache directory
(--cache-dir, else $NEEDLE_WASM_CACHE, else $XDG_CACHE_HOME/needle-wasm or ~/.cache/needle-wasm).`;

const OPTIONS = {
  json: { type: 'boolean' }, quick: { type: 'boolean' }, all: { type: 'boolean' }, exact: { type: 'boolean' },
  raw: { type: 'boolean' }, tiny: { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
  ids: { type: 'string' }, window: { type: 'string' }, sinks: { type: 'string' },
  prompt: { type: 'string' }, 'max-tokens': { type: 'string' }, temperature: { type: 'string' },
  'top-k': { type: 'string' }, 'top-p': { type: 'string' }, 'min-p': { type: 'string' },
  'repetition-penalty': { type: 'string' }, seed: { type: 'string' },
  tools: { type: 'string' }, query: { type: 'string' }, system: { type: 'string' },
  port: { type: 'string' }, host: { type: 'string' }, cors: { type: 'string', multiple: true },
  url: { type: 'string' }, 'cache-dir': { type: 'string' }, size: { type: 'string' }, sha256: { type: 'string' },
};

const COMMANDS = { inspect, tokenize, detokenize, logits, generate, complete, demo, 'make-random': makeRandom, bench, serve,
  fetch: fetchModel, postprocess };
// The commands whose FILE may be the name needle2 or needle3: the verified copy `fetch` keeps.
const FILE_COMMANDS = new Set(['inspect', 'tokenize', 'detokenize', 'logits', 'generate', 'complete', 'bench', 'serve']);

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

async function complete([file], values, { named = false } = {}) {
  if (values.query === undefined) throw new UsageError('complete needs --query TEXT');
  // Needle 2 calls any tools, so by name it takes the demo tools too; another file may not.
  if (file && !named && !values.tools) throw new UsageError('complete FILE needs --tools tools.json');
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
  console.log('(not Needle 2: for that, needle-wasm fetch needle2, then needle-wasm complete needle2 --query ...)');
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

async function serve([file], values) {
  const port = number(values, 'port', 8000);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be an integer from 0 to 65535, got "${values.port}"`);
  const { openai } = await import('./openai.js');
  const { serveOpenAI } = await import('./openai-server.js');
  const client = await openai({ model: file ?? DEMO_ARCHIVE_URL, worker: false });
  const server = await serveOpenAI(client, { port, host: values.host ?? '127.0.0.1', cors: values.cors ?? [] });
  console.log(`needle-wasm: serving model "${client.name}" at ${server.url}/v1 (POST /v1/chat/completions, GET /v1/models); Ctrl-C stops`);
  await new Promise((resolve) => { process.once('SIGINT', resolve); process.once('SIGTERM', resolve); });
  await server.close();
  await client.free();
}

/** fetch [needle2|needle3]: downloads the model into the cache directory, verified; prints its path.
 *  SIGINT or SIGTERM stops the download (its .part is removed) and exits 130 or 143. */
async function fetchModel([name = 'needle2', ...extra], values) {
  if (!['needle2', 'needle3'].includes(name) || extra.length) {
    throw new UsageError(`fetch knows two models, needle2 and needle3; got "${[name, ...extra].join(' ')}"`);
  }
  const size = number(values, 'size', undefined);
  if (size !== undefined && !(Number.isSafeInteger(size) && size > 0)) throw new UsageError(`--size must be a byte count, got "${values.size}"`);
  if (values.sha256 !== undefined && !/^[0-9a-f]{64}$/i.test(values.sha256)) throw new UsageError(`--sha256 must be 64 hex digits, got "${values.sha256}"`);
  const expect = { ...(size === undefined ? {} : { size }), ...(values.sha256 === undefined ? {} : { sha256: values.sha256 }) };
  const { fetchRelease } = await import('./released-cache.js');
  const mb = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;
  const tty = process.stderr.isTTY;
  const controller = new AbortController();
  const stop = (signal) => controller.abort(signal);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    const { path, downloaded } = await fetchRelease(name, {
      url: values.url, dir: values['cache-dir'], expect, signal: controller.signal,
      onProgress: tty ? ({ loaded, total }) => process.stderr.write(`\rneedle-wasm: downloading ${name}: ${mb(loaded)} of ${mb(total)}`) : undefined,
    });
    process.stderr.write(`${tty && downloaded ? '\n' : ''}needle-wasm: ${name} ${downloaded ? 'downloaded and verified' : 'was already downloaded (verified)'} (SHA-256 and shape)\n`);
    console.log(path);
    return 0;
  } catch (error) {
    if (!controller.signal.aborted) throw error;
    process.stderr.write(`${tty ? '\n' : ''}needle-wasm: ${name} download stopped by ${controller.signal.reason}; nothing was kept\n`);
    return controller.signal.reason === 'SIGINT' ? 130 : 143;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

/** postprocess: one JSON request per stdin line (blank lines skipped) -> one line each: the
 *  engine's {"calls","withhold","strong"}, or {"line":N,"error":...,"code":...} for a bad line,
 *  after which it goes on. Exits 1 when any line failed. */
async function postprocess(rest) {
  if (rest.length) throw new UsageError(`postprocess reads its requests from stdin and takes no FILE; got "${rest.join(' ')}"`);
  const { postprocessLine } = await import('./postprocess.js');
  let lineNo = 0, failed = 0;
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    lineNo++;
    if (!line.trim()) continue;
    try {
      console.log(await postprocessLine(line));
    } catch (error) {
      if (error.code === 'ENGINE' || error.code === 9) throw error; // no usable engine: every line would fail
      failed++;
      console.log(JSON.stringify({ line: lineNo, error: `line ${lineNo}: ${error.message}`, code: error.code }));
    }
  }
  return failed ? 1 : 0;
}

/** argv as parseArgs reads it; a misspelt option or a missing value is a usage error. */
function parse(argv) {
  // Unknown options first, from the tokens of a lenient parse: the strict one's message names no alternative.
  const { tokens } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: false, tokens: true });
  const unknown = tokens.find((t) => t.kind === 'option' && !Object.hasOwn(OPTIONS, t.name));
  if (unknown) {
    const near = nearest(unknown.name, Object.keys(OPTIONS));
    throw new UsageError(`unknown option ${unknown.rawName}${near ? `: did you mean --${near}?` : ''}`);
  }
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true });
  } catch (error) {
    throw new UsageError(error.message); // a string option without its value, a value given to a flag
  }
}

async function main(argv) {
  const { values, positionals } = parse(argv);
  const [command, ...rest] = positionals;
  if (values.version || command === 'version') {
    const { readFile } = await import('node:fs/promises');
    console.log(JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')).version);
    return 0;
  }
  if (!command || values.help || command === 'help') {
    console.log(USAGE);
    return 0;
  }
  const run = COMMANDS[command];
  if (!run) {
    const near = nearest(command, [...Object.keys(COMMANDS), 'help', 'version']);
    throw new UsageError(`unknown command "${command}"${near ? `: did you mean ${near}?` : ''}`);
  }
  const named = FILE_COMMANDS.has(command) && (rest[0] === 'needle2' || rest[0] === 'needle3');
  if (named) rest[0] = await (await import('./released-cache.js')).cachedRelease(rest[0], values['cache-dir']);
  return (await run(rest, values, { named })) ?? 0; // fetch returns 130 or 143 when a signal stopped it
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
