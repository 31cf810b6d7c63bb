// presets.js: the examples of the demo page, as data. Each preset names the
// tools it declares; the tool objects themselves live in tools.json (the 18
// tools the built-in demo model was trained on), which app.js fetches and
// toolsFor() resolves names against, so there is one copy of every schema.
// `expected` is what a correct model returns: argument values are the user's
// words, except where the schema asks for a form (HH:MM, an enum, a number).
// Plain data and functions only: Node imports this file too (the browser test).
// mockResult() makes a plausible tool result for the calls of an envelope.

/** `tools: ALL_TOOLS` declares the whole catalogue (retrieval then picks 5). */
export const ALL_TOOLS = 'all';

export const PRESETS = [
  {
    id: 'lights', label: 'Lights', query: 'turn on the kitchen lights and set them to 40 percent',
    tools: ['set_light', 'set_thermostat', 'set_timer'],
    expected: [{ name: 'set_light', arguments: { room: 'kitchen', state: 'on', brightness: 40 } }],
  },
  {
    id: 'alarm', label: 'Alarm (time as HH:MM)', query: 'wake me up at 7 am',
    tools: ['set_alarm', 'set_timer', 'set_do_not_disturb'],
    expected: [{ name: 'set_alarm', arguments: { time: '07:00' } }],
  },
  {
    id: 'shopping', label: 'Shopping list (several items)', query: 'add milk, eggs and bananas to my shopping list',
    tools: ['add_to_list', 'take_note', 'search_web'],
    expected: [{ name: 'add_to_list', arguments: { list: 'shopping', items: ['milk', 'eggs', 'bananas'] } }],
  },
  {
    id: 'two-calls', label: 'Two calls: lights off and a timer',
    query: 'turn off the living room lights and set a timer for 20 minutes',
    tools: ['set_light', 'set_timer', 'set_alarm', 'play_music'],
    expected: [
      { name: 'set_light', arguments: { room: 'living room', state: 'off' } },
      { name: 'set_timer', arguments: { minutes: 20 } },
    ],
  },
  {
    id: 'weather', label: 'Weather', query: "what's the weather like in Lisbon tomorrow",
    tools: ['get_weather', 'search_web', 'navigate_to'],
    expected: [{ name: 'get_weather', arguments: { city: 'Lisbon', day: 'tomorrow' } }],
  },
  {
    id: 'message', label: 'Message', query: "send a message to Anna saying I'm running ten minutes late",
    tools: ['send_message', 'call_contact', 'create_event'],
    expected: [{ name: 'send_message', arguments: { recipient: 'Anna', text: "I'm running ten minutes late" } }],
  },
  {
    id: 'convert', label: 'Unit conversion', query: 'convert 5 miles to kilometers',
    tools: ['convert_units', 'translate_text', 'search_web'],
    expected: [{ name: 'convert_units', arguments: { value: 5, from_unit: 'miles', to_unit: 'kilometers' } }],
  },
  {
    id: 'translate', label: 'Translation', query: 'translate good morning into Spanish',
    tools: ['translate_text', 'send_message', 'search_web'],
    expected: [{ name: 'translate_text', arguments: { text: 'good morning', target_language: 'Spanish' } }],
  },
  {
    id: 'refusal', label: 'No tool fits (a refusal)', query: 'book a flight to Paris',
    tools: ['navigate_to', 'get_weather', 'set_alarm'],
    expected: [],
  },
  {
    id: 'all-tools', label: 'All 18 tools (retrieval picks 5)', query: 'lock the front door',
    tools: ALL_TOOLS,
    expected: [{ name: 'lock_door', arguments: { door: 'front', locked: true } }],
  },
];

/** The tool objects a preset declares, from the catalogue (tools.json), in
 *  the preset's order. Throws on a name the catalogue lacks: a stale preset
 *  should fail loudly, not declare fewer tools. */
export function toolsFor(preset, catalogue) {
  if (preset.tools === ALL_TOOLS) return catalogue;
  const byName = new Map(catalogue.map((t) => [t.name, t]));
  return preset.tools.map((name) => {
    const found = byName.get(name);
    if (!found) throw new Error(`preset "${preset.id}" names the tool "${name}", which tools.json does not declare`);
    return found;
  });
}

// A few factors, so the mock conversion is right for the common cases.
const FACTORS = { 'miles>kilometers': 1.609344, 'kilometers>miles': 0.621371, 'pounds>kilograms': 0.453592,
  'kilograms>pounds': 2.204623, 'feet>meters': 0.3048, 'meters>feet': 3.28084, 'inches>centimeters': 2.54 };
const convert = ({ value, from_unit: from = '', to_unit: to = '' }) =>
  Math.round(value * (FACTORS[`${from.toLowerCase()}>${to.toLowerCase()}`] ?? 1) * 100) / 100;

// What each tool might answer, by name (the kind of result the demo model
// saw in training); anything else answers { ok: true }.
const MOCKS = {
  set_light: (a) => ({ ok: true, room: a.room, ...(a.state ? { state: a.state } : {}), ...(a.brightness !== undefined ? { brightness: a.brightness } : {}) }),
  set_thermostat: (a) => ({ ok: true, target: a.temperature, current: 19.5 }),
  set_timer: (a) => ({ ok: true, timer_id: 3, minutes: a.minutes }),
  set_alarm: (a) => ({ ok: true, alarm_id: 4, time: a.time }),
  get_weather: (a) => ({ city: a.city, ...(a.day ? { day: a.day } : {}), temp_c: 18, sky: 'partly cloudy' }),
  send_message: () => ({ ok: true, delivered: true }),
  call_contact: () => ({ ok: true, status: 'ringing' }),
  create_event: () => ({ ok: true, event_id: 'evt_1042' }),
  play_music: (a) => ({ ok: true, now_playing: a.query }),
  set_volume: (a) => ({ ok: true, level: a.level }),
  navigate_to: () => ({ ok: true, eta_min: 24, distance_km: 12.5 }),
  add_to_list: (a) => ({ ok: true, list: a.list, count: (a.items?.length ?? 0) + 3 }),
  lock_door: (a) => ({ ok: true, door: a.door, locked: a.locked }),
  convert_units: (a) => ({ value: a.value, from: a.from_unit, to: a.to_unit, result: convert(a) }),
  search_web: (a) => ({ results: [{ title: a.query, url: 'https://example.com/search-result' }] }),
  take_note: () => ({ ok: true, note_id: 17 }),
  set_do_not_disturb: (a) => ({ ok: true, enabled: a.enabled, ...(a.until ? { until: a.until } : {}) }),
  translate_text: (a) => ({ ok: true, target_language: a.target_language, chars: a.text?.length ?? 0 }),
};

/** A tool result for the calls of one envelope: one value for one call, an
 *  array in call order for several. */
export function mockResult(calls) {
  const results = calls.map((c) => (MOCKS[c.name] ?? (() => ({ ok: true })))(c.arguments ?? {}));
  return results.length === 1 ? results[0] : results;
}
