// Needle 3's call post-processor from JS and the command line, with no model
// (js/postprocess.js over dist/needle3.wasm; the rules themselves are tested
// one by one in tests/c/test_postprocess.c): the examples docs/engine-rules.md
// of ddrscott/needle-rs states, the input forms, the errors and the other
// variants' refusal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { postprocessCalls, NeedleError, STATUS } from '../../js/index.js';
import { postprocessLine } from '../../js/postprocess.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const ENGINE = { wasm: 'needle3' };

const tool = (name, properties, required = []) => ({ name, description: '', parameters: { type: 'object', properties, required } });
const S = { type: 'string' };
const call = (name, args) => ({ name, arguments: args });
const run = (tools, request, calls, extra = {}) => postprocessCalls({ tools, system: ' ', request, calls: JSON.stringify(calls), ...extra }, ENGINE);

test('the examples of the engine rules', async () => {
  const contact = [tool('add_contact', { first_name: S, last_name: S, phone: S }, ['first_name'])];
  assert.deepEqual(await run(contact, 'add Dr. Jane Smith', [call('add_contact', { first_name: 'Dr. Jane Smith' })]),
    { calls: '[{"name":"add_contact","arguments":{"first_name":"Jane"}}]', withhold: false, strong: false });
  const doors = [tool('lock_door', { door: S }, ['door']), tool('unlock_door', { door: S }, ['door'])];
  assert.equal((await run(doors, 'unlock the front door', [call('lock_door', { door: 'front' })])).calls,
    '[{"name":"unlock_door","arguments":{"door":"front"}}]');
  assert.equal((await run(doors, "don't unlock it, just lock the door", [call('unlock_door', { door: 'door' })])).calls,
    '[{"name":"lock_door","arguments":{"door":"door"}}]');
  // A call whose required room holds a word the request never says is withheld (not a cross-call gate).
  const heat = [tool('heat', { room: S }, ['room'])];
  assert.deepEqual(await run(heat, 'heat the kitchen', [call('heat', { room: 'garage' })]),
    { calls: '[{"name":"heat","arguments":{"room":"garage"}}]', withhold: true, strong: false });
  // Negation, exclusion and reported speech are the strong gates.
  const timer = [tool('set_timer', { minutes: { type: 'number' } }, ['minutes'])];
  assert.deepEqual(await run(timer, "don't set a timer for 20 minutes", [call('set_timer', { minutes: 20 })]),
    { calls: '[{"name":"set_timer","arguments":{"minutes":20.0}}]', withhold: true, strong: true });
  // Dates resolve from an ISO date in the stored system text.
  const event = [tool('event', { date: S })];
  const system = 'Today is 2026-09-25.';
  assert.equal((await postprocessCalls({ tools: event, system, request: 'on friday',
    calls: '[{"name":"event","arguments":{"date":"2026-01-01"}}]' }, ENGINE)).calls,
  '[{"name":"event","arguments":{"date":"2026-10-02"}}]');
});

test('input forms: tools as JSON text, calls as an array, the default conversation', async () => {
  const text = '[{"name":"set_level","parameters":{"type":"object","properties":{"level":{"type":"number","default":5.50}},"required":["level"]}}]';
  const calls = [call('set_level', { level: 7 })];
  // No quantity in the conversation: the required number takes its default, as the default's text.
  assert.equal((await postprocessCalls({ tools: text, request: 'set the level', calls }, ENGINE)).calls,
    '[{"name":"set_level","arguments":{"level":5.50}}]');
  // A conversation that states a quantity keeps the model's value.
  assert.equal((await postprocessCalls({ tools: text, request: 'set the level', conversation: 'it was 7\nset the level', calls },
    ENGINE)).calls, '[{"name":"set_level","arguments":{"level":7.0}}]');
  // Text that is not a non-empty array comes back as it is.
  assert.equal((await postprocessCalls({ tools: [], request: 'x', calls: ' nope ' }, ENGINE)).calls, ' nope ');
});

test('bad input rejects with the member named', async () => {
  const fails = async (input, pattern) => {
    await assert.rejects(postprocessCalls(input, ENGINE), (error) => error instanceof NeedleError
      && error.code === STATUS.ARGUMENT && pattern.test(error.message));
  };
  await fails({ tools: [], calls: '[]' }, /missing member "request"/);
  await fails({ tools: {}, request: 'x', calls: '[]' }, /"tools" must be an array of tools or its JSON text/);
  await fails({ tools: '[1,', request: 'x', calls: '[]' }, /member "tools": json: offset 3: unexpected end of input/);
  await fails({ tools: [], request: 'x', calls: '[]', cals: '' }, /unknown member "cals"/);
  await fails({ tools: [], request: 5, calls: '[]' }, /"request" must be a string/);
  await assert.rejects(postprocessCalls('x', ENGINE), /takes one object/);
});

test('only the Needle 3 variants carry it', async () => {
  await assert.rejects(postprocessLine('{"tools":[],"request":"x","calls":"[]"}', { wasm: 'simd' }),
    (error) => error.code === STATUS.UNSUPPORTED && /dist\/needle3\.wasm/.test(error.message));
});

test('needle-wasm postprocess: a line per request, an error line names its line and the rest go on', () => {
  const lines = [
    JSON.stringify({ tools: [tool('lock_door', { door: S }, ['door']), tool('unlock_door', { door: S }, ['door'])], request: 'unlock it',
      calls: '[{"name":"lock_door","arguments":{"door":"door"}}]' }),
    '',
    '{"tools":[],"request":"x"',
    JSON.stringify({ tools: '[]', request: 'x', calls: '[1]' }),
  ];
  const cli = spawnSync(process.execPath, [`${root}/js/cli.js`, 'postprocess'], { input: `${lines.join('\n')}\n`, encoding: 'utf8', timeout: 60000 });
  const out = cli.stdout.trim().split('\n');
  assert.equal(cli.status, 1, cli.stderr);
  assert.equal(out.length, 3);
  assert.equal(out[0], '{"calls":"[{\\"name\\":\\"unlock_door\\",\\"arguments\\":{\\"door\\":\\"door\\"}}]","withhold":false,"strong":false}');
  const bad = JSON.parse(out[1]);
  assert.equal(bad.line, 3);
  assert.equal(bad.code, STATUS.ARGUMENT);
  assert.match(bad.error, /^line 3: json: offset 25: /);
  assert.equal(out[2], '{"calls":"[1]","withhold":false,"strong":false}');
  const usage = spawnSync(process.execPath, [`${root}/js/cli.js`, 'postprocess', 'file.jsonl'], { encoding: 'utf8', timeout: 30000 });
  assert.equal(usage.status, 2);
  assert.match(usage.stderr, /takes no FILE/);
});
