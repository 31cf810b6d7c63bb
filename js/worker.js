// worker.js: the model side of the worker protocol (protocol.js). One worker
// holds one model: it streams the archive into its own engine, answers calls,
// and posts generated tokens as they are produced. Runs as a browser module
// Worker and as a Node worker_threads Worker.

import { loadModelInThread } from './index.js';
import { reply, transferables, decodeSource, endpoint, CALLS } from './protocol.js';
import { NeedleError, STATUS } from './engine.js';

const scope = typeof WorkerGlobalScope !== 'undefined' && globalThis instanceof WorkerGlobalScope
  ? globalThis : (await import('node:worker_threads')).parentPort;
const port = endpoint(scope);

let model = null;
const running = new Map(); // request id -> AbortController

/** Lets queued messages (an abort) run between tokens: a macrotask, not a
 *  microtask, and not setTimeout, which browsers clamp to 4 ms. */
const nextTask = typeof setImmediate === 'function'
  ? () => new Promise((resolve) => setImmediate(resolve))
  : (() => {
      const channel = new MessageChannel();
      const waiting = [];
      channel.port1.onmessage = () => waiting.shift()?.();
      return () => new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(0); });
    })();

function memory() {
  return model ? { bytes: model.engine.memory.buffer.byteLength, peak: model.peakMemoryBytes } : undefined;
}

function needModel() {
  if (!model) throw new NeedleError('no model is loaded in this worker', STATUS.ARGUMENT);
  return model;
}

const calls = {
  inspect: () => needModel().inspect(),
  tokenize: (text) => needModel().tokenize(text),
  detokenize: (ids) => needModel().detokenize(ids),
  logits: (ids, options) => needModel().logits(ids, options),
  info: () => ({ source: needModel().source, vocabulary: model.vocabulary, ids: model.ids }),
};

async function load({ id, source, options }) {
  if (model) throw new NeedleError('this worker already holds a model', STATUS.ARGUMENT);
  const controller = new AbortController();
  running.set(id, controller);
  const [decoded, extra] = decodeSource(source);
  model = await loadModelInThread(decoded, {
    ...options, ...extra, signal: controller.signal,
    onProgress: (progress) => port.post(reply.progress(id, progress)),
  });
  return calls.info();
}

async function generate({ id, prompt, options }) {
  const controller = new AbortController();
  running.set(id, controller);
  let count = 0;
  for await (const piece of needModel().generate(prompt, { ...options, signal: controller.signal })) {
    port.post(reply.token(id, piece));
    count++;
    await nextTask();
  }
  return { tokens: count };
}

async function handle(message) {
  const { id, op } = message;
  if (op === 'abort') {
    const reason = new NeedleError('stopped by the caller', STATUS.ABORTED);
    reason.name = 'AbortError';
    running.get(id)?.abort(reason);
    return;
  }
  try {
    let value;
    if (op === 'load') value = await load(message);
    else if (op === 'generate') value = await generate(message);
    else if (op === 'call' && CALLS.includes(message.method)) value = await calls[message.method](...message.args);
    else if (op === 'free') { model?.free(); model = null; value = null; }
    else throw new NeedleError(`unknown worker request ${op}${message.method ? ` ${message.method}` : ''}`, STATUS.ARGUMENT);
    port.post(reply.result(id, value, memory()), transferables(value));
  } catch (error) {
    port.post(reply.error(id, error));
  } finally {
    running.delete(id);
  }
}

port.listen(handle);
