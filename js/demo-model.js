// demo-model.js: the built-in demo model told apart from any other archive,
// and the warning its agents carry when they declare tools it was not
// trained on (it learned the 18 tools of dist/demo-tools.json and nothing
// else). The archive is recognised by its bytes, not by how it was loaded:
// the engine hashes every archive as it loads it (FNV-1a 64, before the
// weights are repacked in place, so JS never holds the bytes to hash them
// itself). Apart from demo.js, whose URLs make bundlers ship the archive.
// tests/js/demo-warnings.test.js checks both constants against dist/.

/** FNV-1a 64 of the bytes of dist/demo.cact. */
export const DEMO_ARCHIVE_FNV = '1c8cefb5cf1c00c9';

/** The demo tools: name -> declarationHash of its declaration in dist/demo-tools.json. */
export const DEMO_TOOLS = Object.freeze({
  set_light: '65bc531cab645417',
  set_thermostat: '29259e8239076c51',
  set_timer: 'dfcfc8cd9bcda3f3',
  set_alarm: 'a176bd3643436f01',
  get_weather: 'c9697c587f8db19a',
  send_message: 'ddffad0cdaf322df',
  call_contact: 'e5cd8075520082c5',
  create_event: 'bc2576dcab196fa2',
  play_music: 'ab1b939bab384b54',
  set_volume: 'deb9bedc21bcb18f',
  navigate_to: '346a82e87436acf0',
  add_to_list: 'dc8bf96b4de6482b',
  lock_door: '635e5d2beb795ebf',
  convert_units: 'e842be3e0593849e',
  search_web: '1a4a05f7b674d3d6',
  take_note: 'ac6e8e6351c3c1b9',
  set_do_not_disturb: 'e1ddbb18e2effdfe',
  translate_text: '0ee32dce9b255123',
});

const MASK = (1n << 64n) - 1n;

/** FNV-1a 64 of bytes as 16 hex digits (the engine's nd_fnv1a). */
export function fnv1a64(bytes) {
  let h = 0xcbf29ce484222325n;
  for (const b of bytes) h = ((h ^ BigInt(b)) * 0x100000001b3n) & MASK;
  return h.toString(16).padStart(16, '0');
}

/** A JSON value with every object's keys sorted: equal declarations, key order aside. */
const sorted = (v) => (Array.isArray(v) ? v.map(sorted) : v && typeof v === 'object'
  ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v);

/** The hash DEMO_TOOLS keeps of a tool: FNV-1a 64 of the JSON of its name,
 *  description and parameters, keys sorted. */
export function declarationHash({ name, description, parameters } = {}) {
  return fnv1a64(new TextEncoder().encode(JSON.stringify(sorted({ name, description, parameters }))));
}

/** What needle_agent_fingerprint says of an agent over the demo archive before
 *  any tool is added: the FNV-1a 64 of the archive's hash, as its 8 little-endian bytes. */
const DEMO_AGENT_FINGERPRINT = (() => {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(`0x${DEMO_ARCHIVE_FNV}`), true);
  return fnv1a64(bytes);
})();

/**
 * The warnings of an agent: none unless the archive is the demo model
 * (`fingerprint`: needle_agent_fingerprint before any tool was added) and a
 * declared tool is not one of its 18 as dist/demo-tools.json declares it:
 * another name, or the same name with another description or other
 * parameters (key order aside). The description counts as much as the
 * parameters: the model reads both, and on the first 150 commands of
 * src/train/demo-model/heldout.jsonl its exact calls fell from 104 to 86 with
 * the descriptions reworded, to 62 with one generic description for all.
 * Exact, so no change goes unseen.
 */
export function demoWarnings(fingerprint, declarations) {
  if (fingerprint !== DEMO_AGENT_FINGERPRINT) return [];
  const foreign = declarations.filter((d) => DEMO_TOOLS[d?.name] !== declarationHash(d ?? {})).map((d) => String(d?.name));
  if (!foreign.length) return [];
  return [`The built-in demo model was trained on its 18 tools only (dist/demo-tools.json), not on ${foreign.join(', ')} ` +
    'as declared here, so its calls will be unreliable: load a real model with loadNeedle2() or Needle.create({ model }).'];
}
