// One error model: every failure the public API reports is a NeedleError
// with a documented code, the same in this thread and in a worker; a stopped
// signal is an AbortError (STATUS.ABORTED) wherever it lands; a misspelt
// option names itself and its nearest known neighbour.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { loadModel, Needle, NeedleError, STATUS } from '../../js/index.js';

const TOOLS = JSON.parse(readFileSync(new URL('../../dist/demo-tools.json', import.meta.url), 'utf8'));
const aborted = () => AbortSignal.abort();

const isAbort = (error) => {
  assert.ok(error instanceof NeedleError, `${error?.constructor?.name} ${error?.name}: ${error?.message}`);
  assert.equal(error.name, 'AbortError');
  assert.equal(error.code, STATUS.ABORTED);
  return true;
};
const isArgument = (pattern) => (error) => {
  assert.ok(error instanceof NeedleError, `${error?.constructor?.name}: ${error?.message}`);
  assert.equal(error.code, STATUS.ARGUMENT);
  assert.match(error.message, pattern);
  return true;
};

async function drain(iterable) {
  for await (const _ of iterable); // eslint-disable-line no-unused-vars
}

for (const worker of [false, true]) {
  const where = worker ? 'in a worker' : 'in this thread';

  test(`aborts are AbortErrors everywhere, ${where}`, async () => {
    await assert.rejects(loadModel(undefined, { worker, signal: aborted() }), isAbort);
    const model = await loadModel(undefined, { worker, threads: 1 });
    try {
      await assert.rejects(drain(model.generate('hi', { signal: aborted() })), isAbort);
      const controller = new AbortController();
      let pieces = 0;
      await assert.rejects(drain((async function* () {
        for await (const piece of model.generate('hi', { maxTokens: 64, signal: controller.signal })) {
          if (++pieces === 2) controller.abort();
          yield piece;
        }
      })()), isAbort);
      const agent = await Needle.create({ model, tools: TOOLS.slice(0, 3) });
      await assert.rejects(agent.complete('set a timer for 5 minutes', { signal: aborted() }), isAbort);
      await assert.rejects(agent.extract('Anna', { type: 'object', properties: { name: { type: 'string' } } },
        { signal: aborted() }), isAbort);
      const done = await agent.complete('set a timer for 5 minutes', { maxNewTokens: 64 });
      assert.equal(done.success, true, 'an aborted turn leaves the agent usable');
      await agent.free();
    } finally {
      await model.free();
    }
  });

  test(`bad and misspelt options name the option and what it may be, ${where}`, async () => {
    await assert.rejects(loadModel(undefined, { worker, threads: 0 }), isArgument(/option threads is 0: must be 'auto' or an integer/));
    await assert.rejects(loadModel(undefined, { worker, wasm: 'bogus' }), isArgument(/unknown engine variant "bogus".*'simd'/));
    await assert.rejects(loadModel(undefined, { worker, onprogress: () => {} }), isArgument(/unknown option onprogress of loadModel\(\): did you mean onProgress\?/));
    const model = await loadModel(undefined, { worker, threads: 1 });
    try {
      await assert.rejects(drain(model.generate('hi', { temprature: 1 })), isArgument(/unknown option temprature of generate\(\): did you mean temperature\?/));
      await assert.rejects(Needle.create({ model, tools: TOOLS, topk: 3 }), isArgument(/unknown option topk of Needle.create\(\): did you mean topK\?/));
      const agent = await Needle.create({ model, tools: TOOLS.slice(0, 2) });
      await assert.rejects(agent.complete('hi', { maxTokens: 3 }), isArgument(/unknown option maxTokens of complete\(\).*maxNewTokens/));
      await assert.rejects(agent.complete('hi', { kind: 'question' }), isArgument(/option kind is "question"/));
      await agent.free();
    } finally {
      await model.free();
    }
  });
}

test('a Node worker model does not keep the process alive once its work is done', () => {
  const script = `
    import { loadModel } from ${JSON.stringify(new URL('../../js/index.js', import.meta.url).href)};
    const model = await loadModel(undefined, { worker: true, threads: 1 });
    let n = 0;
    for await (const _ of model.generate('hi', { maxTokens: 3 })) n++;
    console.log('tokens', n);`;
  const file = join(mkdtempSync(join(tmpdir(), 'needle-')), 'worker-exits.mjs');
  writeFileSync(file, script);
  const run = spawnSync(process.execPath, [file], { encoding: 'utf8', timeout: 60000 });
  assert.equal(run.status, 0, run.stderr || 'the process did not exit within 60 s');
  assert.match(run.stdout, /tokens [1-3]/, 'the work finished before the process exited');
});
