// presets.js: the examples of the demo page, as data: a query each, run with
// the tools the page declares (all 18 of tools.json, the tools the built-in
// demo model was trained on, unless the user narrows them). `expected` is
// what a correct model returns: argument values are the user's words, except
// where the schema asks for a form (HH:MM, an enum, a number).
// Plain data and functions only: Node imports this file too (the browser test).
// mockResult() makes a plausible tool result for the calls of an envelope.

export const PRESETS = [
  {
    id: 'lights', label: 'Lights', query: 'turn on the kitchen lights and set them to 40 percent',
    expected: [{ name: 'set_light', arguments: { room: 'kitchen', state: 'on', brightness: 40 } }],
  },
  {
    id: 'alarm', label: 'Alarm (time as HH:MM)', query: 'wake me up at 7 am',
    expected: [{ name: 'set_alarm', arguments: { time: '07:00' } }],
  },
  {
    id: 'shopping', label: 'Shopping list (several items)', query: 'add milk, eggs and bananas to my shopping list',
    expected: [{ name: 'add_to_list', arguments: { list: 'shopping', items: ['milk', 'eggs', 'bananas'] } }],
  },
  {
    id: 'two-calls', label: 'Two calls: lights off and a timer',
    query: 'turn off the living room lights and set a timer for 20 minutes',
    expected: [
      { name: 'set_light', arguments: { room: 'living room', state: 'off' } },
      { name: 'set_timer', arguments: { minutes: 20 } },
    ],
  },
  {
    id: 'weather', label: 'Weather', query: "what's the weather like in Lisbon tomorrow",
    expected: [{ name: 'get_weather', arguments: { city: 'Lisbon', day: 'tomorrow' } }],
  },
  {
    id: 'message', label: 'Message', query: "send a message to Anna saying I'm running ten minutes late",
    expected: [{ name: 'send_message', arguments: { recipient: 'Anna', text: "I'm running ten minutes late" } }],
  },
  {
    id: 'convert', label: 'Unit conversion', query: 'convert 5 miles to kilometers',
    expected: [{ name: 'convert_units', arguments: { value: 5, from_unit: 'miles', to_unit: 'kilometers' } }],
  },
  {
    id: 'translate', label: 'Translation', query: 'translate good morning into Spanish',
    expected: [{ name: 'translate_text', arguments: { text: 'good morning', target_language: 'Spanish' } }],
  },
  {
    id: 'refusal', label: 'No tool fits (a refusal)', query: 'book a flight to Paris',
    expected: [],
  },
  {
    id: 'door', label: 'Door lock', query: 'lock the front door',
    expected: [{ name: 'lock_door', arguments: { door: 'front', locked: true } }],
  },
];

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
