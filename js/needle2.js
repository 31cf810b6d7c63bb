// needle2.js: the real Needle 2, one call away. loadNeedle2() fetches the
// released archive from Hugging Face through loadModel (so it streams with
// progress and is kept in Cache Storage for offline visits), then checks that
// what arrived is that archive: its size, tensor count, geometry (spec
// section 1), CQ group and probe heads. Failures are NeedleErrors in plain
// words, with these codes besides loadModel's:
//   'OFFLINE'      this device is offline and no copy is cached
//   'CORS'         the browser refused a cross-origin download (the server
//                  does not allow this page, or could not be reached)
//   'NETWORK'      the server could not be reached (Node, or same origin)
//   'HTTP'         an error status (error.status: 404 moved, 401/403 gated
//                  or private, 5xx the host failed)
//   'NOT_NEEDLE2'  the file is another archive (error.mismatch names the
//                  first figure that differs); it is dropped from the cache
//   import { loadNeedle2 } from 'needle-wasm';
//   const model = await loadNeedle2({ onProgress: ({ loaded, total }) => {} });

import { NeedleError } from './errors.js';
import { LOAD_OPTIONS, ARCHIVE_CACHE } from './load.js';
import { checkKeys } from './options.js';
import { loadModel } from './load-model.js';

/** Where Needle 2 lives: Hugging Face Cactus-Compute/needle2 (it redirects to its CDN). */
export const NEEDLE2_URL = 'https://huggingface.co/Cactus-Compute/needle2/resolve/main/needle2.cact';

/** The released archive's figures (spec section 1), which a download must match. */
export const NEEDLE2_FIGURES = Object.freeze({
  size: 13737807,
  tensors: 405,
  group: 128,
  heads: Object.freeze(['contrastive', 'confidence']),
  geometry: Object.freeze({
    vocabulary: 8192, hidden: 512, queryHeads: 8, kvHeads: 4, headDimension: 64, layers: 27, lanes: 4,
    hadamardDimension: 512, orders: Object.freeze([2, 3]), engramTables: 4, engramSubDimension: 128,
    engramSlots: 8192, engramTaps: 4, engramDilation: 3, sites: Object.freeze([2, 15]), ropeTheta: 100000,
    maximumSequence: 2048, kvWindow: 256,
  }),
});

const OPTIONS = Object.freeze([...LOAD_OPTIONS, 'url', 'expect']);
const number = (n) => (typeof n === 'number' ? n.toLocaleString('en-US') : JSON.stringify(n));
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/** The first figure of an archive that differs from `expect`, or null.
 *  inspection: what model.inspect() returns; size: the archive's bytes. */
export function needle2Mismatch({ geometry, tensors }, size, expect = NEEDLE2_FIGURES) {
  if (size !== expect.size) return { what: 'size', actual: size, expected: expect.size };
  if (tensors.length !== expect.tensors) return { what: 'tensor count', actual: tensors.length, expected: expect.tensors };
  for (const [field, expected] of Object.entries(expect.geometry)) {
    if (!same(geometry[field], expected)) return { what: field, actual: geometry[field], expected };
  }
  const group = tensors.find((t) => t.dtype === 'CQ' && t.group !== expect.group);
  if (group) return { what: `CQ group of ${group.name}`, actual: group.group, expected: expect.group };
  const head = expect.heads.find((kind) => !tensors.some((t) => t.name.includes(`(${kind})`)));
  if (head) return { what: `${head} head`, actual: 'absent', expected: 'present' };
  return null;
}

/** Throws NOT_NEEDLE2 unless the loaded model (Model or WorkerModel) is the
 *  archive `expect` describes (default: the released Needle 2); label names
 *  the file in the message (default: model.source.label). */
export async function verifyNeedle2(model, { expect, label = model.source.label } = {}) {
  const figures = { ...NEEDLE2_FIGURES, ...expect };
  const mismatch = needle2Mismatch(await model.inspect(), model.source.size, figures);
  if (!mismatch) return;
  const { what, actual, expected } = mismatch;
  const unit = what === 'size' ? ' bytes' : '';
  const error = new NeedleError(`${label} is not Needle 2: its ${what} is ${number(actual)}${unit}, ` +
    `Needle 2's is ${number(expected)}${unit}`, 'NOT_NEEDLE2');
  error.mismatch = mismatch;
  throw error;
}

/**
 * A load error of Needle 2 in plain words. A fetch that failed without an
 * answer is told apart by what the caller's context knows: offline
 * (navigator.onLine false), or a cross-origin URL in a browser (a context
 * with a location), where CORS is the usual cause: the browser hides which.
 * `where` is injectable for tests.
 */
export function needle2Error(error, url, where = { online: globalThis.navigator?.onLine, origin: globalThis.location?.origin }) {
  if (error?.code !== 'NETWORK' && error?.code !== 'HTTP') return error;
  const href = String(url);
  const host = URL.canParse(href) ? new URL(href).host : href;
  let code = error.code;
  let message;
  if (error.code === 'HTTP') {
    const { status } = error;
    message = status === 404 ? `Needle 2 is not at ${href} (HTTP 404): the file was moved or renamed; pass its new address as url`
      : status === 401 || status === 403 ? `${host} refused to send Needle 2 (HTTP ${status}): the repository is gated or ` +
        'private. Download needle2.cact where you are signed in to Hugging Face, then load the file'
        : status >= 500 ? `${host} failed to send Needle 2 (HTTP ${status}); try again later`
          : `${host} answered HTTP ${status} for Needle 2`;
  } else if (where.online === false) {
    code = 'OFFLINE';
    message = `This device is offline and Needle 2 is not cached yet: connect once to download it (${host}); ` +
      'after that it loads offline';
  } else if (where.origin && URL.canParse(href) && new URL(href).origin !== where.origin) {
    code = 'CORS';
    message = `The browser blocked the download of Needle 2 from ${host}: that server does not allow this page ` +
      'to read it (CORS), or it could not be reached';
  } else {
    message = `Needle 2 could not be downloaded from ${host}: ${error.message}. Check the connection`;
  }
  const plain = new NeedleError(message, code);
  if (error.status !== undefined) plain.status = error.status;
  plain.cause = error;
  return plain;
}

/** Drops a rejected archive from the archive cache, so the next visit fetches again. */
async function forget(url, cache) {
  if (cache === false || !URL.canParse(String(url), globalThis.location?.href)) return;
  const href = new URL(String(url), globalThis.location?.href).href;
  try {
    const store = cache ?? (typeof caches === 'undefined' ? null : await caches.open(ARCHIVE_CACHE));
    await store?.delete?.(href);
  } catch { /* no cache to clean (e.g. an opaque origin) */ }
}

/**
 * Loads Needle 2 (loadModel's options, plus url: another address of it, and
 * expect: figures that override NEEDLE2_FIGURES, e.g. a mirror's other
 * revision), checks it is Needle 2, and returns the model (a worker model in
 * pages, as loadModel). model.source.fromCache says it came from the cache.
 */
export async function loadNeedle2(options = {}) {
  checkKeys('loadNeedle2()', options, OPTIONS);
  const { url = NEEDLE2_URL, expect, ...load } = options;
  let model;
  try {
    model = await loadModel(url, load);
  } catch (error) {
    throw needle2Error(error, url);
  }
  try {
    await verifyNeedle2(model, { expect });
  } catch (error) {
    await model.free();
    await forget(url, load.cache);
    throw error;
  }
  return model;
}
