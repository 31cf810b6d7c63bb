// Short libFuzzer runs of every parser (built by ./build.sh fuzz with ASan +
// UBSan): the archive loader, the tokenizer and the schema grammar. Each run
// starts from seeds made here and must end without a crash. Longer runs:
//   build/fuzz_archive -max_total_time=600 build/fuzz-corpus/archive
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { writeCact, makeTestTokenizerBlob, syntheticPieces } from '../../js/cact-writer.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const SECONDS = 15;
const tokenizer = makeTestTokenizerBlob(syntheticPieces(300));
const tools = '[{"name":"set_light","parameters":{"type":"object","properties":{"room":{"type":"string","maxLength":8},"level":{"type":"integer","minimum":0,"maximum":100},"tags":{"type":"array","items":{"enum":["a","b"]},"uniqueItems":true}},"required":["room"]}}]';
const call = '[{"name":"set_light","arguments":{"room":"hall","level":42}}]';
const join = (...parts) => Buffer.concat(parts.map((p) => Buffer.from(p)));

const SEEDS = {
  archive: [writeCact({ geometry: { hidden: 32, queryHeads: 2, kvHeads: 1, headDimension: 16, layers: 1, lanes: 2,
    engramSlots: 16, engramSubDimension: 8, engramTables: 2, orders: [2], sites: [0], maximumSequence: 64, kvWindow: 16 },
  seed: 1, bits: 2, group: 32, heads: true, tokenizer })],
  tokenizer: [join(tokenizer, [0], 'hello world {"a":1} <tool_call> \u00e9\u{1F600}')],
  grammar: [join(tools, [0], call), join(tools, [0], '[]')],
};

for (const [name, seeds] of Object.entries(SEEDS)) {
  test(`fuzz_${name} runs ${SECONDS} s without a crash`, () => {
    const corpus = `${root}/build/fuzz-corpus/${name}`;
    mkdirSync(corpus, { recursive: true });
    seeds.forEach((bytes, i) => writeFileSync(`${corpus}/seed-${i}`, bytes));
    const run = spawnSync(`${root}/build/fuzz_${name}`, [`-max_total_time=${SECONDS}`, '-rss_limit_mb=2048', corpus],
      { cwd: root, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr.slice(-4000));
    assert.match(run.stderr, /Done \d+ runs/);
  });
}
