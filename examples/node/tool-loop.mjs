// A tool loop: agent.run() lets the model call your JavaScript functions, runs them, and feeds
// their results back to the model until it answers without another call.
//
// Run it in a directory where `npm install needle-wasm` ran (Node 20 or later): node tool-loop.mjs
// From a checkout of this repository, after `bash build.sh`: node examples/node/tool-loop.mjs
//
// The tools' schemas come from the demo model's catalogue (needle-wasm/dist/demo-tools.json):
// the built-in demo model knows those 18 tools only. With Needle 2 (loadNeedle2()) write your own.

import { Needle, tool } from 'needle-wasm';
import catalogue from 'needle-wasm/dist/demo-tools.json' with { type: 'json' };

const schema = (name) => catalogue.find((t) => t.name === name);

// A pretend smart home: the functions the model may call.
const home = { lights: { kitchen: 'on', hallway: 'on' }, doors: { front: false, back: false } };
const setLight = tool(({ room, state = 'on' }) => {
  home.lights[room] = state;
  return { ok: true, room, state };
}, schema('set_light'));
const lockDoor = tool(({ door, locked }) => {
  home.doors[door] = locked;
  return { ok: true, door, locked };
}, schema('lock_door'));
const getWeather = tool(({ city, day = 'today' }) => ({ city, day, forecast: 'light rain', high_c: 17 }), schema('get_weather'));

const agent = await Needle.create({ tools: [setLight, lockDoor, getWeather], system: 'date: 2026-07-21' });
for (const command of ['turn off the kitchen lights', 'lock the front door', "what's the weather in Lisbon tomorrow"]) {
  agent.reset(); // each command is a conversation of its own
  const { results, type, reasoning } = await agent.run(command);
  console.log(`> ${command}`);
  for (const { name, arguments: args, result } of results) {
    console.log(`  ran ${name}(${JSON.stringify(args)}) -> ${JSON.stringify(result)}`);
  }
  console.log(`  then the model: ${type} (${JSON.stringify(reasoning)})`);
}
console.log('home is now', JSON.stringify(home));
agent.free();
