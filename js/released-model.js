// released-model.js: what loadNeedle2() and loadNeedle3() share. A release
// ({ name, file, code, loader, url, figures }: needle2.js, needle3.js) is
// downloaded through the archive cache (load.js openSource: Cache Storage,
// offline visits) under the limits of download-guard.js, its bytes are
// checked (size, tag, and the SHA-256 pinned with its revision) before the
// engine sees them, then it is loaded (loadModel: a Web Worker in pages) and
// its shape checked (tensors, geometry, CQ group, heads). The digest needs
// the whole archive in one buffer (crypto.subtle.digest is not incremental),
// so the archive is held here once and handed over to the loader.
// Failures are NeedleErrors in plain words naming the model, with these codes
// besides loadModel's:
//   'OFFLINE'      this device is offline and no copy is cached
//   'CORS'         the browser refused a cross-origin download (the server
//                  does not allow this page, or could not be reached)
//   'NETWORK'      the server could not be reached (Node, or same origin)
//   'HTTP'         an error status (error.status: 404 moved, 401/403 gated
//                  or private, 5xx the host failed)
//   'TIMEOUT'      nothing arrived for idleTimeoutMs, or the whole took
//                  longer than timeoutMs
//   'INSECURE'     a page that is not a secure context has no crypto.subtle
//                  to check the digest with
//   release.code   ('NOT_NEEDLE2', 'NOT_NEEDLE3') the file is another one:
//                  error.mismatch names the first figure that differs
//                  ({ what, actual, expected }, stopped: true when more
//                  than the expected size arrived); it is dropped from the cache

import { NeedleError, STATUS } from './errors.js';
import { ARCHIVE_CACHE, openSource } from './load.js';
import { checkKeys } from './options.js';
import { loadModel } from './load-model.js';
import { guardDownload } from './download-guard.js';

/** The options loadNeedle2/3 take: loadModel's that apply to a download, and their own. */
const OPTIONS = Object.freeze(['onProgress', 'signal', 'cache', 'wasm', 'threads', 'worker', 'workerUrl',
  'url', 'expect', 'timeoutMs', 'idleTimeoutMs']);

const shown = (v) => (typeof v === 'number' ? v.toLocaleString('en-US') : Array.isArray(v) ? JSON.stringify(v) : String(v));
const hex32 = (n) => `0x${n.toString(16).toUpperCase().padStart(8, '0')}`;
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/** The figures a download must match: the release's, overridden by expect
 *  (sha256: null checks the shape only); the size must be a byte count. */
export function figuresOf(release, expect) {
  const figures = { ...release.figures, ...expect };
  if (!Number.isSafeInteger(figures.size) || figures.size <= 0) {
    throw new NeedleError(`expect.size must be a byte count, got ${shown(figures.size)}`, STATUS.ARGUMENT);
  }
  if (figures.sha256 != null && !/^[0-9a-f]{64}$/i.test(figures.sha256)) {
    throw new NeedleError(`expect.sha256 must be 64 hex digits or null, got ${shown(figures.sha256)}`, STATUS.ARGUMENT);
  }
  return { ...figures, sha256: figures.sha256?.toLowerCase() ?? null };
}

/** The error naming the first figure of `label` that differs from the release's. */
export function mismatchError(release, label, mismatch) {
  const { what, actual, expected } = mismatch;
  const say = what === 'tag' ? hex32 : shown;
  const unit = what === 'size' ? ' bytes' : '';
  const said = mismatch.stopped
    ? `more than ${release.name}'s ${shown(expected)} bytes arrived, so the download was stopped (at ${shown(actual)})`
    : `its ${what === 'sha256' ? 'SHA-256' : what} is ${say(actual)}${unit}, ${release.name}'s is ${say(expected)}${unit}`;
  const error = new NeedleError(`${label} is not ${release.name}: ${said}`, release.code);
  error.mismatch = mismatch;
  return error;
}

/** The first of size, tag and SHA-256 of an archive's bytes (facts: { size,
 *  tag, sha256 }) that differs from the figures, or null. */
export function bytesMismatch(facts, figures) {
  for (const what of ['size', 'tag', 'sha256']) {
    if (figures[what] != null && facts[what] !== figures[what]) return { what, actual: facts[what], expected: figures[what] };
  }
  return null;
}

/** The probe heads an archive has, in order, from its tensor names ("head 1 (confidence) proj"). */
const headKinds = (tensors) => [...new Set(tensors.map((t) => /^head \d+ \((\w+)\)/.exec(t.name)?.[1]).filter(Boolean))];

