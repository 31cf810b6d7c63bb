// Runs one WASI test module (argv[2]) with the project root preopened as '.',
// exiting with its status. Used by c-units.test.js.
import { WASI } from 'node:wasi';
import { readFileSync } from 'node:fs';

const wasi = new WASI({ version: 'preview1', args: [process.argv[2]], env: {}, returnOnExit: true,
  preopens: { '.': process.cwd() } });
const module = await WebAssembly.compile(readFileSync(process.argv[2]));
const instance = await WebAssembly.instantiate(module, {
  wasi_snapshot_preview1: wasi.wasiImport,
  env: { emscripten_notify_memory_growth() {}, needle_now_ms: () => performance.now() },
});
process.exitCode = wasi.start(instance);
