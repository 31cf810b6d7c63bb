// Tool sets for the agent tests: every JSON Schema keyword the grammar
// supports, and the reference playground's kinds of tool sets. Each entry is
// { name, tools, query }.

const fn = (name, parameters, description = '') => ({ name, ...(description ? { description } : {}), parameters });
const obj = (properties, required = Object.keys(properties), extra = {}) => ({ type: 'object', properties, required, ...extra });

const KEYWORDS = [
  ['string', obj({ text: { type: 'string' } })],
  ['integer', obj({ count: { type: 'integer' } })],
  ['number', obj({ value: { type: 'number' } })],
  ['boolean', obj({ on: { type: 'boolean' } })],
  ['null', obj({ nothing: { type: 'null' } })],
  ['type list', obj({ value: { type: ['string', 'integer', 'null'] } })],
  ['optional fields', obj({ a: { type: 'string' }, b: { type: 'integer' }, c: { type: 'boolean' } }, ['a'])],
  ['no required', obj({ a: { type: 'string' }, b: { type: 'number' } }, [])],
  ['enum strings', obj({ mode: { type: 'string', enum: ['heat', 'cool', 'auto', 'heat_pump'] } })],
  ['enum mixed', obj({ level: { enum: [1, 'two', null, true, 3.5] } })],
  ['const', obj({ version: { const: 'v2' }, flag: { const: 7 } })],
  ['minimum maximum', obj({ percent: { type: 'integer', minimum: 0, maximum: 100 } })],
  ['negative range', obj({ offset: { type: 'integer', minimum: -40, maximum: -5 } })],
  ['exclusive bounds', obj({ x: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 } })],
  ['exclusive integer', obj({ n: { type: 'integer', exclusiveMinimum: 9, exclusiveMaximum: 13 } })],
  ['multipleOf', obj({ step: { type: 'integer', multipleOf: 5, minimum: 0, maximum: 60 } })],
  ['multipleOf unbounded', obj({ even: { type: 'integer', multipleOf: 2 } })],
  ['minLength maxLength', obj({ code: { type: 'string', minLength: 2, maxLength: 5 } })],
  ['pattern', obj({ zip: { type: 'string', pattern: '^[0-9]{5}(-[0-9]{4})?$' } })],
  ['pattern alternation', obj({ unit: { type: 'string', pattern: '^(kg|lb|g)$' } })],
  ['pattern classes', obj({ id: { type: 'string', pattern: '^[A-Z]{2}\\d+[a-z_]*$' } })],
  ['format date', obj({ day: { type: 'string', format: 'date' } })],
  ['format time', obj({ at: { type: 'string', format: 'time' } })],
  ['format date-time', obj({ when: { type: 'string', format: 'date-time' } })],
  ['format email', obj({ to: { type: 'string', format: 'email' } })],
  ['format uri', obj({ link: { type: 'string', format: 'uri' } })],
  ['format uuid', obj({ id: { type: 'string', format: 'uuid' } })],
  ['array items', obj({ items: { type: 'array', items: { type: 'string' } } })],
  ['minItems maxItems', obj({ tags: { type: 'array', items: { type: 'integer' }, minItems: 1, maxItems: 3 } })],
  ['uniqueItems', obj({ ids: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 3 }, uniqueItems: true, maxItems: 4 } })],
  ['nested object', obj({ address: obj({ city: { type: 'string' }, zip: { type: 'string', maxLength: 5 } }, ['city']) })],
  ['array of objects', obj({ rows: { type: 'array', maxItems: 3, items: obj({ k: { type: 'string' }, v: { type: 'number' } }) } })],
  ['$ref $defs', { type: 'object', properties: { who: { $ref: '#/$defs/Person' } }, required: ['who'],
    $defs: { Person: obj({ name: { type: 'string' }, age: { type: 'integer', minimum: 0 } }, ['name']) } }],
  ['definitions (pydantic)', { title: 'Order', type: 'object', properties: { item: { $ref: '#/definitions/Item' }, qty: { type: 'integer', minimum: 1, maximum: 9 } },
    required: ['item', 'qty'], definitions: { Item: { title: 'Item', type: 'object', properties: { sku: { type: 'string', pattern: '^[A-Z]{3}-\\d{3}$' } }, required: ['sku'] } } }],
  ['anyOf', obj({ target: { anyOf: [{ type: 'integer', minimum: 1 }, { type: 'string', enum: ['all', 'none'] }] } })],
  ['oneOf', obj({ shape: { oneOf: [obj({ r: { type: 'number' } }), obj({ w: { type: 'number' }, h: { type: 'number' } })] } })],
  ['additionalProperties false', obj({ a: { type: 'string' } }, ['a'], { additionalProperties: false })],
  ['descriptions ignored', obj({ q: { type: 'string', description: 'A query', title: 'Q', default: 'x', examples: ['y'] } })],
  ['empty arguments', obj({}, [])],
];

const simple = (name, properties, required) => fn(name, obj(properties, required), name.replace(/_/g, ' '));
const str = { type: 'string' };
const num = { type: 'number' };

const PLAYGROUND = [
  ['smart home', 'dim the kitchen to 10', [
    simple('set_light', { room: str, on: { type: 'boolean' }, brightness: { type: 'integer', minimum: 0, maximum: 100 } }, ['room', 'on']),
    simple('set_thermostat', { room: str, celsius: { type: 'number', minimum: 5, maximum: 30 } })]],
  ['robot', 'move forward two meters then turn left', [
    simple('move', { meters: num }), simple('turn', { degrees: num, direction: { enum: ['left', 'right'] } }),
    simple('grip', { action: { type: 'string', enum: ['open', 'close'] } })]],
  ['email extraction', 'mail Dana the report', [
    simple('send_email', { to: { type: 'string', format: 'email' }, subject: str, body: str, cc: { type: 'array', items: { type: 'string', format: 'email' }, maxItems: 2 } }, ['to', 'subject'])]],
  ['currency', '250 dollars in yen', [simple('convert_currency', { amount: { type: 'number', exclusiveMinimum: 0 }, from: { type: 'string', pattern: '^[A-Z]{3}$' }, to: { type: 'string', pattern: '^[A-Z]{3}$' } })]],
  ['document extraction', 'Invoice 2291 due 3 May total 1240.50 EUR', [
    simple('extract_invoice', { number: str, due: { type: 'string', format: 'date' }, total: num, currency: { enum: ['EUR', 'USD', 'GBP'] } }, ['number', 'total'])]],
  ['sentiment enum', 'the delivery was late again', [simple('classify', { label: { enum: ['positive', 'neutral', 'negative'] } })]],
  ['array arguments', 'add milk eggs and bread', [simple('add_items', { list: str, items: { type: 'array', items: str, minItems: 1 } })]],
  ['optional fields', 'set an alarm at 6:30', [simple('set_alarm', { time: { type: 'string', pattern: '^\\d{2}:\\d{2}$' }, label: str, repeat: { type: 'boolean' } }, ['time'])]],
];

export const TOOL_SETS = [
  ...KEYWORDS.map(([name, parameters]) => ({ name: `keyword: ${name}`, query: 'do it', tools: [fn('tool_a', parameters)] })),
  ...PLAYGROUND.map(([name, query, tools]) => ({ name, query, tools })),
];

/** Twelve tools for retrieval: more than 5 declared, 5 rendered. */
export const TWELVE_TOOLS = ['get_weather', 'get_time', 'search_web', 'play_music', 'set_timer', 'send_message',
  'create_event', 'navigate', 'order_food', 'translate', 'calculate', 'take_note']
  .map((name) => simple(name, { query: str }));
