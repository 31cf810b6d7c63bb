// options.js: checks of the caller's numeric options before they reach the
// engine, which takes them as f32 and u32: a NaN, a negative count or a
// topP of 7 would otherwise change silently or fail later naming nothing.
// Each failure is a NeedleError (STATUS.ARGUMENT) naming the option and
// what it may be.

import { NeedleError, STATUS } from './engine.js';

const U32_MAX = 0xffffffff;

function fail(name, value, allowed) {
  return new NeedleError(`option ${name} is ${typeof value === 'string' ? JSON.stringify(value) : String(value)}: ${allowed}`, STATUS.ARGUMENT);
}

/** A finite number in [min, max] (bounds open where said), or the default when undefined. */
export function checkNumber(name, value, { min = -Infinity, max = Infinity, minOpen = false, fallback }) {
  if (value === undefined) return fallback;
  const low = minOpen ? value > min : value >= min;
  if (typeof value !== 'number' || !Number.isFinite(value) || !low || value > max) {
    const range = `${minOpen ? '(' : '['}${min}, ${max}]`;
    throw fail(name, value, `must be a finite number in ${range.replace('Infinity', 'inf')}`);
  }
  return value;
}

/** An integer in [min, max], or the default when undefined. */
export function checkInteger(name, value, { min = 0, max = U32_MAX, fallback }) {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) throw fail(name, value, `must be an integer from ${min} to ${max}`);
  return value;
}

/** The sampler's options with their defaults (greedy), checked. */
export function checkSampling({ temperature, topK, topP, minP, repetitionPenalty, seed } = {}) {
  return {
    temperature: checkNumber('temperature', temperature, { min: 0, max: 1e6, fallback: 0 }),
    topK: checkInteger('topK', topK, { min: 0, max: 1 << 24, fallback: 0 }),
    topP: checkNumber('topP', topP, { min: 0, max: 1, minOpen: true, fallback: 1 }),
    minP: checkNumber('minP', minP, { min: 0, max: 1, fallback: 0 }),
    repetitionPenalty: checkNumber('repetitionPenalty', repetitionPenalty, { min: 0, max: 1e6, minOpen: true, fallback: 1 }),
    seed: checkInteger('seed', seed, { min: 0, max: U32_MAX, fallback: 0 }),
  };
}

/** Throws on an option `where` does not take (a misspelling would otherwise
 *  be ignored), naming it, the nearest known one and all of them. */
export function checkKeys(where, options, known) {
  for (const key of Object.keys(options ?? {})) {
    if (known.includes(key)) continue;
    const near = nearest(key, known);
    const hint = near ? `did you mean ${near}? ` : '';
    throw new NeedleError(`unknown option ${key} of ${where}: ${hint}(${where} takes ${known.join(', ')})`, STATUS.ARGUMENT);
  }
}

/** The known name a misspelt `word` most likely meant: the closest within 2
 *  edits, case aside (the first of equals), or undefined. Also the CLI's hint. */
export function nearest(word, known) {
  let best;
  let bestDistance = 3;
  for (const name of known) {
    const d = distance(name.toLowerCase(), word.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [name, d];
  }
  return best;
}

/** Levenshtein distance, for the hints above. */
function distance(a, b) {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length];
}
