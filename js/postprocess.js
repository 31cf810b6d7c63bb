// postprocess.js: the Needle 3 call post-processor (src/agent/postprocess.c,
// docs/needle3.md) on its own, with no model loaded. The makers' engine runs
// every call list the model writes through this pure function (argument
// repairs, gates that withhold the list, date resolution, a duplicate
// drop); here it runs in an instance of dist/needle3.wasm, the one variant
// that carries it, created on first use and kept.

import { Engine, NeedleError, STATUS } from './engine.js';

const engines = new Map(); // wasm source -> Promise<Engine>

/** One engine per wasm source ('needle3' unless the caller names another
 *  variant, a URL or a WebAssembly.Module), single-threaded, cached. A
 *  failed start is not cached, so a later call tries again. */
function engineFor(wasm = 'needle3') {
  const key = wasm instanceof WebAssembly.Module ? wasm : String(wasm);
  if (!engines.has(key)) {
    const starting = Engine.create(wasm, { threads: 1 });
    engines.set(key, starting);
    starting.catch(() => engines.delete(key));
  }
  return engines.get(key);
}

/** Runs needle_postprocess over one request object given as JSON text and
 *  returns the engine's output line as it wrote it:
 *  {"calls":"<compact JSON text>","withhold":bool,"strong":bool}. Errors
 *  are NeedleErrors with the engine's status and message. */
export async function postprocessLine(requestJson, { wasm } = {}) {
  if (typeof requestJson !== 'string') throw new NeedleError('postprocess: the request must be JSON text', STATUS.ARGUMENT);
  const engine = await engineFor(wasm);
  const slots = engine.malloc(8); // char *out, size_t out_len (wasm32)
  try {
    const status = engine.withString(requestJson, (ptr, len) => engine.x.needle_postprocess(ptr, len, slots, slots + 4, engine.err));
    engine.check(status);
    const view = new DataView(engine.memory.buffer);
    const out = view.getUint32(slots, true);
    const length = view.getUint32(slots + 4, true);
    try {
      return engine.readString(out, length);
    } finally {
      engine.x.free(out);
    }
  } finally {
    engine.x.free(slots);
  }
}

/**
 * postprocessCalls({ tools, system, request, conversation, calls }, { wasm })
 * -> { calls, withhold, strong }
 *   tools         the declared tools: an array, or its JSON text (kept byte for byte)
 *   system        the system text as the engine stores it (its `date:` fact and
 *                 timestamps blanked; default '')
 *   request       the user turn's text
 *   conversation  the conversation so far, this request last (default system + '\n' + request)
 *   calls         the call list the model wrote, as JSON text (an array is serialised)
 * calls comes back as compact JSON text, exactly as the engine writes it (text
 * that is not a non-empty JSON array comes back unchanged); withhold: a gate
 * fired (the engine moves the calls to suppressed_calls); strong: a cross-call
 * gate fired (exclusion, negation, reported speech), the one flag that also
 * withholds a call a trigger forced. wasm: the engine to use (default 'needle3').
 */
export async function postprocessCalls(input, { wasm } = {}) {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new NeedleError('postprocessCalls takes one object { tools, system, request, conversation, calls }', STATUS.ARGUMENT);
  }
  const { calls } = input;
  const body = { ...input, ...(Array.isArray(calls) ? { calls: JSON.stringify(calls) } : {}) };
  const line = await postprocessLine(JSON.stringify(body), { wasm });
  return JSON.parse(line);
}
