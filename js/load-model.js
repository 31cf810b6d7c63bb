// load-model.js: loadModel() and loadModelInThread(), the package's way in:
// where a model runs (a Web Worker in pages, this thread elsewhere) and the
// built-in demo model when no source is given. index.js re-exports them;
// needle2.js and openai.js import them from here, not from index.js, so no
// module imports the entry point back.

import { Model } from './model.js';
import { checkKeys } from './options.js';
import { LOAD_OPTIONS, DEMO_ARCHIVE_URL } from './load.js';

export const isBrowserPage = typeof window !== 'undefined' && typeof document !== 'undefined'
  && typeof Worker !== 'undefined';

/**
 * Loads a .cact archive in this thread, streaming it into wasm memory.
 * source: URL string, URL, Request, Response, ReadableStream, Blob/File,
 * ArrayBuffer or typed array, or (Node) a file path.
 * options: onProgress({loaded, total, checked}), signal, cache, total, wasm,
 * threads ('auto', the default, or a count; model.engine.threads says what runs).
 * The model's `source` field reports { size, label, fromCache, cacheError }.
 */
export function loadModelInThread(source, options = {}) {
  checkKeys('loadModel()', options, LOAD_OPTIONS);
  return source === undefined ? withDemoHint(Model.load(DEMO_ARCHIVE_URL, options)) : Model.load(source, options);
}

/** Loads a .cact archive (see loadModelInThread); options.worker chooses
 *  where it runs (default: a Web Worker in pages, this thread elsewhere). */
export async function loadModel(source, options = {}) {
  checkKeys('loadModel()', options, LOAD_OPTIONS);
  if (options.worker ?? isBrowserPage) {
    const { WorkerModel } = await import('./client.js');
    return source === undefined ? withDemoHint(WorkerModel.load(DEMO_ARCHIVE_URL, options)) : WorkerModel.load(source, options);
  }
  return loadModelInThread(source, options);
}

/** The default model not found, as in a bundled app that did not import
 *  'needle-wasm/demo' (the bundler then has no copy of it): say so. */
export async function withDemoHint(loading) {
  try {
    return await loading;
  } catch (error) {
    if (['HTTP', 'NETWORK', 'READ'].includes(error?.code)) {
      error.message += '. A bundled app that uses the built-in demo model passes it by name: '
        + "import { DEMO_ARCHIVE_URL } from 'needle-wasm/demo'; loadModel(DEMO_ARCHIVE_URL)";
    }
    throw error;
  }
}
