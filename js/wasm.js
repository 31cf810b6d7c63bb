// Instantiates the standalone engine module without any Emscripten glue, the
// same way in a page, a Web Worker and Node.js. The module's imports are the
// memory-growth notification and a clock; views over its memory must be
// re-read after every call that may grow it.
//
// The engine is built in variants (build.sh); the best one this host can run
// is chosen by validating tiny probe modules with WebAssembly.validate, unless
// the caller names one (the `wasm` option) or NEEDLE_WASM_VARIANT does (Node).

import { importNode } from './node-import.js';

/** Engine builds, best first. `needs`: features (probed below) the host must
 *  have. relaxed is the SIMD128 build with i8x16.relaxed_swizzle (build.sh),
 *  bit-identical results, faster CQ table lookups; `shipped: false` would
 *  keep a variant out of the automatic choice (loadable only by name). */
export const VARIANTS = Object.freeze({
  relaxed: Object.freeze({ file: 'needle-relaxed.wasm', needs: ['simd', 'relaxedSimd'], shipped: true }),
  simd: Object.freeze({ file: 'needle.wasm', needs: ['simd'], shipped: true }),
  nosimd: Object.freeze({ file: 'needle-nosimd.wasm', needs: [], shipped: true }),
});

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

/** { simd, relaxedSimd }: what this host's WebAssembly accepts. */
export function detectFeatures(validate = (bytes) => WebAssembly.validate(bytes)) {
  return Object.fromEntries(Object.entries(PROBES).map(([name, bytes]) => [name, validate(bytes)]));
}

/** Shipped variants the features allow, best first. */
export function fittingVariants(features) {
  return Object.keys(VARIANTS).filter((n) => VARIANTS[n].shipped && VARIANTS[n].needs.every((f) => features[f]));
}

/** The variant to run: `forced` when given (an error if unknown or the host
 *  lacks what it needs), else the best shipped variant the features allow. */
export function chooseVariant(features, forced) {
  const fits = (name) => VARIANTS[name].needs.every((f) => features[f]);
  if (forced) {
    if (!Object.hasOwn(VARIANTS, forced)) {
      throw new Error(`unknown engine variant "${forced}" (known: ${Object.keys(VARIANTS).join(', ')})`);
    }
    if (!fits(forced)) {
      const missing = VARIANTS[forced].needs.filter((f) => !features[f]);
      throw new Error(`engine variant "${forced}" needs ${missing.join(' and ')}, which this host lacks`);
    }
    return forced;
  }
  const [name] = fittingVariants(features);
  if (!name) throw new Error('no engine variant runs on this host');
  return name;
}

// Shipped files are spelled `new URL('../dist/<file>', import.meta.url)`:
// the one shape bundlers (Vite, webpack 5, Parcel) recognise and copy into a
// build; a URL computed from a variable would not be there at run time.
const SHIPPED_URLS = Object.freeze({
  relaxed: new URL('../dist/needle-relaxed.wasm', import.meta.url),
  simd: new URL('../dist/needle.wasm', import.meta.url),
  nosimd: new URL('../dist/needle-nosimd.wasm', import.meta.url),
});

/** URL of a variant's module file (an unshipped one: next to needle.wasm). */
export function variantUrl(name) {
  if (!Object.hasOwn(VARIANTS, name)) throw new Error(`unknown engine variant "${name}"`);
  return new URL(SHIPPED_URLS[name] ?? new URL(VARIANTS[name].file, SHIPPED_URLS.simd));
}

let features; // probed once per thread
const forcedByEnv = () => globalThis.process?.env?.NEEDLE_WASM_VARIANT || undefined;
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
  if (!response.ok) throw new Error(`cannot fetch ${url}: HTTP ${response.status}`);
  return response.arrayBuffer();
}

/** Compiles an engine module once per URL (a WebAssembly.Module can be
 *  instantiated many times and posted to workers). Without a URL, the
 *  default variant's. */
const compiled = new Map();
export function compileEngine(url = variantUrl(defaultVariant())) {
  const key = String(url);
  if (!compiled.has(key)) {
    compiled.set(key, readModuleBytes(new URL(key)).then((bytes) => WebAssembly.compile(bytes)));
  }
  return compiled.get(key);
}

/** Compiles the first of `names` that loads: a deployment may lack the
 *  optional files (a copy of needle.wasm alone), so a variant that cannot be
 *  fetched or compiled gives way to the next; the last failure is thrown. */
export async function compileBestVariant(names, compile = (name) => compileEngine(variantUrl(name))) {
  let failure = new Error('no engine variant runs on this host');
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
  return { module: await compileEngine(source), variant: undefined };
}

/** A fresh engine instance: { exports, memory, module, variant }. `source`:
 *  a variant name ('simd', 'nosimd', 'relaxed'), a WebAssembly.Module, a URL,
 *  or nothing for the best variant this host runs. */
export async function instantiateEngine(source) {
  const resolved = await resolveModule(source);
  const { module } = resolved;
  const imports = {
    env: {
      emscripten_notify_memory_growth() {},
      needle_now_ms: () => performance.now(), // the engine's clock for tok/s figures
    },
  };
  const instance = await WebAssembly.instantiate(module, imports);
  const { exports } = instance;
  // Standalone modules run their static constructors in _initialize.
  if (exports._initialize) exports._initialize();
  return { exports, memory: exports.memory, module, variant: resolved.variant };
}
