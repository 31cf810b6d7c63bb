// Instantiates the standalone engine module without any Emscripten glue, the
// same way in a page, a Web Worker and Node.js. The module's imports are the
// memory-growth notification and a clock; views over its memory must be
// re-read after every call that may grow it.
//
// The engine is built in variants (build.sh); the best one this host can run
// is chosen by validating tiny probe modules with WebAssembly.validate, unless
// the caller names one (the `wasm` option) or NEEDLE_WASM_VARIANT does (Node).

import { importNode } from './node-import.js';
import { NeedleError, STATUS } from './errors.js';

/** Engine builds, best first. `needs`: features (probed below) the host must
 *  have. relaxed is the SIMD128 build with i8x16.relaxed_swizzle (build.sh),
 *  bit-identical results, faster CQ table lookups; `shipped: false` would
 *  keep a variant out of the automatic choice (loadable only by name);
 *  `threadedAs`: the threaded build that runs its archives on several threads. */
export const VARIANTS = Object.freeze({
  relaxed: Object.freeze({ file: 'needle-relaxed.wasm', needs: ['simd', 'relaxedSimd'], shipped: true }),
  simd: Object.freeze({ file: 'needle.wasm', needs: ['simd'], shipped: true }),
  nosimd: Object.freeze({ file: 'needle-nosimd.wasm', needs: [], shipped: true }),
  // SIMD128 with wasm atomics over an imported shared memory: run on several
  // threads (threadPlan below decides when, THREADS_PROBE whether the host
  // has WebAssembly threads); never picked by fittingVariants.
  threads: Object.freeze({ file: 'needle-threads.wasm', needs: ['simd'], shipped: true, threaded: true }),
  // SIMD128 that also runs Needle 3 archives (the others refuse them to stay
  // within their size budget): the loaders pick it by an archive's tag
  // (model.js variantForArchive), never by fittingVariants.
  needle3: Object.freeze({ file: 'needle3.wasm', needs: ['simd'], shipped: true, needle3: true,
    threadedAs: 'needle3-threads' }),
  // The threaded build of needle3, chosen for a Needle 3 archive as threads is for the others.
  'needle3-threads': Object.freeze({ file: 'needle3-threads.wasm', needs: ['simd'], shipped: true, threaded: true,
    needle3: true }),
});

/** The threaded build to run for a variant (threadPlan decides whether
 *  it runs): itself when threaded, its `threadedAs`, else threads. */
export const threadedVariant = (variant) => (VARIANTS[variant]?.threaded ? variant : VARIANTS[variant]?.threadedAs ?? 'threads');

// A module with one function (param v128 v128) (result v128) computing
// `op` of its two parameters: it validates only where `op` (and v128) do.
function probeModule(op) {
  const body = [0x00, 0x20, 0x00, 0x20, 0x01, ...op, 0x0b];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
    0x01, 0x07, 0x01, 0x60, 0x02, 0x7b, 0x7b, 0x01, 0x7b, // type: (v128, v128) -> v128
    0x03, 0x02, 0x01, 0x00, // function 0 has type 0
    0x0a, body.length + 2, 0x01, body.length, ...body, // code
  ]);
}

/** Probe modules by feature: i8x16.swizzle (SIMD128) and the standard
 *  encoding of i8x16.relaxed_swizzle (0xfd 0x100). */
export const PROBES = Object.freeze({
  simd: probeModule([0xfd, 0x0e]),
  relaxedSimd: probeModule([0xfd, 0x80, 0x02]),
});

/** A module importing a shared memory (limits flag 3: shared, with a
 *  maximum): it validates only where WebAssembly threads do. */
export const THREADS_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
  0x02, 0x09, 0x01, 0x01, 0x65, 0x01, 0x6d, 0x02, 0x03, 0x01, 0x01, // import "e" "m" (memory 1 1 shared)
]);

/** { simd, relaxedSimd }: what this host's WebAssembly accepts. */
export function detectFeatures(validate = (bytes) => WebAssembly.validate(bytes)) {
  return Object.fromEntries(Object.entries(PROBES).map(([name, bytes]) => [name, validate(bytes)]));
}

/** Shipped single-threaded variants the features allow, best first (the
 *  threaded one is chosen by threadPlan instead). */
export function fittingVariants(features) {
  return Object.keys(VARIANTS).filter((n) => VARIANTS[n].shipped && !VARIANTS[n].threaded && !VARIANTS[n].needle3
    && VARIANTS[n].needs.every((f) => features[f]));
}

/** The variant to run: `forced` when given (an error if unknown or the host
 *  lacks what it needs), else the best shipped variant the features allow. */