/** The first figure of a loaded archive's shape that differs, or null.
 *  inspection: what model.inspect() returns; size: the archive's bytes. */
function shapeMismatch({ geometry, tensors }, size, figures) {
  if (size !== figures.size) return { what: 'size', actual: size, expected: figures.size };
  if (tensors.length !== figures.tensors) return { what: 'tensor count', actual: tensors.length, expected: figures.tensors };
  for (const [field, expected] of Object.entries(figures.geometry)) {
    if (!same(geometry[field], expected)) return { what: field, actual: geometry[field], expected };
  }
  const group = tensors.find((t) => t.dtype === 'CQ' && t.group !== figures.group);
  if (group) return { what: `CQ group of ${group.name}`, actual: group.group, expected: figures.group };
  const kinds = headKinds(tensors);
  const missing = figures.heads.find((kind) => !kinds.includes(kind));
  if (missing) return { what: `${missing} head`, actual: 'absent', expected: 'present' };
  const extra = kinds.find((kind) => !figures.heads.includes(kind));
  if (extra) return { what: `${extra} head`, actual: 'present', expected: 'absent' };
  return null;
}

/** Throws release.code unless the loaded model (Model or WorkerModel) has the
 *  shape `expect` describes (default: the release's figures); label names
 *  the file in the message (default: model.source.label). */
export async function verifyRelease(release, model, { expect, label = model.source.label } = {}) {
  const mismatch = shapeMismatch(await model.inspect(), model.source.size, { ...release.figures, ...expect });
  if (mismatch) throw mismatchError(release, label, mismatch);
}

/**
 * A failed download of a release in plain words. A fetch that failed without
 * an answer is told apart by what the caller's context knows: offline
 * (navigator.onLine false), or a cross-origin URL in a browser (a context
 * with a location), where CORS is the usual cause: the browser hides which.
 * `where` is injectable for tests.
 */
export function releaseError(release, error, url, where = { online: globalThis.navigator?.onLine, origin: globalThis.location?.origin }) {
  if (error?.code !== 'NETWORK' && error?.code !== 'HTTP') return error;
  const { name } = release;
  const href = String(url);
  const host = URL.canParse(href) ? new URL(href).host : href;
  let code = error.code;
  let message;
  if (error.code === 'HTTP') {
    const { status } = error;
    message = status === 404 ? `${name} is not at ${href} (HTTP 404): the file was moved or renamed; pass its new address as url`
      : status === 401 || status === 403 ? `${host} refused to send ${name} (HTTP ${status}): the repository is gated or ` +
        `private. Download ${release.file} where you are signed in to Hugging Face, then load the file`
        : status >= 500 ? `${host} failed to send ${name} (HTTP ${status}); try again later`
          : `${host} answered HTTP ${status} for ${name}`;
  } else if (where.online === false) {
    code = 'OFFLINE';
    message = `This device is offline and ${name} is not cached yet: connect once to download it (${host}); ` +
      'after that it loads offline';
  } else if (where.origin && URL.canParse(href) && new URL(href).origin !== where.origin) {
    code = 'CORS';
    message = `The browser blocked the download of ${name} from ${host}: that server does not allow this page ` +
      'to read it (CORS), or it could not be reached';
  } else {
    message = `${name} could not be downloaded from ${host}: ${error.message}. Check the connection`;
  }
  const plain = new NeedleError(message, code);
  if (error.status !== undefined) plain.status = error.status;
  plain.cause = error;
  return plain;
}

/** Drops a rejected archive from the archive cache, so the next visit fetches again. */
async function forget(url, cache) {
  const href = resolve(url)?.href;
  if (cache === false || !href) return;
  try {
    const store = cache ?? (typeof caches === 'undefined' ? null : await caches.open(ARCHIVE_CACHE));
    await store?.delete?.(href);
  } catch { /* no cache to clean (e.g. an opaque origin) */ }
}

/** What loadModel gets for url: an http(s) URL asks for the bytes as stored
 *  (Accept-Encoding: identity, which Node sends; browsers drop that header
 *  and unpack on their own, which the size cap bounds), anything else as is. */
function archiveSource(url) {
  const href = resolve(url);
  return href && /^https?:$/.test(href.protocol) ? new Request(href, { headers: { 'accept-encoding': 'identity' } }) : url;
}

