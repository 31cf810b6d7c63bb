// demo.js: the entry point 'needle-wasm/demo', for bundled apps that use the
// built-in demo model. Its URLs have the one shape bundlers (Vite, webpack 5,
// Parcel) copy into a build, `new URL('../dist/<file>', import.meta.url)`; the
// main entry names the same files without that shape, so an app that loads
// its own archive does not ship this one.
//   import { DEMO_ARCHIVE_URL } from 'needle-wasm/demo';
//   const model = await loadModel(DEMO_ARCHIVE_URL);

/** The demo model: a small model this project trained on the 18 tools of DEMO_TOOLS_URL (not Needle 2). */
export const DEMO_ARCHIVE_URL = new URL('../dist/demo.cact', import.meta.url);

/** The demo model's tools (JSON: an array of { name, description, parameters }). */
export const DEMO_TOOLS_URL = new URL('../dist/demo-tools.json', import.meta.url);
