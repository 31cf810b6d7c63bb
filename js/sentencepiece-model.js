// sentencepiece-model.js: reads a SentencePiece `.model` file (a protobuf
// ModelProto) with a small hand-written protobuf reader, and turns it into the
// RAW tokenizer blob of a .cact archive (spec section 6):
//   header: u32 pieceCount, padId, eosId, bosId, unknownId; u8 addDummyPrefix,
//           u8 byteFallback; u16 pad (0)      then per piece: f32 score,
//           u8 type (0 normal, 1 unknown, 2 control, 3 user-defined, 4 byte),
//           u16 length, UTF-8 surface.
// The blob can only express a BPE model with identity normalisation and no
// whitespace collapsing, so anything else is refused rather than converted
// into a tokenizer that would silently disagree with SentencePiece.

// ModelProto field numbers (sentencepiece_model.proto).
const MODEL = { pieces: 1, trainerSpec: 2, normalizerSpec: 3 };
const PIECE = { piece: 1, score: 2, type: 3 };
const TRAINER = { modelType: 3, byteFallback: 35, unkId: 40, bosId: 41, eosId: 42, padId: 43 };
const NORMALIZER = { name: 1, charsmap: 2, addDummyPrefix: 3, removeExtraWhitespaces: 4,
  escapeWhitespaces: 5 };
// SentencePiece piece types (1 NORMAL .. 6 BYTE) to blob types; 5 UNUSED has no blob type.
const TYPE_TO_BLOB = new Map([[1, 0], [2, 1], [3, 2], [4, 3], [6, 4]]);
const MODEL_TYPE_BPE = 2;

class ProtoReader {
  constructor(bytes, start = 0, end = bytes.length) {
    this.bytes = bytes;
    this.pos = start;
    this.end = end;
  }

  done() { return this.pos >= this.end; }

  varint() { // as a BigInt: int32 fields store negative values in ten bytes
    let value = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.pos >= this.end) throw new Error(`protobuf: varint runs past byte ${this.end}`);
      const b = this.bytes[this.pos++];
      value |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return value;
    }
    throw new Error(`protobuf: varint longer than 10 bytes at byte ${this.pos}`);
  }

  // Returns { field, wire } of the next key.
  key() {
    const k = Number(this.varint() & 0xffffffffn);
    return { field: k >>> 3, wire: k & 7 };
  }

  // Returns the [start, end) byte range of a length-delimited field.
  span() {
    const len = this.varint();
    if (len > BigInt(this.end - this.pos)) {
      throw new Error(`protobuf: field of ${len} bytes at byte ${this.pos} runs past byte ${this.end}`);
    }
    const start = this.pos;
    this.pos += Number(len);
    return [start, this.pos];
  }

  fixed32() {
    if (this.end - this.pos < 4) throw new Error(`protobuf: fixed32 runs past byte ${this.end}`);
    const view = new DataView(this.bytes.buffer, this.bytes.byteOffset + this.pos, 4);
    this.pos += 4;
    return view;
  }

  skipField(wire) {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.span();
    else if (wire === 5) this.pos += 4;
    else throw new Error(`protobuf: unsupported wire type ${wire} at byte ${this.pos}`);
    if (this.pos > this.end) throw new Error(`protobuf: field runs past byte ${this.end}`);
  }

  // Calls visit(field, wire) for every field; visit returns true when it read the value.
  forEach(visit) {
    while (!this.done()) {
      const { field, wire } = this.key();
      if (!visit.call(this, field, wire)) this.skipField(wire);
    }
  }
}

function expectWire(wire, expected, what) {
  if (wire !== expected) throw new Error(`sentencepiece: ${what} has wire type ${wire}, expected ${expected}`);
}

const int32 = (v) => Number(BigInt.asIntN(32, v));

function readPiece(bytes, [start, end], index) {
  const piece = { surface: new Uint8Array(0), score: 0, type: 1 };
  new ProtoReader(bytes, start, end).forEach(function (field, wire) {
    if (field === PIECE.piece) {
      expectWire(wire, 2, `piece ${index} surface`);
      const [s, e] = this.span();
      piece.surface = bytes.subarray(s, e);
    } else if (field === PIECE.score) {
      expectWire(wire, 5, `piece ${index} score`);
      piece.score = this.fixed32().getFloat32(0, true);
    } else if (field === PIECE.type) {
      expectWire(wire, 0, `piece ${index} type`);
      piece.type = int32(this.varint());
    } else return false;
    return true;
  });
  return piece;
}

