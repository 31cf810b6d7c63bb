// The README's quick start: the built-in demo model turns one command into a tool call.
//
// Run it in an empty directory with Node 20 or later:
//   npm install needle-wasm
//   node quick-start.mjs        (this file, saved there; .mjs makes it an ES module)
// From a checkout of this repository, after `bash build.sh`: node examples/node/quick-start.mjs
// It prints: [{"name":"get_weather","arguments":{"city":"Paris","day":"tomorrow"}}]

import { Needle } from 'needle-wasm';
import tools from 'needle-wasm/dist/demo-tools.json' with { type: 'json' };

// No model given: the built-in demo model (in the package, no download). It knows these 18 tools only.
const agent = await Needle.create({ tools });
const envelope = await agent.complete("what's the weather in Paris tomorrow");
console.log(JSON.stringify(envelope.function_calls));
agent.free();
