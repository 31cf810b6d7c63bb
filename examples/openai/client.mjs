// The official `openai` npm client talking to `needle-wasm serve`, an OpenAI-compatible endpoint
// on this machine. This script starts the server itself, as a child process on a free port, asks
// one question with the demo model's tools, prints the tool call, and stops the server.
//
// Run it in a directory where `npm install needle-wasm openai` ran (Node 20 or later):
//   node client.mjs
// From a checkout of this repository, after `bash build.sh` and `npm install`:
//   node examples/openai/client.mjs
// Against a server you started yourself (npx needle-wasm serve), skip the spawn below and use
// baseURL 'http://127.0.0.1:8000/v1'.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import catalogue from 'needle-wasm/dist/demo-tools.json' with { type: 'json' };

// The package's command, found through its package.json "bin" (what `npx needle-wasm` runs).
const manifest = import.meta.resolve('needle-wasm/package.json');
const { bin } = JSON.parse(readFileSync(new URL(manifest), 'utf8'));
const cli = fileURLToPath(new URL(bin['needle-wasm'], manifest));

// `serve --port 0` picks a free port and prints the address it serves.
const server = spawn(process.execPath, [cli, 'serve', '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const baseURL = await new Promise((resolve, reject) => {
  let printed = '';
  server.stdout.setEncoding('utf8').on('data', (text) => {
    printed += text;
    const found = /(http:\/\/\S+\/v1)\b/.exec(printed);
    if (found) resolve(found[1]);
  });
  server.once('exit', (code) => reject(new Error(`needle-wasm serve exited (${code}) before serving: ${printed}`)));
});

try {
  const client = new OpenAI({ baseURL, apiKey: 'not-checked' });
  const completion = await client.chat.completions.create({
    model: 'demo',
    messages: [{ role: 'user', content: 'turn off the kitchen lights' }],
    tools: catalogue.map((fn) => ({ type: 'function', function: fn })),
  });
  const { message, finish_reason } = completion.choices[0];
  console.log(`finish_reason: ${finish_reason}`);
  for (const call of message.tool_calls ?? []) console.log(`${call.function.name} ${call.function.arguments}`);
} finally {
  server.kill(); // serve stops on SIGTERM
}
