// needle2-cache.js (Node): the local copy of Needle 2 that `needle-wasm fetch`
// downloads and that the CLI's commands open by the name 'needle2'. The
// directory is the caller's (--cache-dir), else $NEEDLE_WASM_CACHE, else
// $XDG_CACHE_HOME/needle-wasm, else ~/.cache/needle-wasm. A download goes to
// needle2.cact.part and is renamed needle2.cact only once it is verified as
// Needle 2 (needle2.js), so the cache never holds a half or a wrong file.

import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { NeedleError, abortError } from './errors.js';
import { NEEDLE2_URL, needle2Error, verifyNeedle2 } from './needle2.js';
import { loadModelInThread } from './load-model.js';

/** The cache directory: dir if given, else from the environment. */
export function cacheDir(dir, env = process.env) {
  return dir ?? env.NEEDLE_WASM_CACHE ?? join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'needle-wasm');
}

export const needle2Path = (dir) => join(cacheDir(dir), 'needle2.cact');

/** The downloaded Needle 2's path; a READ error saying how to get it when absent. */
export async function cachedNeedle2(dir) {
  const path = needle2Path(dir);
  if (!(await stat(path).catch(() => null))?.isFile()) {
    throw new NeedleError(`needle2 is not downloaded yet (no ${path}): run \`needle-wasm fetch needle2\` first`, 'READ');
  }
  return path;
}

/** Throws NOT_NEEDLE2 (naming label) unless the file at path is Needle 2. */
async function verifyFile(path, expect, label) {
  const model = await loadModelInThread(path, { threads: 1 });
  try {
    await verifyNeedle2(model, { expect, label });
  } finally {
    await model.free();
  }
}

/** Streams url into the file `to`, reporting progress; errors in plain words. */
async function download(url, to, { onProgress, signal }) {
  let response;
  try {
    response = await fetch(url, { signal });
  } catch (error) {
    if (signal?.aborted) throw abortError('downloading Needle 2', signal);
    const why = error.cause?.message ?? error.message;
    throw needle2Error(new NeedleError(`cannot fetch ${url}: ${why}`, 'NETWORK'), url, {});
  }
  if (!response.ok) {
    const error = new NeedleError(`cannot fetch ${url}: HTTP ${response.status}`, 'HTTP');
    error.status = response.status;
    throw needle2Error(error, url, {});
  }
  const total = Number(response.headers.get('content-length')) || undefined;
  let loaded = 0;
  async function* counted(chunks) {
    for await (const chunk of chunks) {
      loaded += chunk.length;
      onProgress?.({ loaded, total });
      yield chunk;
    }
  }
  try {
    await pipeline(Readable.fromWeb(response.body), counted, createWriteStream(to));
  } catch (error) {
    if (signal?.aborted) throw abortError('downloading Needle 2', signal);
    throw new NeedleError(`the download of ${url} broke after ${loaded} bytes: ${error.message}`, 'TRUNCATED');
  }
  if (total !== undefined && loaded !== total) {
    throw new NeedleError(`the download of ${url} ended after ${loaded} of ${total} bytes`, 'TRUNCATED');
  }
}

/**
 * Puts a verified Needle 2 into the cache directory, downloading it unless a
 * verified copy is there; resolves with { path, downloaded }.
 * options: url (default NEEDLE2_URL), dir, expect (as loadNeedle2's),
 * onProgress({ loaded, total }), signal.
 */
export async function fetchNeedle2({ url = NEEDLE2_URL, dir, expect, onProgress, signal } = {}) {
  const path = needle2Path(dir);
  if (await verifyFile(path, expect, path).then(() => true, () => false)) return { path, downloaded: false };
  await mkdir(dirname(path), { recursive: true });
  const part = `${path}.part`;
  try {
    await download(url, part, { onProgress, signal });
    await verifyFile(part, expect, url);
    await rename(part, path);
  } finally {
    await rm(part, { force: true });
  }
  return { path, downloaded: true };
}
