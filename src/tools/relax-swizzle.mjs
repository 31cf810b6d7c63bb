#!/usr/bin/env node
// relax-swizzle.mjs IN OUT: writes a copy of the wasm module IN in which every
// i8x16.swizzle (0xfd 0x0e) is the relaxed-SIMD i8x16.relaxed_swizzle in its
// standard encoding (0xfd 0x80 0x02), for build.sh's relaxed variant.
//
// Why a post-link pass: Debian's LLVM 14 only knows the pre-standard relaxed
// opcodes (relaxed_swizzle was 0xfd 0xa2 0x01), which no engine accepts. Why
// it is exact: relaxed_swizzle equals swizzle for indices below 16, and every
// swizzle in the engine indexes a 16-entry table with a 4-bit value (cq
// kernels); tests/js/wasm-variants.test.js checks the logits against the
// baseline. The pass decodes every instruction of the code section (an
// unknown opcode is an error, never a guess) and re-encodes body sizes.

import { readFileSync, writeFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

class Reader {
  constructor(bytes, at = 0) { this.b = bytes; this.at = at; }
  byte() {
    if (this.at >= this.b.length) throw new Error('truncated module');
    return this.b[this.at++];
  }
  u32() { // also reads the value of an unsigned LEB of any length
    let v = 0, shift = 0, b;
    do { b = this.byte(); v += (b & 0x7f) * 2 ** shift; shift += 7; } while (b & 0x80);
    return v;
  }
  skipLeb() { while (this.byte() & 0x80); }
  skip(n) { this.at += n; if (this.at > this.b.length) throw new Error('truncated module'); }
}

function leb(value) {
  const out = [];
  do {
    let b = value % 128;
    value = Math.floor(value / 128);
    if (value) b |= 0x80;
    out.push(b);
  } while (value);
  return out;
}

const VALTYPES = new Set([0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f]);
const memarg = (r) => { r.skipLeb(); r.skipLeb(); };

// Skips the immediates of a 0xfd (SIMD) instruction with sub-opcode op.
function simdImmediates(r, op) {
  if (op <= 11 || op === 92 || op === 93) memarg(r);
  else if (op === 12 || op === 13) r.skip(16);
  else if (op >= 21 && op <= 34) r.skip(1);
  else if (op >= 84 && op <= 91) { memarg(r); r.skip(1); }
  else if (op > 0x113) throw new Error(`unknown SIMD opcode 0x${op.toString(16)}`);
}

function miscImmediates(r, op) { // 0xfc prefix
  const lebs = { 8: 2, 9: 1, 10: 2, 11: 1, 12: 2, 13: 1, 14: 2, 15: 1, 16: 1, 17: 1 };
  if (op <= 7) return;
  if (!(op in lebs)) throw new Error(`unknown 0xfc opcode ${op}`);
  for (let i = 0; i < lebs[op]; i++) r.skipLeb();
}

// Skips one instruction's immediates; returns true for an i8x16.swizzle.
function instruction(r) {
  const op = r.byte();
  if (op === 0xfd) {
    const sub = r.u32();
    simdImmediates(r, sub);
    return sub === 0x0e;
  }
  if (op === 0xfc) miscImmediates(r, r.u32());
  else if (op >= 0x02 && op <= 0x04) { if (!VALTYPES.has(r.b[r.at])) r.skipLeb(); else r.skip(1); }
  else if (op === 0x0e) { for (let n = r.u32(); n >= 0; n--) r.skipLeb(); }
  else if ([0x0c, 0x0d, 0x10, 0xd2].includes(op) || (op >= 0x20 && op <= 0x26)) r.skipLeb();
  else if (op === 0x11) { r.skipLeb(); r.skipLeb(); }
  else if (op === 0x1c) r.skip(r.u32());
  else if (op >= 0x28 && op <= 0x3e) memarg(r);
  else if (op === 0x3f || op === 0x40 || op === 0xd0) r.skip(1);
  else if (op === 0x41 || op === 0x42) r.skipLeb();
  else if (op === 0x43) r.skip(4);
  else if (op === 0x44) r.skip(8);
  else if (op === 0xfe) { const sub = r.u32(); if (sub === 3) r.skip(1); else memarg(r); }
  else if (!((op <= 0x01) || op === 0x05 || op === 0x0b || op === 0x0f || op === 0x1a || op === 0x1b ||
    (op >= 0x45 && op <= 0xc4) || op === 0xd1)) {
    throw new Error(`unknown opcode 0x${op.toString(16)} at byte ${r.at - 1}`);
  }
  return false;
}

// One function body (without its size prefix) with swizzles relaxed.
function relaxBody(body, counts) {
  const r = new Reader(body);
  for (let n = r.u32(); n > 0; n--) { r.skipLeb(); r.skip(1); } // local declarations
  const out = [body.subarray(0, r.at)];
  let from = r.at;
  while (r.at < body.length) {
    const start = r.at;
    if (instruction(r)) {
      out.push(body.subarray(from, start), Uint8Array.of(0xfd, 0x80, 0x02));
      from = r.at;
      counts.swizzles++;
    }
  }
  out.push(body.subarray(from));
  return Buffer.concat(out);
}

function relaxCode(section, counts) {
  const r = new Reader(section);
  const n = r.u32();
  const parts = [Uint8Array.from(leb(n))];
  for (let i = 0; i < n; i++) {
    const size = r.u32();
    const body = relaxBody(section.subarray(r.at, r.at + size), counts);
    r.skip(size);
    parts.push(Uint8Array.from(leb(body.length)), body);
  }
  return Buffer.concat(parts);
}

/** The relaxed copy of a module and how many swizzles it changed. */
export function relaxSwizzles(bytes) {
  const r = new Reader(bytes, 8);
  const out = [bytes.subarray(0, 8)];
  const counts = { swizzles: 0 };
  while (r.at < bytes.length) {
    const id = r.byte();
    const size = r.u32();
    const content = bytes.subarray(r.at, r.at + size);
    r.skip(size);
    const body = id === 10 ? relaxCode(content, counts) : content;
    out.push(Uint8Array.of(id), Uint8Array.from(leb(body.length)), body);
  }
  return { bytes: Buffer.concat(out), swizzles: counts.swizzles };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === realpathSync(process.argv[1])) {
  const [input, output] = process.argv.slice(2);
  if (!input || !output) {
    console.error('usage: relax-swizzle.mjs IN.wasm OUT.wasm');
    process.exit(2);
  }
  const { bytes, swizzles } = relaxSwizzles(readFileSync(input));
  writeFileSync(output, bytes);
  console.log(`${output}: ${swizzles} i8x16.swizzle -> i8x16.relaxed_swizzle (${bytes.length} bytes)`);
}
