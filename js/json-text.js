// json-text.js: values the caller gives (tool declarations, tool results, an
// OpenAI request) as JSON text, with every value JSON cannot hold refused as
// a NeedleError that names where it is (a JSON pointer), never the TypeError
// or RangeError JSON.stringify would throw; and how an error message shows a
// value.

import { NeedleError, STATUS } from './engine.js';

/** A value as an error message shows it: a string quoted, a number as it is, else its kind. */
export function shown(value) {
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 40));
  if (typeof value === 'bigint') return `${value}n`;
  if (value === null || value === undefined || typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'object') return Array.isArray(value) ? 'an array' : 'an object';
  return `a ${typeof value}`;
}

/** Nesting JSON values may have: far past any real tool result or schema,
 *  and far below where JSON.stringify runs out of stack (about 5,000). */
const MAX_JSON_DEPTH = 256;

/** A JSON pointer of keys, cut after 8 of them (a deep one would fill the message). */
function pointerOf(keys) {
  const shownKeys = keys.slice(0, 8).map((k) => `/${String(k).replace(/~/g, '~0').replace(/\//g, '~1')}`);
  return shownKeys.join('') + (keys.length > 8 ? '/…' : '');
}

/**
 * value as JSON text. What JSON.stringify would throw a TypeError or a
 * RangeError for instead calls fail(pointer, problem), whose error is thrown:
 * a BigInt, a cycle, nesting deeper than MAX_JSON_DEPTH, no value at all
 * (undefined, a function), or a toJSON or getter that throws.
 */
export function jsonText(value, fail) {
  // The containers being written, outermost first, and their keys: the
  // replacer runs before each value is written, so the stack above the
  // holder's level has been written out and is popped.
  const path = [];
  const keys = [];
  const level = new Map(); // container -> its index in path, while written
  let top = null;
  let text;
  try {
    text = JSON.stringify(value, function check(key, v) {
      top ??= this;
      const depth = this === top ? 0 : level.get(this) + 1;
      while (path.length > depth) {
        level.delete(path.pop());
        keys.pop();
      }
      const at = () => pointerOf([...keys.slice(1), ...(this === top ? [] : [key])]);
      if (typeof v === 'bigint') throw fail(at(), 'is a BigInt, which JSON cannot hold: give String(n) or Number(n)');
      if (v === null || typeof v !== 'object') return v;
      if (level.has(v)) throw fail(at(), `refers back to ${pointerOf(keys.slice(1, level.get(v) + 1)) || 'the top'}: a circular value, which JSON cannot hold`);
      if (path.length >= MAX_JSON_DEPTH) throw fail(at(), `is nested deeper than ${MAX_JSON_DEPTH} levels`);
      level.set(v, path.length);
      path.push(v);
      keys.push(key);
      return v;
    });
  } catch (cause) {
    if (cause instanceof NeedleError) throw cause;
    const error = fail('', `cannot be written as JSON: ${cause?.message ?? cause}`);
    error.cause = cause;
    throw error;
  }
  if (text === undefined) throw fail('', `is ${shown(value)}: not a JSON value`);
  return text;
}

/** fail() for jsonText: a NeedleError (STATUS.ARGUMENT) naming what and where. */
export const refuse = (what) => (pointer, problem) => new NeedleError(`${what}${pointer ? ` at ${pointer}` : ''} ${problem}`, STATUS.ARGUMENT);
