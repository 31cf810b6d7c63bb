// Short libFuzzer runs of every parser (built by ./build.sh fuzz with ASan +
// UBSan): the archive loader, the tokenizer, the schema grammar, the agent
// API (tools, texts and options over a small model), and Needle 3's call
// post-processor (hostile calls, requests and tools). Each run
// starts from seeds made here and must end without a crash. Longer runs:
//   build/fuzz_archive -max_total_time=600 build/fuzz-corpus/archive
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { writeCact, makeTestTokenizerBlob, syntheticPieces } from '../../js/cact-writer.js';
import { writeCact3 } from '../../js/cact3-writer.js';
import { TINY3_GEOMETRY } from '../../js/cact3-format.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const SECONDS = 15;
const tokenizer = makeTestTokenizerBlob(syntheticPieces(300));
const tools = '[{"name":"set_light","parameters":{"type":"object","properties":{"room":{"type":"string","maxLength":8},"level":{"type":"integer","minimum":0,"maximum":100},"tags":{"type":"array","items":{"enum":["a","b"]},"uniqueItems":true}},"required":["room"]}}]';
const call = '[{"name":"set_light","arguments":{"room":"hall","level":42}}]';
const join = (...parts) => Buffer.concat(parts.map((p) => Buffer.from(p)));

/** The inputs of past grammar bugs: a long minLength, $ref cycles, required
 *  recursion, overlapping oneOf branches, wide number bounds, NUL in keys,
 *  non-object parameters, deep arrays near 2^53. */
function grammarBugs() {
  const tool = (parameters) => JSON.stringify([{ name: 't', parameters }]);
  const object = (properties, required = Object.keys(properties)) => tool({ type: 'object', properties, required });
  const cases = [
    [object({ a: { type: 'string', minLength: 10000 } }), '[{"name":"t","arguments":{"a":"xy'],
    [tool({ $ref: '#' }), '[{'],
    [tool({ $ref: '#/$defs/A', $defs: { A: { $ref: '#/$defs/B' }, B: { $ref: '#/$defs/A' } } }), '['],
    [tool({ type: 'object', $defs: { n: { type: 'object', properties: { next: { $ref: '#/$defs/n' } }, required: ['next'] } },
      properties: { head: { $ref: '#/$defs/n' } }, required: ['head'] }), '[{'],
    [object({ k: { oneOf: [{ type: 'integer' }, { type: 'number' }] } }), '[{'],
    [object({ k: { oneOf: [{ type: 'object', properties: { t: { const: 'a' } }, required: ['t'] },
      { type: 'object', properties: { t: { const: 'b' } }, required: ['t'] }] } }), '[{"name":"t","arguments":{"k":{"t":"b"}}}]'],
    [object({ a: { type: 'number', minimum: 1e12, maximum: 1e13 }, b: { type: 'number', minimum: 1e-7, maximum: 2e-7 },
      d: { type: 'integer', minimum: 1e18, maximum: 1e19 }, f: { type: 'number', multipleOf: 0.1 } }),
    '[{"name":"t","arguments":{"d":10000000000000000000,"f":0.3'],
    [object({ 'a\u0000b': { type: 'string' }, 'a\u0000c': { type: 'integer' } }, ['a\u0000b']), '[{'],
    [tool({ type: 'string' }), '['],
    [object({ v: { type: 'array', items: { type: 'array', items: { type: 'integer', exclusiveMaximum: 9007199254740993 } } } }),
      '[{"name":"t","arguments":{"v":[[9007199254740992'],
  ];
  return cases.map(([tools, bytes]) => join(tools, [0], bytes));
}

const SEEDS = {
  archive: [writeCact({ geometry: { hidden: 32, queryHeads: 2, kvHeads: 1, headDimension: 16, layers: 1, lanes: 2,
    engramSlots: 16, engramSubDimension: 8, engramTables: 2, orders: [2], sites: [0], maximumSequence: 64, kvWindow: 16 },
  seed: 1, bits: 2, group: 32, heads: true, tokenizer }),
  // Needle 3: the convolution, two heads (one of them the router), two sites.
  writeCact3({ geometry: { ...TINY3_GEOMETRY, layers: 2, globalLayers: [1], sites: [0, 1], engramSlots: 16 },
    seed: 1, bits: 2, group: 32, tokenizer,
    heads: [{ kind: 'confidence', probes: 2, queries: 1 }, { kind: 'router', probes: 1, queries: 1 }] })],
  tokenizer: [join(tokenizer, [0], 'hello world {"a":1} <tool_call> \u00e9\u{1F600}')],
  grammar: [join(tools, [0], call), join(tools, [0], '[]'), ...grammarBugs()],
  agent: [join(tools.slice(1, -1), [0x1e], '{"name":"n","parameters":{"type":"object","properties":{"a":{"type":"string","minLength":10000}},"required":["a"]}}',
    [0], 'turn on the hall light', [0], '{"ok":true}', [0], [1, 64, 5, 200, 3, 0, 7, 80]),
  join('{"name":"x","parameters":{"$ref":"#"}}', [0x1e], '{"name":"y","parameters":{"type":"object","properties":{"k":{"oneOf":[{"type":"integer"},{"type":"number"}]}}}}',
    [0], 'x', [0], '[1,2]', [0], [2, 0, 0, 255, 0, 0, 1, 12])],
  // Needle 3's call post-processor: tools \0 system \0 request \0 conversation \0 calls, and a request object.
  postprocess: [join(tools, [0], 'Today is 2026-09-25.', [0], "don't turn the hall light up, except the kitchen on friday", [0], '', [0], call),
    join('[{"name":"add_contact","parameters":{"type":"object","properties":{"first_name":{"type":"string"},"phone":{"type":"string"}},"required":["first_name"]}}]',
      [0], ' ', [0], 'add Dr. Jane Smith, +1 (415) 555-1234 "Weekly Sync" 20 \u00b0C', [0], ' ', [0],
      '[{"name":"add_contact","arguments":{"first_name":"Dr. Jane Smith","phone":"555-1234"}},{"name":"add_contact","arguments":{}}]'),
    JSON.stringify({ tools, system: ' ', request: 'set the hall light to 42', calls: call })],
};
// fuzz_agent drives the agent over this model (small, every feature).
const agentArchive = `${root}/build/fuzz-agent.cact`;
mkdirSync(`${root}/build`, { recursive: true });
writeFileSync(agentArchive, SEEDS.archive[0]);

for (const [name, seeds] of Object.entries(SEEDS)) {
  test(`fuzz_${name} runs ${SECONDS} s without a crash`, () => {
    const corpus = `${root}/build/fuzz-corpus/${name}`;
    mkdirSync(corpus, { recursive: true });
    seeds.forEach((bytes, i) => writeFileSync(`${corpus}/seed-${i}`, bytes));
    const run = spawnSync(`${root}/build/fuzz_${name}`, [`-max_total_time=${SECONDS}`, '-rss_limit_mb=2048', corpus],
      { cwd: root, encoding: 'utf8', env: { ...process.env, NEEDLE_FUZZ_ARCHIVE: agentArchive } });
    assert.equal(run.status, 0, run.stderr.slice(-4000));
    assert.match(run.stderr, /Done \d+ runs/);
  });
}
