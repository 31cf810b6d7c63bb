// needle3-standin.js: a stand-in for the released needle3.cact, for tests:
// the released geometry and heads with random weights (js/cact3-writer.js)
// and a synthetic tokenizer lengthened to the released blob's 109,140 bytes,
// so that the archive is the released file's 35,335,380 bytes and passes
// every figure of NEEDLE3_FIGURES but its SHA-256.
import { createHash } from 'node:crypto';
import { writeCact3 } from '../../js/cact3-writer.js';
import { RELEASED3_HEADS } from '../../js/cact3-format.js';
import { makeTestTokenizerBlob, syntheticPieces } from '../../js/cact-writer.js';

const RELEASED_TOKENIZER_BYTES = 109140; // spec section 1: 104,242 B plus the 4,898 its writer lacked

/** The stand-in's bytes and their SHA-256 (hex). Takes a few seconds. */
export function writeNeedle3StandIn() {
  const pieces = syntheticPieces(8192);
  // Lengthen the last pieces (all words) by digits, which no other piece has, so they stay distinct.
  let missing = RELEASED_TOKENIZER_BYTES - makeTestTokenizerBlob(pieces).length;
  for (let i = pieces.length - 1; missing > 0; i--) {
    const add = Math.min(missing, 8);
    pieces[i] += '0'.repeat(add);
    missing -= add;
  }
  const bytes = writeCact3({ tokenizer: makeTestTokenizerBlob(pieces), heads: RELEASED3_HEADS, seed: 1 });
  return { bytes, sha256: createHash('sha256').update(bytes).digest('hex') };
}
