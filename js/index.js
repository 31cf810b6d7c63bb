// needle-wasm: the package entry point.
//   import { loadModel } from 'needle-wasm';
//   const model = await loadModel('needle2.cact');
//   for await (const { text } of model.generate('turn on the lights')) process.stdout.write(text);

import { Model } from './model.js';

export { Model, Session } from './model.js';
export { NeedleError, STATUS } from './engine.js';

const isNode = typeof process !== 'undefined' && !!process.versions?.node;

/** The built-in demo archive (random weights in the released geometry). */
export const DEMO_ARCHIVE_URL = new URL('../dist/demo.cact', import.meta.url);

async function readSource(source) {
  if (source instanceof Uint8Array) return source;
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (typeof Blob !== 'undefined' && source instanceof Blob) return new Uint8Array(await source.arrayBuffer());
  if (typeof Response !== 'undefined' && source instanceof Response) return new Uint8Array(await source.arrayBuffer());
  const url = source instanceof URL ? source : null;
  if (isNode && (url?.protocol === 'file:' || (typeof source === 'string' && !/^[a-z]+:\/\//i.test(source)))) {
    const { readFile } = await import('node:fs/promises');
    return new Uint8Array(await readFile(url ?? source));
  }
  const response = await fetch(source);
  if (!response.ok) throw new Error(`cannot fetch ${source}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

/** Loads a .cact archive from a path (Node), URL, Response, Blob or bytes. */
export async function loadModel(source = DEMO_ARCHIVE_URL, options = {}) {
  return Model.fromBytes(await readSource(source), options);
}