// Reads a sub-message of scalar fields into fields (field -> BigInt or
// [start, end)); a message that occurs twice merges, the later value winning.
function readFields(bytes, [start, end], fields = new Map()) {
  new ProtoReader(bytes, start, end).forEach(function (field, wire) {
    if (wire === 0) fields.set(field, this.varint());
    else if (wire === 2) fields.set(field, this.span());
    else return false;
    return true;
  });
  return fields;
}

/** Parses a SentencePiece .model into { pieces: [{surface: Uint8Array, score,
 *  type}], trainer: Map, normalizer: Map } (raw protobuf values). */
export function parseSentencePieceModel(bytes) {
  const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const pieces = [];
  const trainer = new Map();
  const normalizer = new Map();
  new ProtoReader(data).forEach(function (field, wire) {
    if (field === MODEL.pieces) {
      expectWire(wire, 2, 'pieces');
      pieces.push(readPiece(data, this.span(), pieces.length));
    } else if (field === MODEL.trainerSpec) {
      expectWire(wire, 2, 'trainer_spec');
      readFields(data, this.span(), trainer);
    } else if (field === MODEL.normalizerSpec) {
      expectWire(wire, 2, 'normalizer_spec');
      readFields(data, this.span(), normalizer);
    } else return false;
    return true;
  });
  return { pieces, trainer, normalizer };
}

function specialId(trainer, field, fallback, name, count) {
  const id = trainer.has(field) ? int32(trainer.get(field)) : fallback;
  if (id < 0 || id >= count) throw new Error(`sentencepiece: ${name} ${id} is not a piece id (0..${count - 1})`);
  return id;
}

// Refuses models whose encoding the blob cannot express.
function checkSupported(trainer, normalizer) {
  const modelType = trainer.has(TRAINER.modelType) ? Number(trainer.get(TRAINER.modelType)) : 1;
  if (modelType !== MODEL_TYPE_BPE) throw new Error(`sentencepiece: model_type ${modelType} is not BPE (2)`);
  const charsmap = normalizer.get(NORMALIZER.charsmap);
  if (charsmap && charsmap[1] > charsmap[0]) {
    throw new Error('sentencepiece: the normalizer has a character map; only identity normalisation is supported');
  }
  const flag = (field, fallback) => (normalizer.has(field) ? normalizer.get(field) !== 0n : fallback);
  if (flag(NORMALIZER.removeExtraWhitespaces, true)) {
    throw new Error('sentencepiece: remove_extra_whitespaces is set; the blob cannot express it');
  }
  if (!flag(NORMALIZER.escapeWhitespaces, true)) {
    throw new Error('sentencepiece: escape_whitespaces is off; the blob cannot express it');
  }
}

/** Converts a SentencePiece .model (bytes) into the RAW tokenizer blob. */
export function tokenizerBlobFromModel(bytes) {
  const { pieces, trainer, normalizer } = parseSentencePieceModel(bytes);
  if (pieces.length === 0) throw new Error('sentencepiece: the model has no pieces');
  checkSupported(trainer, normalizer);
  const count = pieces.length;
  const ids = [specialId(trainer, TRAINER.padId, -1, 'pad_id', count),
    specialId(trainer, TRAINER.eosId, 2, 'eos_id', count),
    specialId(trainer, TRAINER.bosId, 1, 'bos_id', count),
    specialId(trainer, TRAINER.unkId, 0, 'unk_id', count)];
  const addDummyPrefix = normalizer.has(NORMALIZER.addDummyPrefix)
    ? normalizer.get(NORMALIZER.addDummyPrefix) !== 0n : true;
  const byteFallback = trainer.has(TRAINER.byteFallback) && trainer.get(TRAINER.byteFallback) !== 0n;

  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let size = 24;
  for (const [i, p] of pieces.entries()) {
    if (!TYPE_TO_BLOB.has(p.type)) throw new Error(`sentencepiece: piece ${i} has type ${p.type}, which the blob cannot hold`);
    if (p.surface.length > 0xffff) throw new Error(`sentencepiece: piece ${i} is longer than 65535 bytes`);
    try { utf8.decode(p.surface); } catch { throw new Error(`sentencepiece: piece ${i} is not valid UTF-8`); }
    size += 7 + p.surface.length;
  }
  const blob = new Uint8Array(size);
  const view = new DataView(blob.buffer);
  view.setUint32(0, count, true);
  ids.forEach((id, k) => view.setUint32(4 + 4 * k, id, true));
  blob[20] = addDummyPrefix ? 1 : 0;
  blob[21] = byteFallback ? 1 : 0;
  let off = 24;
  for (const p of pieces) {
    view.setFloat32(off, p.score, true);
    blob[off + 4] = TYPE_TO_BLOB.get(p.type);
    view.setUint16(off + 5, p.surface.length, true);
    blob.set(p.surface, off + 7);
    off += 7 + p.surface.length;
  }
  return blob;
}