export function chooseVariant(features, forced) {
  const fits = (name) => VARIANTS[name].needs.every((f) => features[f]);
  if (forced) {
    if (!Object.hasOwn(VARIANTS, forced)) {
      throw wasmOptionError(forced);
    }
    if (!fits(forced)) {
      const missing = VARIANTS[forced].needs.filter((f) => !features[f]);
      throw new NeedleError(`engine variant "${forced}" needs ${missing.join(' and ')}, which this host lacks`, 'ENGINE');
    }
    return forced;
  }
  const [name] = fittingVariants(features);
  if (!name) throw new NeedleError('no engine variant runs on this host (it needs WebAssembly)', 'ENGINE');
  return name;
}

// Shipped files are spelled `new URL('../dist/<file>', import.meta.url)`:
// the one shape bundlers (Vite, webpack 5, Parcel) recognise and copy into a
// build; a URL computed from a variable would not be there at run time.
const SHIPPED_URLS = Object.freeze({
  relaxed: new URL('../dist/needle-relaxed.wasm', import.meta.url),
  simd: new URL('../dist/needle.wasm', import.meta.url),
  nosimd: new URL('../dist/needle-nosimd.wasm', import.meta.url),
  threads: new URL('../dist/needle-threads.wasm', import.meta.url),
  needle3: new URL('../dist/needle3.wasm', import.meta.url),
  'needle3-threads': new URL('../dist/needle3-threads.wasm', import.meta.url),
});

/** URL of a variant's module file (an unshipped one: next to needle.wasm). */
export function variantUrl(name) {
  if (!Object.hasOwn(VARIANTS, name)) throw wasmOptionError(name);
  return new URL(SHIPPED_URLS[name] ?? new URL(VARIANTS[name].file, SHIPPED_URLS.simd));
}

let features; // probed once per thread
/** The variant NEEDLE_WASM_VARIANT forces (Node), if any. */
export const forcedByEnv = () => globalThis.process?.env?.NEEDLE_WASM_VARIANT || undefined;
/** The variant this thread runs by default (NEEDLE_WASM_VARIANT in Node forces one). */
export function defaultVariant() {
  features ??= detectFeatures();
  return chooseVariant(features, forcedByEnv());
}

async function readModuleBytes(url) {
  if (url.protocol === 'file:') {
    const { readFile } = await importNode('node:fs/promises');
    return readFile(url);
  }
  const response = await fetch(url);
  if (!response.ok) throw new NeedleError(`cannot fetch the engine ${url}: HTTP ${response.status}`, 'ENGINE');
  return response.arrayBuffer();
}

function wasmOptionError(value) {
  return new NeedleError(`unknown engine variant ${JSON.stringify(String(value))}: option wasm (or NEEDLE_WASM_VARIANT) must be `
    + `one of ${Object.keys(VARIANTS).map((v) => `'${v}'`).join(', ')}, the URL of an engine .wasm, or a WebAssembly.Module`, STATUS.ARGUMENT);
}

/** The URL a wasm option names: absolute, or relative to the page. */
function moduleUrl(source) {
  try {
    return new URL(source, globalThis.location?.href);
  } catch {
    throw wasmOptionError(source);
  }
}

/** Compiled bytes, or a NeedleError saying which engine file failed. */
async function compileBytes(url) {
  try {
    return await WebAssembly.compile(await readModuleBytes(url));
  } catch (error) {
    if (error instanceof NeedleError) throw error;
    throw new NeedleError(`the engine ${url} could not be read or compiled: ${error.message}`, 'ENGINE');
  }
}

/** Compiles an engine module once per URL (a WebAssembly.Module can be
 *  instantiated many times and posted to workers). Without a URL, the
 *  default variant's. */
const compiled = new Map();
export function compileEngine(url = variantUrl(defaultVariant())) {
  const key = String(url);
  if (!compiled.has(key)) {
    compiled.set(key, compileBytes(new URL(key)));
  }
  return compiled.get(key);
}

/** Compiles the first of `names` that loads: a deployment may lack the
 *  optional files (a copy of needle.wasm alone), so a variant that cannot be
 *  fetched or compiled gives way to the next; the last failure is thrown. */
export async function compileBestVariant(names, compile = (name) => compileEngine(variantUrl(name))) {
  let failure = new NeedleError('no engine variant runs on this host', 'ENGINE');
  for (const name of names) {
    try {
      return { module: await compile(name), variant: name };
    } catch (error) {
      failure = error;
    }
  }
  throw failure;
}

// A variant name, a module, a URL (or its string), or nothing (the default).
async function resolveModule(source) {
  if (source instanceof WebAssembly.Module) return { module: source, variant: undefined };
  features ??= detectFeatures();
  if (source === undefined || source === null) {
    const forced = forcedByEnv();
    return compileBestVariant(forced ? [chooseVariant(features, forced)] : fittingVariants(features));
  }
  if (typeof source === 'string' && Object.hasOwn(VARIANTS, source)) {
    return compileBestVariant([chooseVariant(features, source)]);
  }
  if (typeof source !== 'string' && !(source instanceof URL)) throw wasmOptionError(source);
  return { module: await compileEngine(moduleUrl(source)), variant: undefined };
}

