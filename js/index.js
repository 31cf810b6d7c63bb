// needle-wasm: the package entry point.
//   import { loadModel } from 'needle-wasm';
//   const model = await loadModel('needle2.cact', { onProgress: ({ loaded, total }) => {} });
//   for await (const { text } of model.generate('turn on the lights')) process.stdout.write(text);
// In a browser page loadModel runs the model in a dedicated module Web Worker
// (js/worker.js) and returns a proxy with the same methods, every one of them
// returning a promise; { worker: false } keeps it in the calling thread, and
// in Node { worker: true } runs it in a worker_threads Worker.

import { Model } from './model.js';
import { Needle as InThreadNeedle } from './agent.js';

export { Model, Session } from './model.js';
export { NeedleError, STATUS } from './engine.js';
export { ARCHIVE_CACHE } from './load.js';
export { tool } from './agent.js';

/** The built-in demo model (dist/demo.cact): a small model this project trained on the
 *  18 tools of dist/demo-tools.json (src/train/), not Needle 2. */
export const DEMO_ARCHIVE_URL = new URL('../dist/demo.cact', import.meta.url);

const isBrowserPage = typeof window !== 'undefined' && typeof document !== 'undefined'
  && typeof Worker !== 'undefined';

/**
 * Loads a .cact archive in this thread, streaming it into wasm memory.
 * source: URL string, URL, Request, Response, ReadableStream, Blob/File,
 * ArrayBuffer or typed array, or (Node) a file path.
 * options: onProgress({loaded, total, checked}), signal, cache, total, wasm,
 * threads ('auto', the default, or a count; model.engine.threads says what runs).
 * The model's `source` field reports { size, label, fromCache, cacheError }.
 */
export function loadModelInThread(source = DEMO_ARCHIVE_URL, options = {}) {
  return Model.load(source, options);
}

/** Loads a .cact archive (see loadModelInThread); options.worker chooses
 *  where it runs (default: a Web Worker in pages, this thread elsewhere). */
export async function loadModel(source = DEMO_ARCHIVE_URL, options = {}) {
  if (options.worker ?? isBrowserPage) {
    const { WorkerModel } = await import('./client.js');
    return WorkerModel.load(source, options);
  }
  return loadModelInThread(source, options);
}

/**
 * The agent (agent.js). Needle.create({ model, tools, system, ...sampling,
 * worker, load }): over a Model it runs in this thread; over a worker model
 * (loadModel in pages) in that model's worker, sharing its memory; given a
 * source it loads one, in a Web Worker by default in pages (options.worker
 * as for loadModel, options.load: loadModel's options), and free() frees it.
 */
export class Needle extends InThreadNeedle {
  static async create({ model = DEMO_ARCHIVE_URL, worker, load: loadOptions = {}, ...options } = {}) {
    if (model instanceof Model) return super.create({ model, ...options });
    if (typeof model?.createAgent === 'function') return model.createAgent(options);
    if (!(worker ?? isBrowserPage)) return super.create({ model, load: loadOptions, ...options });
    const loaded = await loadModel(model, { ...loadOptions, worker: true });
    try {
      return await loaded.createAgent({ ...options, ownsModel: true });
    } catch (error) {
      await loaded.free();
      throw error;
    }
  }
}
