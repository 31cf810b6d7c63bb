// presets.js: example tool sets and queries for the demo page, as data: a
// preset fills the query and the editable tools JSON that app.js hands to
// Needle.create. mockResult() makes a plausible tool result for the calls of
// an envelope, to send back as the next turn.

const tool = (name, description, properties, required = Object.keys(properties)) => ({
  name, description, parameters: { type: 'object', properties, required },
});
const str = (description, extra = {}) => ({ type: 'string', description, ...extra });
const num = (description) => ({ type: 'number', description });

export const PRESETS = [
  {
    id: 'smart-home', label: 'Smart home', query: 'Turn on the kitchen lights and set them to 40 percent',
    tools: [
      tool('set_light', 'Switch a light and set its brightness', {
        room: str('Room name'), on: { type: 'boolean', description: 'On or off' }, brightness: num('0 to 100'),
      }, ['room', 'on']),
      tool('set_thermostat', 'Set the target temperature', { room: str('Room name'), celsius: num('Target temperature') }),
    ],
  },
  {
    id: 'robot', label: 'Robot', query: 'Move forward two meters, then turn left 90 degrees',
    tools: [
      tool('move', 'Drive straight', { meters: num('Distance; negative drives backwards') }),
      tool('turn', 'Rotate in place', { degrees: num('Angle'), direction: str('left or right', { enum: ['left', 'right'] }) }),
      tool('grip', 'Open or close the gripper', { action: str('open or close', { enum: ['open', 'close'] }) }),
    ],
  },
  {
    id: 'device', label: 'Device control', query: 'Set an alarm for 6:30 tomorrow and mute notifications',
    tools: [
      tool('set_alarm', 'Create an alarm', { time: str('HH:MM, 24-hour'), label: str('Optional label') }, ['time']),
      tool('set_volume', 'Set a volume channel', { channel: str('media, ring or notifications'), level: num('0 to 100') }),
      tool('toggle_setting', 'Switch a setting', { setting: str('wifi, bluetooth, do_not_disturb ...'), on: { type: 'boolean' } }),
    ],
  },
  {
    id: 'email', label: 'Email and document extraction',
    query: 'Email Dana the invoice total from: "Invoice 2291, due 3 May, total EUR 1,240.50"',
    tools: [
      tool('send_email', 'Send an email', { to: str('Recipient name or address'), subject: str('Subject'), body: str('Body text') }),
      tool('extract_invoice', 'Pull fields out of an invoice text', { number: str('Invoice number'), due: str('Due date'), total: num('Total amount'), currency: str('ISO currency code') }),
    ],
  },
  {
    id: 'currency', label: 'Currency', query: 'How much is 250 dollars in yen?',
    tools: [tool('convert_currency', 'Convert an amount', { amount: num('Amount'), from: str('ISO code'), to: str('ISO code') })],
  },
  {
    id: 'sentiment', label: 'Sentiment', query: 'The delivery was late again and nobody answered the phone.',
    tools: [tool('classify_sentiment', 'Label the sentiment of a text', { label: str('positive, neutral or negative', { enum: ['positive', 'neutral', 'negative'] }), score: num('Confidence 0..1') })],
  },
  {
    id: 'routing', label: '12-tool routing', query: 'What is the weather in Lisbon this weekend?',
    tools: ['get_weather', 'get_time', 'search_web', 'play_music', 'set_timer', 'send_message', 'create_event',
      'navigate', 'order_food', 'translate', 'calculate', 'take_note'].map((name) =>
      tool(name, name.replace(/_/g, ' '), { query: str('What to do') })),
  },
  {
    id: 'array', label: 'Array argument', query: 'Add milk, eggs and two loaves of bread to my shopping list',
    tools: [tool('add_to_list', 'Add items to a list', {
      list: str('List name'), items: { type: 'array', items: { type: 'string' }, description: 'Items to add' },
    })],
  },
  {
    id: 'refusal', label: 'Off-topic refusal', query: 'Write me a poem about the sea',
    tools: [tool('set_light', 'Switch a light', { room: str('Room name'), on: { type: 'boolean' } })],
  },
];

// What a tool might answer, by name; anything else answers { ok: true }.
const MOCKS = {
  set_light: (a) => ({ ok: true, room: a.room, on: a.on ?? true }),
  set_thermostat: (a) => ({ ok: true, target: a.celsius, current: 19.5 }),
  move: (a) => ({ ok: true, moved_meters: a.meters }),
  turn: (a) => ({ ok: true, heading_degrees: 90 }),
  grip: (a) => ({ ok: true, gripper: a.action === 'close' ? 'closed' : 'open' }),
  set_alarm: (a) => ({ ok: true, alarm_id: 4, time: a.time }),
  set_volume: (a) => ({ ok: true, channel: a.channel, level: a.level }),
  toggle_setting: (a) => ({ ok: true, setting: a.setting, on: a.on }),
  send_email: () => ({ ok: true, message_id: 'msg-1042' }),
  extract_invoice: () => ({ ok: true, stored: true }),
  convert_currency: () => ({ amount: 37125, currency: 'JPY', rate: 148.5 }),
  classify_sentiment: () => ({ ok: true, logged: true }),
  get_weather: () => ({ forecast: 'sunny', high_celsius: 24, low_celsius: 15 }),
  add_to_list: (a) => ({ ok: true, list_size: (a.items?.length ?? 0) + 3 }),
};

/** A tool result for the calls of one envelope: one value for one call, an
 *  array in call order for several. */
export function mockResult(calls) {
  const results = calls.map((c) => (MOCKS[c.name] ?? (() => ({ ok: true })))(c.arguments ?? {}));
  return results.length === 1 ? results[0] : results;
}