/** Whether a compiled engine module is the threaded build (it imports its
 *  memory, a shared one). */
export const importsMemory = (module) => WebAssembly.Module.imports(module).some((i) => i.kind === 'memory');

/** Pages the threaded build declares as its initial memory (build.sh's
 *  -sINITIAL_MEMORY=4194304): an imported memory must have at least these. */
export const THREADS_INITIAL_PAGES = 64;

/** A fresh engine instance: { exports, memory, module, variant }. `source`:
 *  a variant name ('simd', 'nosimd', 'relaxed', 'threads'), a
 *  WebAssembly.Module, a URL, or nothing for the best single-threaded
 *  variant this host runs. A module that imports its memory (the threaded
 *  build) gets a new shared memory (createMemory makes it). */
export async function instantiateEngine(source, { createMemory } = {}) {
  const resolved = await resolveModule(source);
  const { module } = resolved;
  const imports = {
    env: {
      emscripten_notify_memory_growth() {},
      needle_now_ms: () => performance.now(), // the engine's clock for tok/s figures
    },
  };
  if (importsMemory(module)) {
    imports.env.memory = createMemory ? createMemory(THREADS_INITIAL_PAGES)
      : new WebAssembly.Memory({ initial: THREADS_INITIAL_PAGES, maximum: 16384, shared: true });
  }
  const instance = await WebAssembly.instantiate(module, imports);
  const { exports } = instance;
  // Standalone modules run their static constructors in _initialize.
  if (exports._initialize) exports._initialize();
  return { exports, memory: exports.memory ?? imports.env.memory, module, variant: resolved.variant };
}

// ---- threads --------------------------------------------------------------
// Whether the engine runs on several threads here, and the workers that do.
// The threaded build (VARIANTS.threads, src/kernels/threads.h) splits its large matrix
// products across workers sharing its WebAssembly.Memory; that needs
// SharedArrayBuffer, which browsers give only to cross-origin isolated pages
// (COOP: same-origin, COEP: require-corp), WebAssembly threads and more than
// one core. threadPlan is the pure decision, hostThreadFacts what this host
// says, startWorkers the workers (js/thread-worker.js).

/** Most threads 'auto' picks (the engine's matrices are small: beyond four
 *  threads the hand-offs cost more than they save). */
export const MAX_AUTO_THREADS = 4;
/** Most threads any request gets. */
export const MAX_THREADS = 16;
/** Stack of each worker, carved from the engine's heap (the kernels need a
 *  few tens of KB). */
export const WORKER_STACK_BYTES = 256 * 1024;
const READY_TIMEOUT_MS = 10000;

const isNode = typeof globalThis.process?.versions?.node === 'string' && typeof window === 'undefined'
  && typeof WorkerGlobalScope === 'undefined';

/** What this host offers: { node, sharedArrayBuffer, crossOriginIsolated,
 *  cores, wasmThreads } (wasmThreads: `validate` accepts a shared memory). */
export async function hostThreadFacts(validate = (bytes) => WebAssembly.validate(bytes)) {
  let cores = globalThis.navigator?.hardwareConcurrency ?? 1;
  if (isNode) {
    const os = await importNode('node:os');
    cores = os.availableParallelism?.() ?? os.cpus().length;
  }
  return {
    node: isNode,
    sharedArrayBuffer: typeof SharedArrayBuffer === 'function',
    crossOriginIsolated: globalThis.crossOriginIsolated === true,
    cores,
    wasmThreads: validate(THREADS_PROBE),
  };
}

/**
 * The pure decision: how many threads to run and, when it is one, why.
 * requested: 'auto' (default) or a positive integer; facts: hostThreadFacts'
 * shape, plus `simd` (the threaded build is a SIMD128 build) and `variant`
 * (a variant the caller forced, if any). Returns { count, reason }; reason
 * is null when count is what was asked for.
 */
