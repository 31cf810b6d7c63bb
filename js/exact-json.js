// exact-json.js: JSON.parse that keeps every digit of integers a JS number
// cannot hold. The engine writes calls digit by digit, so an integer argument
// may exceed 2^53; JSON.parse would round 975353535353535353 to
// 975353535353535400. With largeIntegers 'bigint' such integers become
// BigInt, with 'string' their digits as a string; every other value parses as
// JSON.parse parses it ('number', the default, is JSON.parse itself: what
// JSON.stringify, validators and most code expect).

const TOKENS = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

/** JSON.parse(text), unsafe integers as largeIntegers says. */
export function parseExactJson(text, largeIntegers = 'number') {
  if (largeIntegers === 'number') return JSON.parse(text);
  const big = [];
  const tag = `\u0000needle-integer-${Math.random().toString(36).slice(2)}-`;
  const marked = text.replace(TOKENS, (token) => {
    if (token[0] === '"' || /[.eE]/.test(token) || Number.isSafeInteger(Number(token))) return token;
    big.push(token);
    return JSON.stringify(tag + (big.length - 1));
  });
  if (!big.length) return JSON.parse(text);
  return JSON.parse(marked, (_, value) => {
    if (typeof value !== 'string' || !value.startsWith(tag)) return value;
    const digits = big[Number(value.slice(tag.length))];
    return largeIntegers === 'string' ? digits : BigInt(digits);
  });
}
