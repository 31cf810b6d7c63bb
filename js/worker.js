// worker.js: the model side of the worker protocol (protocol.js). One worker
// holds one model: it streams the archive into its own engine, answers calls,
// and posts generated tokens as they are produced. Runs as a browser module
// Worker and as a Node worker_threads Worker.
// Bundlers build this file as its own worker bundle, by default a classic
// script: so no top-level await, no import of index.js (whose lazy import of
// client.js would split the bundle and start a worker inside the worker),
// and Node built-ins only through importNode.

import { reply, transferables, decodeSource, endpoint, CALLS, AGENT_CALLS } from './protocol.js';
import { NeedleError, STATUS, nextTask } from './engine.js';
import { Model } from './model.js';
import { importNode } from './node-import.js';
import { Needle } from './agent.js';

let port = null; // set below, before the first message can arrive

let model = null;
const running = new Map(); // request id -> AbortController
const agents = new Map(); // id of the create request -> Needle

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
  embed: (text, options) => needModel().embed(text, options),
  info: () => ({ source: needModel().source, vocabulary: model.vocabulary, ids: model.ids, threads: model.threads }),
};

async function load({ id, source, options }) {
  if (model) throw new NeedleError('this worker already holds a model', STATUS.ARGUMENT);
  const controller = new AbortController();
  running.set(id, controller);
  const [decoded, extra] = decodeSource(source);
  model = await Model.load(decoded, {
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

/** The agent's state the caller keeps in sync (its prefillCount and
 *  renderedTools() answer without a round trip). */
function agentReply(agent, result) {
  return { result, prefillCount: agent.handle ? agent.prefillCount : 0, renderedTools: agent.handle ? agent.renderedTools() : [] };
}

function needAgent(id) {
  const agent = agents.get(id);
  if (!agent) throw new NeedleError(`no agent ${id} in this worker (freed, or never created)`, STATUS.ARGUMENT);
  return agent;
}

const agentCalls = {
  async create({ id }, { tools, system, toolEmbeddings, sampling }) {
    const agent = await Needle.create({ model: needModel(), tools, system, toolEmbeddings, ...sampling });
    agents.set(id, agent);
    return agentReply(agent, null);
  },
  async complete({ id, agent }, text, options) {
    const needle = needAgent(agent);
    const envelope = await needle.complete(text, { ...options, signal: stopper(id).signal,
      onToken: (piece) => port.post(reply.piece(id, piece)) });
    return agentReply(needle, envelope);
  },
  async extract({ id, agent }, text, schema, options) {
    const needle = needAgent(agent);
    const args = await needle.extract(text, schema, { ...options, signal: stopper(id).signal,
      onToken: (piece) => port.post(reply.piece(id, piece)) });
    return agentReply(needle, args);
  },
  embeddings({ agent }) {
    const needle = needAgent(agent);
    return agentReply(needle, needle.toolEmbeddings());
  },
  reset({ agent }) {
    const needle = needAgent(agent);
    needle.reset();
    return agentReply(needle, null);
  },
  free({ agent }) {
    agents.get(agent)?.free();
    agents.delete(agent);
    return { result: null, prefillCount: 0, renderedTools: [] };
  },
};

/** An AbortController an 'abort' message for request id reaches. */
function stopper(id) {
  const controller = new AbortController();
  running.set(id, controller);
  return controller;
}

function freeAll() {
  for (const agent of agents.values()) agent.free();
  agents.clear();
  model?.free();
  model = null;
}

async function handle(message) {
  const { id, op } = message;
  if (op === 'abort') {
    running.get(id)?.abort(); // each side names what it stopped (errors.js abortError)
    return;
  }
  try {
    let value;
    if (op === 'load') value = await load(message);
    else if (op === 'generate') value = await generate(message);
    else if (op === 'call' && CALLS.includes(message.method)) value = await calls[message.method](...message.args);
    else if (op === 'agent' && AGENT_CALLS.includes(message.method)) value = await agentCalls[message.method](message, ...message.args);
    else if (op === 'free') { freeAll(); value = null; }
    else throw new NeedleError(`unknown worker request ${op}${message.method ? ` ${message.method}` : ''}`, STATUS.ARGUMENT);
    port.post(reply.result(id, value, memory()), transferables(value));
  } catch (error) {
    port.post(reply.error(id, error));
  } finally {
    running.delete(id);
  }
}

function start(target) {
  port = endpoint(target);
  port.listen(handle);
}

if (typeof WorkerGlobalScope !== 'undefined' && globalThis instanceof WorkerGlobalScope) start(globalThis);
else importNode('node:worker_threads').then((threads) => start(threads.parentPort)); // queued until then
