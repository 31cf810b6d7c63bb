// Instantiates the standalone engine module (dist/needle.wasm) without any
// Emscripten glue, the same way in a page, a Web Worker and Node.js. The
// module's imports are the memory-growth notification and a clock; views over its
// memory must be re-read after every call that may grow it.

const defaultUrl = new URL('../dist/needle.wasm', import.meta.url);

async function readModuleBytes(url) {
  if (url.protocol === 'file:') {
    const { readFile } = await import('node:fs/promises');
    return readFile(url);
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url}: HTTP ${response.status}`);
  return response.arrayBuffer();
}

/** Compiles the engine module once per URL (a WebAssembly.Module can be
 *  instantiated many times and posted to workers). */
const compiled = new Map();
export function compileEngine(url = defaultUrl) {
  const key = String(url);
  if (!compiled.has(key)) {
    compiled.set(key, readModuleBytes(new URL(key)).then((bytes) => WebAssembly.compile(bytes)));
  }
  return compiled.get(key);
}

/** A fresh engine instance: { exports, memory, module }. */
export async function instantiateEngine(moduleOrUrl) {
  const module = moduleOrUrl instanceof WebAssembly.Module ? moduleOrUrl : await compileEngine(moduleOrUrl);
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
  return { exports, memory: exports.memory, module };
}
