// A property of the serve request mapping (js/openai-request.js planRequest):
// any JSON body, however hostile, gives either a plan that the later steps
// can write as JSON (the agent's config and every turn's value), or a
// NeedleError that serve answers with a 4xx, never another exception (a
// TypeError, a RangeError: a 500). The bodies are valid requests mutated at
// random, and random JSON, from a seeded generator: a failure names its seed
// and case, and reruns the same. Needs no dist/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planRequest } from '../../js/openai-request.js';
import { errorResponse } from '../../js/openai-server.js';
import { NeedleError } from '../../js/errors.js';

const SEED = 46;
const CASES = 4000;

/** mulberry32: a small seeded generator of floats in [0, 1). */
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = ['model', 'messages', 'tools', 'tool_choice', 'response_format', 'temperature', 'top_p', 'seed', 'max_tokens',
  'max_completion_tokens', 'n', 'stream', 'stream_options', 'include_usage', 'role', 'content', 'tool_calls', 'tool_call_id',
  'id', 'type', 'function', 'name', 'description', 'arguments', 'parameters', 'json_schema', 'schema', 'strict', 'properties',
  'required', 'text', '__proto__', 'constructor', 'toString', ''];
const LEAVES = [null, true, false, 0, -1, 1, 2, 1.5, 1e308, -1e-308, 2 ** 53 + 2, 4294967296, '', 'x', 'function', 'user',
  'assistant', 'tool', 'system', 'developer', 'auto', 'none', 'required', 'text', 'json_schema', 'json_object', 'object',
  'string', 'call_1', '{}', '{"a":1}', '[]', 'null', '"s"', '__proto__', '\u0000', '\ud800', '{"a":'];

/** A random JSON value (as JSON.parse would give it: own __proto__ keys included). */
function randomValue(r, depth = 0) {
  const k = r();
  if (depth > 5 || k < 0.55) return LEAVES[Math.floor(r() * LEAVES.length)];
  const size = Math.floor(r() * 4);
  if (k < 0.78) return Array.from({ length: size }, () => randomValue(r, depth + 1));
  return Object.fromEntries(Array.from({ length: size }, () => [KEYS[Math.floor(r() * KEYS.length)], randomValue(r, depth + 1)]));
}

const DEEP = '\u0001deep'; // stands for arrays and objects nested deep, put into the body's JSON text

/** JSON text of arrays and objects nested 200 to 5,000 deep. */
function deepText(r) {
  const n = 200 + Math.floor(r() * 4800);
  return r() < 0.5 ? `${'['.repeat(n)}${']'.repeat(n)}` : `${'{"a":'.repeat(n)}{}${'}'.repeat(n)}`;
}

const TOOL = { type: 'function', function: { name: 'set_timer', description: 'Set a timer.', parameters: { type: 'object', properties: { minutes: { type: 'integer' } }, required: ['minutes'] } } };
const CALL = { id: 'call_1', type: 'function', function: { name: 'set_timer', arguments: '{"minutes":10}' } };
const VALID = [
  { model: 'demo', messages: [{ role: 'user', content: 'set a timer for 10 minutes' }], tools: [TOOL] },
  { model: 'demo', messages: [{ role: 'system', content: 'date: today' }, { role: 'user', content: [{ type: 'text', text: 'timer' }] },
    { role: 'assistant', content: null, tool_calls: [CALL] }, { role: 'tool', tool_call_id: 'call_1', content: '{"ok":true}' }],
  tools: [TOOL], tool_choice: 'auto', temperature: 0.5, top_p: 0.9, seed: 7, max_tokens: 64, stream: true, stream_options: { include_usage: true } },
  { model: 'demo', messages: [{ role: 'user', content: 'Anna, 31' }],
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: { type: 'object', properties: { name: { type: 'string' } } } } } },
];

/** Every [holder, key] of a value's containers, to pick one to mutate. */
function slots(value, out = []) {
  if (value && typeof value === 'object') {
    for (const key of Object.keys(value)) {
      out.push([value, key]);
      slots(value[key], out);
    }
  }
  return out;
}

/** A valid request with one to three random changes: a value replaced, a key
 *  dropped, deep nesting put in (as a value, or as JSON text in a string). */
function mutated(r) {
  const body = structuredClone(VALID[Math.floor(r() * VALID.length)]);
  for (let n = 1 + Math.floor(r() * 3); n > 0; n--) {
    const all = slots(body);
    const [holder, key] = all[Math.floor(r() * all.length)];
    const k = r();
    if (k < 0.15) delete holder[key];
    else if (k < 0.2) holder[key] = DEEP;
    else if (k < 0.25) holder[key] = deepText(r);
    else if (k < 0.3) holder[key] = Array.from({ length: 257 }, () => ({ role: 'user', content: 'hi' }));
    else holder[key] = randomValue(r);
  }
  return body;
}

/** A body's JSON text: mutated, or random. */
function bodyText(r) {
  const text = JSON.stringify(r() < 0.8 ? mutated(r) : randomValue(r));
  return text.replaceAll(JSON.stringify(DEEP), () => deepText(r));
}

test(`planRequest: ${CASES} hostile JSON bodies give a plan or a NeedleError serve answers with a 4xx`, () => {
  for (const body of VALID) assert.ok(planRequest(structuredClone(body)).turns, 'the valid requests plan');
  const r = generator(SEED);
  const outcomes = { plan: 0 };
  for (let i = 0; i < CASES; i++) {
    const text = bodyText(r);
    const where = `seed ${SEED}, case ${i}: ${text.slice(0, 300)}`;
    let plan;
    try {
      plan = planRequest(JSON.parse(text)); // as serve reads a body
    } catch (error) {
      assert.ok(error instanceof NeedleError, `${where}\n${error?.stack}`);
      const { status, body: answer } = errorResponse(error);
      assert.ok(status >= 400 && status < 500, `${where}: ${status} ${error.message}`);
      assert.equal(typeof answer.error.message, 'string');
      outcomes[answer.error.param ?? 'none'] = (outcomes[answer.error.param ?? 'none'] ?? 0) + 1;
      continue;
    }
    outcomes.plan++;
    // What openai.js writes of a plan: the agent's config, and each turn's input value and calls.
    assert.equal(typeof JSON.stringify(plan.agent), 'string', where);
    for (const { input, reply } of [...plan.turns, { input: plan.final, reply: { calls: [] } }]) {
      assert.equal(typeof JSON.stringify([input.kind, input.value, reply.calls]), 'string', where);
    }
  }
  const top = Object.entries(outcomes).sort((a, b) => b[1] - a[1]).slice(0, 8);
  console.log(`outcomes of ${CASES} bodies (plan, or the param refused): ${top.map(([k, n]) => `${k} ${n}`).join(', ')}`);
  assert.ok(outcomes.plan > CASES / 50, `some mutated bodies still plan (${outcomes.plan})`);
});
