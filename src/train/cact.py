"""Reads a .cact archive back into dense float64 tensors (shared/seed layout):
the weights the engine computes with, for the trainer's three-way check."""

import math
import struct

import numpy as np

HEADER_BYTES = 120
RECORD_BYTES = 44
CODEBOOK_OFFSETS = {2: 0, 3: 4, 4: 12}
DTYPE_FP16, DTYPE_FP32, DTYPE_CQ, DTYPE_RAW = 1, 2, 3, 4


def hadamard(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / math.sqrt(n)


def read_records(data):
    count, codebook_len = struct.unpack_from("<II", data, 4)
    codebook = np.frombuffer(data, "<f4", codebook_len, HEADER_BYTES).astype(np.float64)
    base = HEADER_BYTES + codebook_len * 4
    records = []
    for i in range(count):
        at = base + i * RECORD_BYTES
        dtype, rank = struct.unpack_from("<BB", data, at)
        shape = list(struct.unpack_from("<4I", data, at + 4))[:rank]
        offset, size, group, bits = struct.unpack_from("<QQII", data, at + 20)
        records.append(dict(dtype=dtype, shape=shape, offset=offset, bytes=size, group=group, bits=bits))
    return codebook, records


def dequantise_cq(data, r, codebook, archive_group):
    rows, cols = r["shape"]
    bits, group = r["bits"], r["group"]
    padded = -(-cols // group) * group
    row_bytes = padded * bits // 8
    packed = np.frombuffer(data, np.uint8, rows * row_bytes, r["offset"]).reshape(rows, row_bytes)
    bitstream = np.unpackbits(packed, axis=1, bitorder="little").reshape(rows, padded, bits)
    idx = (bitstream * (1 << np.arange(bits))).sum(-1)
    levels = codebook[CODEBOOK_OFFSETS[bits]:CODEBOOK_OFFSETS[bits] + (1 << bits)]
    # Header levels are divided by sqrt of the archive's group (the
    # embedding's); a record of another group rescales them.
    levels = levels * math.sqrt(archive_group / group)
    groups = padded // group
    norms = np.frombuffer(data, "<f2", rows * groups, r["offset"] + rows * row_bytes)
    rotated = levels[idx].reshape(rows, groups, group) * norms.astype(np.float64).reshape(rows, groups, 1)
    return (rotated @ hadamard(group)).reshape(rows, padded)[:, :cols]


def read_archive(path):
    """[(record, dense float64 array or raw bytes)] in canonical order."""
    data = open(path, "rb").read()
    codebook, records = read_records(data)
    out = []
    for r in records:
        if r["dtype"] == DTYPE_CQ:
            if r["bits"] not in CODEBOOK_OFFSETS:
                raise ValueError(f"record bits {r['bits']}: only 2, 3 and 4 are read here")
            out.append((r, dequantise_cq(data, r, codebook, records[0]["group"])))
        elif r["dtype"] == DTYPE_FP16:
            n = int(np.prod(r["shape"]))
            out.append((r, np.frombuffer(data, "<f2", n, r["offset"]).astype(np.float64).reshape(r["shape"])))
        elif r["dtype"] == DTYPE_FP32:
            n = int(np.prod(r["shape"]))
            out.append((r, np.frombuffer(data, "<f4", n, r["offset"]).astype(np.float64).reshape(r["shape"])))
        else:
            out.append((r, data[r["offset"]:r["offset"] + r["bytes"]]))
    return out
