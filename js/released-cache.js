// released-cache.js (Node): the local copies of the released models that
// `needle-wasm fetch` downloads and that the CLI's commands open by the
// names 'needle2' and 'needle3'. The directory is the caller's (--cache-dir),
// else $NEEDLE_WASM_CACHE, else $XDG_CACHE_HOME/needle-wasm, else
// ~/.cache/needle-wasm. A download goes to <file>.part under the limits of
// download-guard.js; it asks for the bytes as stored and refuses any other
// Content-Encoding (code 'ENCODING'), so the size cap counts what the server
// sends, and hashes them with SHA-256 as they stream. The file is renamed
// only once its size, tag, digest and shape are the release's, and the .part
// is removed on any failure, an abort included (the CLI aborts on SIGINT and
// SIGTERM), so the cache never holds a half or a wrong file.

import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { NeedleError } from './errors.js';
import { NEEDLE2 } from './needle2.js';
import { NEEDLE3 } from './needle3.js';
import { bytesMismatch, figuresOf, mismatchError, releaseError, verifyRelease } from './released-model.js';
import { guardDownload } from './download-guard.js';
import { loadModelInThread } from './load-model.js';

/** The released models by the names the CLI takes. */
const RELEASES = Object.freeze({ needle2: NEEDLE2, needle3: NEEDLE3 });

/** The cache directory: dir if given, else from the environment. */
export function cacheDir(dir, env = process.env) {
  return dir ?? env.NEEDLE_WASM_CACHE ?? join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'needle-wasm');
}

/** The downloaded copy's path (name: 'needle2' or 'needle3'); a READ error saying how to get it when absent. */
export async function cachedRelease(name, dir) {
  const path = join(cacheDir(dir), RELEASES[name].file);
  if (!(await stat(path).catch(() => null))?.isFile()) {
    throw new NeedleError(`${name} is not downloaded yet (no ${path}): run \`needle-wasm fetch ${name}\` first`, 'READ');
  }
  return path;
}

/** Takes bytes as they pass and says { size, tag, sha256 } of them all. */
function digester() {
  const hash = createHash('sha256');
  let size = 0;
  let head = Buffer.alloc(0);
  return {
    update(chunk) {
      hash.update(chunk);
      if (head.length < 4) head = Buffer.concat([head, chunk.subarray(0, 4 - head.length)]);
      size += chunk.length;
    },
    facts: () => ({ size, tag: head.length === 4 ? head.readUInt32LE(0) : undefined, sha256: hash.digest('hex') }),
  };
}

async function fileFacts(path) {
  const digest = digester();
  for await (const chunk of createReadStream(path)) digest.update(chunk);
  return digest.facts();
}

/** Throws release.code (naming label) unless the file at path is the release
 *  `figures` describe; facts: its bytes' { size, tag, sha256 } when known. */
async function verifyFile(release, path, figures, label, facts) {
  const mismatch = bytesMismatch(facts ?? await fileFacts(path), figures);
  if (mismatch) throw mismatchError(release, label, mismatch);
  const model = await loadModelInThread(path, { threads: 1 });
  try {
    await verifyRelease(release, model, { expect: figures, label });
  } finally {
    await model.free();
  }
}

/** The response to a GET of url, refused unless it is the bytes as stored and of the expected length. */
async function request(release, url, figures, guard) {
  let response;
  try {
    response = await fetch(url, { signal: guard.signal, headers: { 'accept-encoding': 'identity' } });
  } catch (error) {
    const why = error.cause?.message ?? error.message;
    throw guard.failure(releaseError(release, new NeedleError(`cannot fetch ${url}: ${why}`, 'NETWORK'), url, {}));
  }
  const refuse = (error) => {
    response.body?.cancel().catch(() => {}); // frees the connection
    return error;
  };
  if (!response.ok) {
    const error = new NeedleError(`cannot fetch ${url}: HTTP ${response.status}`, 'HTTP');
    error.status = response.status;
    throw refuse(releaseError(release, error, url, {}));
  }
  const encoding = response.headers.get('content-encoding');
  if (encoding && encoding !== 'identity') {
    throw refuse(new NeedleError(`${url} came ${encoding}-encoded, though the bytes as stored were asked for: ` +
      'refused, since its size could only be checked after unpacking', 'ENCODING'));
  }
  const announced = response.headers.get('content-length');
  if (announced !== null && Number(announced) !== figures.size) {
    throw refuse(mismatchError(release, url, { what: 'size', actual: Number(announced), expected: figures.size }));
  }
  return response;
}

/** Streams the release from url into the file `to`, under the guard's
 *  limits, reporting progress; resolves with the bytes' { size, tag, sha256 }. */
async function download(release, url, to, figures, { onProgress, signal, timeoutMs, idleTimeoutMs }) {
  const guard = guardDownload({
    what: `the download of ${release.name}`, size: figures.size, signal, timeoutMs, idleTimeoutMs,
    tooLarge: (loaded) => mismatchError(release, url, { what: 'size', actual: loaded, expected: figures.size, stopped: true }),
  });
  const digest = digester();
  let loaded = 0;
  async function* counted(chunks) {
    for await (const chunk of chunks) {
      loaded = guard.count(chunk);
      digest.update(chunk);
      onProgress?.({ loaded, total: figures.size });
      yield chunk;
    }
  }
  try {
    const response = await request(release, url, figures, guard);
    await pipeline(Readable.fromWeb(response.body), counted, createWriteStream(to));
    guard.throwIfStopped();
    return digest.facts();
  } catch (error) {
    if (error instanceof NeedleError) throw error;
    const failure = guard.failure(error);
    if (failure !== error) throw failure;
    throw new NeedleError(`the download of ${url} broke after ${loaded} bytes: ${error.message}`, 'TRUNCATED');
  } finally {
    guard.stop();
  }
}

/**
 * Puts the release `name` ('needle2' or 'needle3') into the cache directory,
 * downloading it unless a copy that passes the checks is there; resolves
 * with { path, downloaded }. options: url (default the release's), dir,
 * expect (as loadNeedle2's), onProgress({ loaded, total }), signal,
 * timeoutMs, idleTimeoutMs.
 */
export async function fetchRelease(name, { url, dir, expect, onProgress, signal, timeoutMs, idleTimeoutMs } = {}) {
  const release = RELEASES[name];
  const figures = figuresOf(release, expect);
  const path = join(cacheDir(dir), release.file);
  if (await verifyFile(release, path, figures, path).then(() => true, () => false)) return { path, downloaded: false };
  await mkdir(dirname(path), { recursive: true });
  const from = url ?? release.url;
  const part = `${path}.part`;
  try {
    const facts = await download(release, from, part, figures, { onProgress, signal, timeoutMs, idleTimeoutMs });
    await verifyFile(release, part, figures, from, facts);
    await rename(part, path);
  } finally {
    await rm(part, { force: true });
  }
  return { path, downloaded: true };
}
