// The facade's TypeScript types (js/index.d.ts, "OpenAI shapes") against the
// official `openai` package's: tests/types/openai.ts passes OpenAI's request
// types to client.chat.completions.create and assigns its answers and chunks
// to OpenAI's ChatCompletion and ChatCompletionChunk; tsc must accept it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

test('the facade\'s types are OpenAI\'s types (tsc --noEmit -p tests/types)', { timeout: 120000 }, async () => {
  const tsc = `${root}node_modules/typescript/bin/tsc`;
  const result = await new Promise((resolve) => {
    execFile(process.execPath, [tsc, '--noEmit', '-p', `${root}tests/types/tsconfig.json`], { cwd: root }, (error, stdout, stderr) => resolve({ error, out: stdout + stderr }));
  });
  assert.equal(result.error, null, `tsc reported:\n${result.out}`);
});
