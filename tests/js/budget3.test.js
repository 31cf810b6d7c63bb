// Needle 3 spends the token budget as the makers' engine does
// (needle3-engine.md section 2): nothing is forced; a list the budget ends
// keeps the calls whose arguments closed, and with none the turn fails with
// error_code "truncated". Swept over budgets of one greedy turn, each envelope
// is checked against the calls the model wrote (the stream), cut here to the
// calls that closed and put through the post-processor.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeTestTokenizerBlob, syntheticPieces, CHAT_MARKERS3 } from '../../js/cact-writer.js';
import { TINY3_GEOMETRY } from '../../js/cact3-format.js';
import { Needle } from '../../js/agent.js';
import { postprocessCalls } from '../../js/postprocess.js';
import { shortReasoningModel } from './short-reasoning.js';

const tokenizer = makeTestTokenizerBlob(syntheticPieces(400, CHAT_MARKERS3));
const TOOLS = [{ name: 'add_item', description: 'Add an item to a list',
  parameters: { type: 'object', properties: { item: { enum: ['milk', 'eggs', 'tea', 'rice'] } }, required: ['item'] } }];
const QUERY = 'add milk, eggs and tea';

/** The call list's text up to its last closed call, closed with "]"; null when none closed. */
function closedCalls(text) {
  let depth = 0, inString = false, escaped = false, keep = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') depth++;
    else if ((c === ']' || c === '}') && --depth === 1) keep = i + 1;
  }
  return keep ? `${text.slice(0, keep)}]` : null;
}

test('Needle 3: a budget that ends the list keeps the calls that closed, or reports "truncated"', async () => {
  const model = await shortReasoningModel({ geometry: TINY3_GEOMETRY, seed: 21, bits: 2, group: 32, tokenizer }, TOOLS, QUERY);
  const seen = { truncated: 0, cut: 0, whole: 0 };
  for (let budget = 40; budget <= 300; budget += 3) {
    const agent = await Needle.create({ model, tools: TOOLS, requireCall: true });
    let written = '';
    const envelope = await agent.complete(QUERY, { maxNewTokens: budget, onToken: ({ kind, text }) => { if (kind === 'call') written += text; } });
    agent.free();
    written = written.slice(written.indexOf('['));
    const kept = closedCalls(written);
    if (!kept) {
      assert.equal(envelope.success, false, `budget ${budget}: no call closed in ${written}`);
      assert.equal(envelope.error_code, 'truncated');
      assert.equal(envelope.error, 'tool call truncated: token budget exhausted');
      assert.deepEqual(envelope.function_calls, []);
      seen.truncated++;
      continue;
    }
    assert.equal(envelope.success, true, `budget ${budget}: ${envelope.error}`);
    const want = await postprocessCalls({ tools: TOOLS, system: '', request: QUERY, conversation: `\n${QUERY}`, calls: kept });
    assert.deepEqual([...envelope.function_calls, ...envelope.suppressed_calls], JSON.parse(want.calls), `budget ${budget}: wrote ${written}`);
    seen[kept === written ? 'whole' : 'cut']++;
  }
  model.free();
  assert.ok(seen.truncated && seen.cut && seen.whole, `budgets seen: ${JSON.stringify(seen)}`);
});