export function threadPlan(requested = 'auto', facts) {
  if (requested !== 'auto' && !(Number.isInteger(requested) && requested >= 1 && requested <= MAX_THREADS)) {
    throw new NeedleError(`option threads is ${JSON.stringify(requested) ?? String(requested)}: must be 'auto' or an integer from 1 to ${MAX_THREADS}`, STATUS.ARGUMENT);
  }
  const one = (reason) => ({ count: 1, reason });
  if (requested === 1) return one('one thread was requested');
  if (facts.variant && !VARIANTS[facts.variant]?.threaded && !VARIANTS[facts.variant]?.threadedAs) {
    return one(`the "${facts.variant}" engine variant runs one thread (threads need the "threads" variant)`);
  }
  if (!facts.sharedArrayBuffer) {
    return one(facts.node ? 'SharedArrayBuffer is not available'
      : 'SharedArrayBuffer is not available (the page must be cross-origin isolated: COOP same-origin, COEP require-corp)');
  }
  if (!facts.node && !facts.crossOriginIsolated) {
    return one('the page is not cross-origin isolated (serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)');
  }
  if (!facts.wasmThreads) return one('this WebAssembly engine has no threads (shared memory)');
  if (facts.simd === false) return one('the threaded engine needs SIMD128, which this host lacks');
  const cores = Math.max(1, Math.floor(facts.cores || 1));
  if (cores < 2) return one('this host has one core');
  if (requested === 'auto') return { count: Math.min(cores, MAX_AUTO_THREADS), reason: null };
  if (requested > cores) return { count: cores, reason: `${requested} threads requested, capped at the ${cores} cores` };
  return { count: requested, reason: null };
}

/** A shared memory for the threaded module: `initial` pages, and the largest
 *  maximum this host will reserve (1 GB, else 512 or 256 MB). */
export function createSharedMemory(initial) {
  let failure;
  for (const maximum of [16384, 8192, 4096]) {
    try {
      return new WebAssembly.Memory({ initial, maximum, shared: true });
    } catch (error) {
      failure = error;
    }
  }
  throw failure;
}

function spawnWorker(nodeThreads, message) {
  if (nodeThreads) {
    // The parent's flags, less one a worker refuses (node --input-type=module -e ...).
    const execArgv = process.execArgv.filter((arg) => !arg.startsWith('--input-type'));
    const worker = new nodeThreads.Worker(new URL('./thread-worker.js', import.meta.url), { workerData: message, execArgv });
    return {
      on: (event, fn) => {
        worker.on(event === 'message' ? 'message' : 'error', fn);
        worker.unref(); // after on(): a listener refs the worker; a forgotten engine must not keep the process alive
      },
      terminate: () => worker.terminate(),
    };
  }
  // The literal `new Worker(new URL(...), { type: 'module' })` shape, which bundlers recognise.
  const worker = new Worker(new URL('./thread-worker.js', import.meta.url), { type: 'module', name: 'needle-thread' });
  worker.postMessage(message);
  return {
    on: (event, fn) => worker.addEventListener(event, event === 'message' ? (e) => fn(e.data) : (e) => fn(e.error ?? e.message ?? e)),
    terminate: () => worker.terminate(),
  };
}

/**
 * Starts count - 1 workers on the engine instance `x` (its exports) over
 * `memory`, each on its own stack; resolves when all have joined the pool,
 * to { stop() } (idempotent: tells the pool to let them go, terminates them;
 * returns a promise that settles once they are gone).
 * Rejects (having stopped what it started) if a worker fails.
 */
export async function startWorkers({ module, memory, exports: x }, count) {
  const workers = count - 1;
  const nodeThreads = isNode ? await importNode('node:worker_threads') : null;
  const stacks = [];
  const started = [];
  let stopped;
  let joinedAll = false;
  const stop = () => {
    if (stopped) return stopped;
    const left = x.needle_threads_stop(200) === 0;
    stopped = Promise.allSettled(started.map((worker) => worker.terminate())).then(() => undefined);
    // A stack is reused only once its worker is known to be out of the pool
    // for good; otherwise it stays allocated (the engine is usually going away).
    if (left && joinedAll) for (const ptr of stacks) x.free(ptr);
    return stopped;
  };
  x.needle_threads_start(workers, 0);
  try {
    const ready = [];
    for (let i = 0; i < workers; i++) {
      const base = x.malloc(WORKER_STACK_BYTES);
      if (!base) throw new Error('out of wasm memory for a worker stack');
      stacks.push(base);
      const worker = spawnWorker(nodeThreads, { module, memory, stackTop: (base + WORKER_STACK_BYTES) & ~15 });
      started.push(worker);
      ready.push(new Promise((resolve, reject) => {
        worker.on('message', (m) => (m.ready ? resolve() : m.error && reject(new Error(`thread worker: ${m.error}`))));
        worker.on('error', (e) => reject(e instanceof Error ? e : new Error(`thread worker: ${e}`)));
      }));
    }
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`thread workers did not start within ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS);
    });
    try {
      await Promise.race([Promise.all(ready), timeout]);
    } finally {
      clearTimeout(timer);
    }
    // A worker says ready just before it joins; wait (briefly) for the join.
    const t0 = performance.now();
    while (x.needle_threads_joined() < workers && performance.now() - t0 < 1000) await new Promise((r) => setTimeout(r, 1));
    joinedAll = x.needle_threads_joined() === workers;
    if (!joinedAll) throw new Error('thread workers did not join the pool');
    return { stop };
  } catch (error) {
    stop();
    throw error;
  }
}
