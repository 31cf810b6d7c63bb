// archive-check.js: the engine's .cact validation as the archive tests call
// it: check_prefix and needle_model_load in wasm, with their messages.
//
// Engine module: dist/needle.wasm (dist/needle3.wasm for Needle 3) when it
// exists, else a small module built here from the archive sources and
// src/model/inspect.c only (build/archive-only*.wasm), so these tests do not wait
// for the rest of the engine to link.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { instantiateEngine } from '../../js/wasm.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
export const STATUS = { OK: 0, FORMAT: 1, INCOMPLETE: 4 };

function engineUrl(needle3) {
  const dist = `${root}/dist/${needle3 ? 'needle3' : 'needle'}.wasm`;
  if (existsSync(dist)) return new URL(`file://${dist}`);
  mkdirSync(`${root}/build`, { recursive: true });
  const out = `${root}/build/archive-only${needle3 ? '3' : ''}.wasm`;
  execFileSync('emcc', ['-std=c11', '-O2', '-Isrc', ...(needle3 ? ['-DND_NEEDLE3'] : []), '--no-entry',
    '-sSTANDALONE_WASM', '-sALLOW_MEMORY_GROWTH',
    '-sEXPORTED_FUNCTIONS=_needle_archive_check_prefix,_needle_error_new,_needle_error_free,_malloc,_free',
    'src/format/archive.c', 'src/format/archive_v3.c', 'src/model/inspect.c', '-o', out],
  { cwd: root, env: { ...process.env, NODE_PATH: process.env.NODE_PATH ?? '/usr/share/nodejs' } });
  return new URL(`file://${out}`);
}

let x; // the module's exports
let err;

/** Instantiates the engine once (call from before()), with Needle 3 when
 *  needle3 is true; returns its exports. */
export async function startEngine(needle3 = false) {
  if (!x) {
    ({ exports: x } = await instantiateEngine(engineUrl(needle3 === true)));
    err = x.needle_error_new();
  }
  return x;
}

export function message() {
  const bytes = new Uint8Array(x.memory.buffer, err + 4, 256);
  return new TextDecoder().decode(bytes.subarray(0, bytes.indexOf(0)));
}

/** Copies bytes into wasm memory, runs fn(ptr), frees. */
export function withBytes(bytes, fn) {
  const ptr = x.malloc(Math.max(1, bytes.length));
  new Uint8Array(x.memory.buffer).set(bytes, ptr);
  try { return fn(ptr); } finally { x.free(ptr); }
}

/** { status, message } of check_prefix over the first `size` bytes of a file of `total`. */
export function checkPrefix(bytes, size = bytes.length, total = bytes.length) {
  return withBytes(bytes.subarray(0, size), (ptr) => {
    const status = x.needle_archive_check_prefix(ptr, size, total, err);
    return { status, message: status ? message() : '' };
  });
}

/** Asserts the whole file is rejected with a message matching `pattern`,
 *  by check_prefix and (when exported) needle_model_load. */
export function assertRejected(bytes, pattern) {
  const got = checkPrefix(bytes);
  assert.equal(got.status, STATUS.FORMAT, `accepted; wanted ${pattern}`);
  assert.match(got.message, pattern);
  if (x.needle_model_load) {
    withBytes(bytes, (ptr) => {
      const model = x.needle_model_load(ptr, bytes.length, err);
      if (model) x.needle_model_free(model);
      assert.equal(model, 0, 'needle_model_load accepted it');
      assert.match(message(), pattern);
    });
  }
}

/** Editors of an archive's bytes for the tests that break it one way each:
 *  directory is where its records start, names its tensors in walk order.
 *  The set* helpers return mutators (bytes) => void. */
export function archiveEditors(directory, names) {
  const at = (name) => {
    const i = names.indexOf(name);
    assert.ok(i >= 0, name);
    return i;
  };
  const view = (b) => new DataView(b.buffer, b.byteOffset, b.byteLength);
  const rec = (i) => directory + 44 * i;
  const blobOffset = (b, i) => Number(view(b).getBigUint64(rec(i) + 20, true));
  return {
    at, view, rec, blobOffset,
    setField: (field, value) => (b) => view(b).setUint32(field * 4, value, true),
    setRec32: (name, byte, value) => (b) => view(b).setUint32(rec(at(name)) + byte, value, true),
    setRec64: (name, byte, value) => (b) => view(b).setBigUint64(rec(at(name)) + byte, BigInt(value), true),
    setF32: (name, element, value) => (b) => view(b).setFloat32(blobOffset(b, at(name)) + 4 * element, value, true),
    setF16: (name, element, value) => (b) => view(b).setUint16(blobOffset(b, at(name)) + 2 * element, value, true),
  };
}
