// download-guard.js: the limits a download of a released model runs under,
// so that a server cannot hold it or fill it at will: an overall timeout, an
// idle timeout (both NeedleErrors with code 'TIMEOUT') and the expected size
// as a hard cap. Shared by loadNeedle2/loadNeedle3 (released-model.js) and
// `needle-wasm fetch` (released-cache.js), which read the bytes each their
// own way and call count() on every chunk.

import { NeedleError, abortError } from './errors.js';
import { checkNumber } from './options.js';

/** The defaults: generous overall (35 MB at 60 KB/s), short when nothing comes. */
const DOWNLOAD_LIMITS = Object.freeze({ timeoutMs: 10 * 60 * 1000, idleTimeoutMs: 30 * 1000 });

const LONGEST = 2 ** 31 - 1; // setTimeout's longest delay, in ms

const duration = (ms) => (ms >= 60000 && ms % 60000 === 0 ? `${ms / 60000} min` : `${ms / 1000} s`);

/**
 * Guards one download. `signal` (follows the caller's, and aborts when a
 * timeout fires) goes to the fetch; count(chunk) takes each chunk as it
 * arrives: it restarts the idle timer and throws tooLarge(bytes so far) once
 * they pass `size`; failure(error) is what an error of the download means
 * (the timeout, the caller's abort, or that error); stop() ends the timers.
 * what: the download in words ("the download of Needle 2").
 */
export function guardDownload({ what, size, signal, timeoutMs, idleTimeoutMs, tooLarge }) {
  const overallMs = checkNumber('timeoutMs', timeoutMs,
    { min: 0, minOpen: true, max: LONGEST, fallback: DOWNLOAD_LIMITS.timeoutMs });
  const idleMs = checkNumber('idleTimeoutMs', idleTimeoutMs,
    { min: 0, minOpen: true, max: LONGEST, fallback: DOWNLOAD_LIMITS.idleTimeoutMs });
  const controller = new AbortController();
  let timedOut = null;
  const expire = (message) => {
    timedOut = new NeedleError(message, 'TIMEOUT');
    controller.abort(timedOut);
  };
  const follow = () => controller.abort(signal.reason);
  if (signal?.aborted) follow();
  else signal?.addEventListener('abort', follow, { once: true });
  const overall = setTimeout(() => expire(`${what} took longer than ${duration(overallMs)} (timeoutMs)`), overallMs);
  let idle;
  const restartIdle = () => {
    clearTimeout(idle);
    idle = setTimeout(() => expire(`${what} stalled: nothing arrived for ${duration(idleMs)} (idleTimeoutMs)`), idleMs);
  };
  restartIdle(); // also bounds the wait for the server's first answer
  let loaded = 0;
  return {
    signal: controller.signal,
    count(chunk) {
      restartIdle();
      loaded += chunk.length;
      if (loaded > size) throw tooLarge(loaded);
      return loaded;
    },
    failure(error) {
      if (timedOut) return timedOut;
      if (signal?.aborted) return abortError(what, signal);
      return error;
    },
    /** A stream cancelled by the abort may just end: throws the reason then. */
    throwIfStopped() {
      if (controller.signal.aborted) throw this.failure(controller.signal.reason);
    },
    stop() {
      clearTimeout(overall);
      clearTimeout(idle);
      signal?.removeEventListener('abort', follow);
    },
  };
}
