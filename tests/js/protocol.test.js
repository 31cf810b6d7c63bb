// Tests the worker protocol end to end over Node worker_threads (the same
// client and worker code a page uses): loading with progress, calls, tokens
// streamed as produced, stopping within a token, errors re-thrown with their
// name, code and worker stack, and several models at once. Needs
// dist/needle.wasm (./build.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModel, NeedleError, STATUS } from '../../js/index.js';
import { WorkerModel } from '../../js/client.js';
import { serializeError, deserializeError, encodeSource, decodeSource, transferables } from '../../js/protocol.js';
import { writeRandomArchive } from '../../js/cact-writer.js';

const dir = mkdtempSync(join(tmpdir(), 'needle-protocol-'));
const path = join(dir, 'tiny.cact');
let local;
const PROMPT = 'turn on the lights';
const GREEDY = { maxTokens: 12, temperature: 0 };

before(async () => {
  await writeRandomArchive(path, { tiny: true });
  local = await loadModel(path, { worker: false });
});
after(() => { local.free(); rmSync(dir, { recursive: true, force: true }); });

async function collect(iterator) {
  const out = [];
  for await (const piece of iterator) out.push(piece);
  return out;
}

test('errors cross as {name, message, code, stack} and come back as NeedleErrors', () => {
  const original = new NeedleError('bad header', STATUS.FORMAT);
  const record = serializeError(original);
  assert.deepEqual(Object.keys(record).sort(), ['code', 'message', 'name', 'stack', 'status']);
  const back = deserializeError(structuredClone(record));
  assert.ok(back instanceof NeedleError);
  assert.equal(back.code, STATUS.FORMAT);
  assert.equal(back.message, 'bad header');
  assert.match(back.stack, /bad header[\s\S]*needle worker/);
  assert.equal(serializeError('plain').message, 'plain');
  const rows = [new Float32Array(3), new Float32Array(2)];
  assert.deepEqual(transferables(rows), rows.map((r) => r.buffer));
});

test('sources encode to postable values and decode to what the loader takes', () => {
  const bytes = new Uint8Array(8);
  assert.deepEqual(encodeSource('a/b.cact').wire, { kind: 'path', value: 'a/b.cact' });
  assert.equal(encodeSource('b.cact', { base: 'http://x.test/app/' }).wire.value, 'http://x.test/app/b.cact');
  assert.equal(encodeSource(new Request('http://x.test/m.cact')).wire.kind, 'url');
  assert.throws(() => encodeSource(new Request('http://x.test/m', { method: 'POST' })), (e) => e.code === 'SOURCE');
  const copied = encodeSource(bytes);
  assert.equal(copied.transfer.length, 0);
  const moved = encodeSource(bytes, { transfer: true });
  assert.deepEqual(moved.transfer, [bytes.buffer]);
  const response = encodeSource(new Response(bytes, { headers: { 'content-length': '8' } }));
  assert.equal(response.wire.total, 8);
  const [decoded] = decodeSource(response.wire);
  assert.equal(decoded.headers.get('content-length'), '8');
  assert.throws(() => encodeSource(Symbol('x')), (e) => e.code === 'SOURCE');
});

test('a worker model loads with progress and answers like the in-thread model', async () => {
  const events = [];
  const model = await loadModel(path, { worker: true, onProgress: (p) => events.push(p) });
  try {
    assert.ok(model instanceof WorkerModel);
    assert.equal(events.at(-1).loaded, readFileSync(path).length);
    assert.equal(model.source.size, events.at(-1).loaded);
    assert.deepEqual(await model.tokenize(PROMPT), local.tokenize(PROMPT));
    assert.deepEqual(await model.inspect(), local.inspect());
    const ids = local.tokenize(PROMPT);
    assert.equal(await model.detokenize(ids), local.detokenize(ids));
    const [row] = await model.logits([local.ids.bos, ...ids]);
    assert.ok(row instanceof Float32Array);
    assert.deepEqual(row, local.logits([local.ids.bos, ...ids])[0]);
    const remote = await collect(model.generate(PROMPT, GREEDY));
    assert.deepEqual(remote, await collect(local.generate(PROMPT, GREEDY)));
    assert.ok(model.peakMemoryBytes > 0);
    assert.deepEqual(model.threads, local.threads, 'the worker plans threads as this thread does');
  } finally {
    await model.free();
  }
  await assert.rejects(model.tokenize('x'), (e) => /freed/.test(e.message));
});

test('an abort stops generation within a token and the worker stays usable', async () => {
  const model = await loadModel(path, { worker: true });
  try {
    const controller = new AbortController();
    let seen = 0;
    await assert.rejects(async () => {
      for await (const piece of model.generate(PROMPT, { maxTokens: 200, temperature: 1, seed: 3, signal: controller.signal })) {
        assert.equal(typeof piece.text, 'string');
        if (++seen === 3) controller.abort();
      }
    }, (e) => e.name === 'AbortError' && e.code === STATUS.ABORTED);
    assert.equal(seen, 3, 'no token may arrive after the abort');
    // Breaking out of the loop also stops the worker, which then serves the next call.
    for await (const piece of model.generate(PROMPT, { maxTokens: 200, temperature: 1 })) { void piece; break; }
    assert.deepEqual(await model.tokenize(PROMPT), local.tokenize(PROMPT));
  } finally {
    await model.free();
  }
});

test('worker errors reject with the engine code and the worker stack', async () => {
  const corrupt = new Uint8Array(readFileSync(path));
  corrupt[0] ^= 0xff;
  await assert.rejects(loadModel(new Blob([corrupt]), { worker: true }),
    (e) => e instanceof NeedleError && e.code === STATUS.FORMAT && /tag/.test(e.message) && /needle worker/.test(e.stack));
  await assert.rejects(loadModel(join(dir, 'absent.cact'), { worker: true }), (e) => e.code === 'READ');
  const model = await loadModel(readFileSync(path), { worker: true, transfer: true, threads: 1 });
  try {
    assert.deepEqual(model.threads, { count: 1, reason: 'one thread was requested' });
    await assert.rejects(model.logits([1e9]), (e) => e instanceof NeedleError && typeof e.code === 'number');
  } finally {
    await model.free();
  }
});

test('several worker models run side by side', async () => {
  const stream = new ReadableStream({ start(c) { c.enqueue(new Uint8Array(readFileSync(path))); c.close(); } });
  const models = await Promise.all([
    loadModel(path, { worker: true }),
    loadModel(stream, { worker: true }),
    loadModel(new Response(readFileSync(path)), { worker: true }),
  ]);
  try {
    const answers = await Promise.all(models.map((m) => m.tokenize(PROMPT)));
    for (const ids of answers) assert.deepEqual(ids, local.tokenize(PROMPT));
    const texts = await Promise.all(models.map((m) => collect(m.generate(PROMPT, GREEDY))));
    assert.deepEqual(texts[1], texts[0]);
    assert.deepEqual(texts[2], texts[0]);
  } finally {
    await Promise.all(models.map((m) => m.free()));
  }
});
