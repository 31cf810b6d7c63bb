// The command line's usage errors (js/cli.js): a misspelt option or command
// is named with the nearest known one (the suggestion of options.js that the
// API's errors use), exit code 2, the usage after it and no stack trace; a
// string option without its value is a usage error too. None of these loads
// a model, so none needs dist/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../js/cli.js', import.meta.url));

/** Runs the CLI; asserts it failed as a usage error and returns its first stderr line. */
function usageError(...args) {
  const run = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30000 });
  assert.equal(run.status, 2, `${args.join(' ')}: ${run.stderr}`);
  assert.equal(run.stdout, '');
  assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
  assert.match(run.stderr, /\nusage: needle-wasm <command>/);
  return run.stderr.split('\n')[0];
}

test('a misspelt option is named with the nearest known option', () => {
  assert.equal(usageError('complete', '--qurey', 'hi'), 'needle-wasm: unknown option --qurey: did you mean --query?');
  assert.equal(usageError('generate', '--prompt', 'hi', '--max-token', '5'), 'needle-wasm: unknown option --max-token: did you mean --max-tokens?');
  assert.equal(usageError('serve', '--Port', '80'), 'needle-wasm: unknown option --Port: did you mean --port?');
  // Nothing within two edits: no guess.
  assert.equal(usageError('inspect', '--verbose'), 'needle-wasm: unknown option --verbose');
  assert.equal(usageError('inspect', '-x'), 'needle-wasm: unknown option -x');
});

test('an unknown command is named with the nearest command', () => {
  assert.equal(usageError('compelte', '--query', 'hi'), 'needle-wasm: unknown command "compelte": did you mean complete?');
  assert.equal(usageError('tokenise'), 'needle-wasm: unknown command "tokenise": did you mean tokenize?');
  assert.equal(usageError('frobnicate'), 'needle-wasm: unknown command "frobnicate"');
});

test('an option without its value, or a value given to a flag, is a usage error', () => {
  assert.match(usageError('complete', '--query'), /^needle-wasm: Option '--query <value>' argument missing/);
  assert.match(usageError('inspect', '--json=yes'), /^needle-wasm: Option '--json' does not take an argument/);
});
