/** The demo model: a small model this project trained on the 18 tools of DEMO_TOOLS_URL (not Needle 2).
 *  Import it from 'needle-wasm/demo' in a bundled app so that the bundler emits the archive. */
export declare const DEMO_ARCHIVE_URL: URL;
/** The demo model's tools (JSON: an array of { name, description, parameters }). */
export declare const DEMO_TOOLS_URL: URL;
