// The cycle ban (src/agent/agent.c, the makers' rule): inside a call no cycle
// of one to four tokens starts a seventh repeat. Random-weight models decoded
// greedily fall into such loops; the test first shows that these archives do
// (free generation from the same prompt repeats a short cycle), then that no
// call of theirs does, whatever the schema leaves open.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { writeCact, TINY_GEOMETRY } from '../../js/cact-writer.js';
import { tokenizerBlobFromModel } from '../../js/sentencepiece-model.js';
import { Model } from '../../js/model.js';
import { Needle } from '../../js/agent.js';

const tokenizer = tokenizerBlobFromModel(readFileSync(new URL('../fixtures/tokenizer/needle-test-bpe.model', import.meta.url)));
const NOTE = {
  name: 'take_note', description: 'Write a note.',
  parameters: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } },
};
const QUERY = 'note that the the the the the the the the the the';

/** The longest run of repeats of a cycle of 1-4 items ending anywhere in xs. */
function longestRepeat(xs) {
  let best = 1;
  for (let p = 1; p <= 4; p++) {
    let run = 0; // items so far that equal the one p before them
    for (let i = p; i < xs.length; i++) {
      run = xs[i] === xs[i - p] ? run + 1 : 0;
      best = Math.max(best, Math.floor(run / p) + 1);
    }
  }
  return best;
}

test('longestRepeat counts the repeats of a cycle', () => {
  assert.equal(longestRepeat([1, 2, 3]), 1);
  assert.equal(longestRepeat([5, 5, 5, 5, 5, 5, 5]), 7);
  assert.equal(longestRepeat([0, 1, 2, 1, 2, 1, 2, 9]), 3);
  assert.equal(longestRepeat(['}', '}', ']', '}', '}', ']']), 2);
});

test('greedy calls never start a seventh repeat of a short cycle, where free text loops', async () => {
  let looping = 0;
  for (const seed of [3, 5, 8, 13, 21, 34]) {
    const model = await Model.fromBytes(writeCact({ geometry: TINY_GEOMETRY, seed, bits: 2, group: 32, heads: true, tokenizer }));
    const free = [];
    for await (const { token } of model.generate(QUERY, { maxTokens: 120, temperature: 0 })) free.push(token);
    if (longestRepeat(free) >= 7) looping++;
    const agent = await Needle.create({ model, tools: [NOTE], temperature: 0 });
    const pieces = [];
    const envelope = await agent.complete(QUERY, { maxNewTokens: 200, kind: 'query', onToken: ({ kind, text }) => kind === 'call' && pieces.push(text) });
    assert.equal(envelope.success, true, envelope.error);
    assert.ok(longestRepeat(pieces) <= 6, `seed ${seed}: a cycle repeats ${longestRepeat(pieces)} times in ${JSON.stringify(pieces.join(''))}`);
    agent.free();
    model.free();
  }
  assert.ok(looping >= 3, `only ${looping} of 6 archives loop in free text: the test would not show the ban`);
});