/** url as a URL, relative to the page where there is one; null for a path. */
function resolve(url) {
  const base = globalThis.location?.href;
  return URL.canParse(String(url), base) ? new URL(String(url), base) : null;
}

/** SHA-256 of bytes as 64 lowercase hex digits (crypto.subtle: browsers' secure contexts, Node). */
async function sha256(bytes) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) {
    throw new NeedleError('this page is not a secure context (https or localhost), so the browser offers no ' +
      'SHA-256 to check the download with: open the page over https (or pass expect: { sha256: null } to check its shape only)',
    'INSECURE');
  }
  return Array.from(new Uint8Array(await subtle.digest('SHA-256', bytes)), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Reads an opened source into one buffer of the expected size; the guard
 *  stops it as soon as more arrives. Returns the bytes that came. */
async function collect(opened, figures, guard, onProgress) {
  const bytes = new Uint8Array(figures.size);
  let loaded = 0;
  const truncated = (why) => new NeedleError(`${opened.label} is truncated: the download broke after ${loaded} of ` +
    `${figures.size} bytes${why ? ` (${why})` : ''}`, 'TRUNCATED');
  try {
    for await (const chunk of opened.chunks) {
      guard.count(chunk);
      bytes.set(chunk, loaded);
      loaded += chunk.length;
      onProgress?.({ loaded, total: figures.size });
    }
  } catch (error) {
    guard.throwIfStopped();
    throw error instanceof NeedleError ? error : truncated(error.message);
  }
  guard.throwIfStopped();
  if (opened.total !== undefined && loaded < opened.total) throw truncated();
  return loaded === bytes.length ? bytes : bytes.subarray(0, loaded);
}

/** Downloads the release's archive from url and checks its bytes; resolves
 *  with { bytes, opened } (opened: openSource's, to settle once loaded). */
async function download(release, url, figures, { signal, cache, onProgress, timeoutMs, idleTimeoutMs }) {
  const label = resolve(url)?.href ?? String(url);
  const guard = guardDownload({
    what: `the download of ${release.name}`, size: figures.size, signal, timeoutMs, idleTimeoutMs,
    tooLarge: (loaded) => mismatchError(release, label, { what: 'size', actual: loaded, expected: figures.size, stopped: true }),
  });
  let opened;
  try {
    opened = await openSource(archiveSource(url), { signal: guard.signal, cache });
    // A length announced is checked before a byte is read.
    if (opened.total !== undefined && opened.total !== figures.size) {
      throw mismatchError(release, label, { what: 'size', actual: opened.total, expected: figures.size });
    }
    const bytes = await collect(opened, figures, guard, onProgress);
    const tag = bytes.length >= 4 ? new DataView(bytes.buffer).getUint32(0, true) : undefined;
    const mismatch = bytesMismatch({ size: bytes.length, tag, sha256: figures.sha256 && await sha256(bytes) }, figures);
    if (mismatch) throw mismatchError(release, label, mismatch);
    return { bytes, opened };
  } catch (error) {
    const failure = guard.failure(error);
    await opened?.settle?.(false);
    if (opened?.fromCache && failure.code === release.code) await forget(url, cache);
    throw failure;
  } finally {
    guard.stop();
  }
}

/**
 * Loads a release (see loadNeedle2 in needle2.js for the options), checks
 * it is that archive, and returns the model (a worker model in pages, as
 * loadModel). model.source: { size, label (the URL), fromCache, cacheError }.
 */
export async function loadRelease(release, options = {}) {
  checkKeys(release.loader, options, OPTIONS);
  const { url = release.url, expect, signal, cache, onProgress, timeoutMs, idleTimeoutMs, ...load } = options;
  const figures = figuresOf(release, expect);
  let downloaded;
  try {
    downloaded = await download(release, url, figures, { signal, cache, onProgress, timeoutMs, idleTimeoutMs });
  } catch (error) {
    throw releaseError(release, error, url);
  }
  const { bytes, opened } = downloaded;
  let model;
  try {
    model = await loadModel(bytes, { ...load, signal, transfer: true }); // bytes go over to the worker
    await verifyRelease(release, model, { expect: figures, label: opened.label });
  } catch (error) {
    await model?.free();
    await opened.settle?.(false);
    if (opened.fromCache && (error.code === release.code || error.code === STATUS.FORMAT)) await forget(url, cache);
    throw error;
  }
  const cacheError = await opened.settle?.(true);
  model.source = { ...model.source, label: opened.label, fromCache: !!opened.fromCache, cacheError };
  return model;
}
