// The page's script (see index.html for how to serve it). In a page, Needle.create() loads the
// model in a Web Worker, so the page stays responsive while it loads and while it computes.

import { Needle } from 'needle-wasm';

const $ = (id) => document.getElementById(id);
const bar = $('progress');

// The demo model's 18 tools, shipped in the package (it knows these only).
const tools = await (await fetch(import.meta.resolve('needle-wasm/dist/demo-tools.json'))).json();

try {
  // No model given: the built-in demo model. load: loadModel's options, here the progress bar.
  const agent = await Needle.create({
    tools,
    load: { onProgress: ({ loaded, total }) => { bar.max = total ?? loaded; bar.value = loaded; } },
  });
  $('status').textContent = `ready (${agent.model.source.size.toLocaleString()} bytes, threads: ${agent.model.threads.count})`;

  const command = "what's the weather in Paris tomorrow";
  $('command').textContent = command;
  const envelope = await agent.complete(command, {
    onToken: ({ kind, text }) => { if (kind === 'reasoning') $('reasoning').textContent += text; },
  });
  $('call').textContent = envelope.function_calls.length
    ? envelope.function_calls.map((call) => `${call.name}(${JSON.stringify(call.arguments)})`).join('\n')
    : '(no call: no tool fits)';
  await agent.free(); // ends the worker
} catch (error) {
  $('status').textContent = `failed: ${error.message}`;
  throw error;
}
