// Long requests and long conversations cannot stall the engine (issue 46):
// a turn's text is counted and refused before any model work; the query's
// embedding for retrieval, the re-feed after new tools and the prefill all run
// in steps of 8 tokens, so an abort lands within one step; and the
// conversation a re-feed needs is kept to what the window attends, so a turn
// long into a conversation costs what an early one costs. On the demo model
// (window 512, a contrastive head, so 18 tools means retrieval). Needs dist/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { loadModel, Needle } from '../../js/index.js';

const TOOLS = JSON.parse(readFileSync(new URL('../../dist/demo-tools.json', import.meta.url), 'utf8'));
const STEP = 8; // PREFILL_STEP, src/agent/agent.c
let model;
let steps = 0; // needle_agent_step calls
let onStep = null;

before(async () => {
  model = await loadModel(undefined, { worker: false });
  const exports = model.engine.x;
  // The agent reads engine.x on every step: count them, and act inside one.
  model.engine.x = { ...exports, needle_agent_step: (...args) => { steps++; onStep?.(); return exports.needle_agent_step(...args); } };
});
after(() => model.free());

test('a query over the turn limit is refused before any step', async () => {
  const agent = await Needle.create({ model, tools: TOOLS });
  const before = steps;
  const envelope = await agent.complete('turn on the kitchen light '.repeat(1200), { kind: 'query' });
  assert.equal(envelope.success, false);
  assert.match(envelope.error, /query is \d+ tokens, over the limit of 4096/);
  assert.equal(steps, before, 'no engine step ran');
  agent.free();
});

test("the query's embedding runs in steps, and an abort inside it stops the turn at once", async () => {
  const agent = await Needle.create({ model, tools: TOOLS });
  const query = 'please turn on the lights in the kitchen and the hallway '.repeat(40);
  const tokens = model.tokenize(query).length;
  let count = steps;
  await agent.complete(query, { kind: 'query', maxNewTokens: 16 });
  // Embedding and prefill each take a step per 8 tokens.
  assert.ok(steps - count >= (2 * tokens) / STEP, `${steps - count} steps for ${tokens} query tokens`);
  agent.reset();
  const controller = new AbortController();
  count = steps;
  onStep = () => { if (steps === count + 3) controller.abort(); };
  await assert.rejects(agent.complete(query, { kind: 'query', signal: controller.signal }), { name: 'AbortError' });
  onStep = null;
  assert.ok(steps - count <= 4, `${steps - count} steps ran`);
  // The conversation is as before the aborted turn: the same query gives what a fresh agent gives.
  const again = await agent.complete('turn on the kitchen light', { kind: 'query' });
  const fresh = await Needle.create({ model, tools: TOOLS });
  assert.deepEqual(again.function_calls, (await fresh.complete('turn on the kitchen light', { kind: 'query' })).function_calls);
  agent.free();
  fresh.free();
});

test('a rotating conversation: what a turn feeds stops growing once the window is full', async () => {
  const queries = ['turn on the kitchen light', 'set a timer for 5 minutes', "what's the weather in Oslo",
    'play some jazz', 'lock the front door', 'translate hello into French', 'call mom', 'add milk to my shopping list'];
  const agent = await Needle.create({ model, tools: TOOLS });
  const fed = []; // tokens each turn fed: re-feed after new tools, then its own text
  let total = 0;
  for (let turn = 0; turn < 96; turn++) {
    const envelope = await agent.complete(queries[turn % queries.length], { kind: 'query', maxNewTokens: 96 });
    assert.equal(envelope.success, true, envelope.error);
    fed.push(agent.prefillCount);
    total += agent.prefillCount;
  }
  const early = Math.max(...fed.slice(16, 32));
  const late = Math.max(...fed.slice(80));
  console.log(`tokens fed per turn: ${fed.slice(0, 8).join(' ')} ... most in turns 16-31 ${early}, in 80-95 ${late}; ${total} in all`);
  assert.ok(total > 8 * 512, 'the conversation outgrew the window many times over');
  assert.ok(late <= early * 1.1, `turns 80-95 fed up to ${late} tokens, turns 16-31 up to ${early}`);
  agent.free();
});
