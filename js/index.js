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
import { DEMO_ARCHIVE_URL } from './load.js';
import { isBrowserPage, loadModel, withDemoHint } from './load-model.js';

export { Model, Session } from './model.js';
export { loadModel, loadModelInThread } from './load-model.js';
export { NeedleError, STATUS } from './engine.js';
export { ARCHIVE_CACHE } from './load.js';
export { tool } from './agent.js';
export { openai } from './openai.js';
/** Needle 3's call post-processor alone, with no model (postprocess.js, src/agent/postprocess.c). */
export { postprocessCalls } from './postprocess.js';
/** The real Needle 2 and Needle 3 from Hugging Face: their URLs, their figures, a checked load (needle2.js, needle3.js). */
export { NEEDLE2_URL, NEEDLE2_FIGURES, loadNeedle2, verifyNeedle2 } from './needle2.js';
export { NEEDLE3_URL, NEEDLE3_FIGURES, loadNeedle3, verifyNeedle3 } from './needle3.js';

/** The built-in demo model (dist/demo.cact): a small model this project trained on the
 *  18 tools of dist/demo-tools.json (src/train/), not Needle 2. Bundled apps that use it
 *  import DEMO_ARCHIVE_URL from 'needle-wasm/demo' instead, so that the bundler emits it. */
export { DEMO_ARCHIVE_URL };

/**
 * The agent (agent.js). Needle.create({ model, tools, system, ...sampling,
 * worker, load }): over a Model it runs in this thread; over a worker model
 * (loadModel in pages) in that model's worker, sharing its memory; given a
 * source it loads one, in a Web Worker by default in pages (options.worker
 * as for loadModel, options.load: loadModel's options), and free() frees it.
 */
export class Needle extends InThreadNeedle {
  static async create({ model, worker, load: loadOptions = {}, ...options } = {}) {
    if (model instanceof Model) return super.create({ model, ...options });
    if (typeof model?.createAgent === 'function') return model.createAgent(options);
    if (!(worker ?? isBrowserPage)) {
      const creating = super.create({ model: model ?? DEMO_ARCHIVE_URL, load: loadOptions, ...options });
      return model === undefined ? withDemoHint(creating) : creating;
    }
    const loaded = await loadModel(model, { ...loadOptions, worker: true });
    try {
      return await loaded.createAgent({ ...options, ownsModel: true });
    } catch (error) {
      await loaded.free();
      throw error;
    }
  }
}
