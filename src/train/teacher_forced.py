"""Where a trained base goes wrong: teacher-forced errors on fresh commands.

    /usr/bin/python3 src/train/teacher_forced.py build/train [--heldout] [--count 250]

Feeds each command's reference target and counts the target tokens whose
greedy prediction differs, split into value tokens (the argument values the
model copies from the query) and structure tokens (names, keys, markers,
the reasoning's wording), plus whole targets right. Fresh commands come from
the training templates (seed 101, half the values invented); --heldout uses
the held-out templates and values. The model runs as trained (CQ and int8 activations).
"""

import argparse
import json
import os
import sys

import sentencepiece as spm
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train as T  # noqa: E402
from generate import generate  # noqa: E402


def values(turn):
    """The string argument values of a turn's calls (list items included)."""
    out = []
    for call in turn["calls"]:
        for v in call["arguments"].values():
            items = v if isinstance(v, list) else [v]
            out += [x for x in items if isinstance(x, str)]
    return out


def target_kinds(sp, renderer, turn):
    """(ids, kinds) of a turn's target: kind 'value' where a token overlaps a
    quoted argument value ('...' in the reasoning, "..." in the call)."""
    text = renderer.target(turn)
    spans = []
    for v in values(turn):
        for quote in ("'", '"'):
            at = text.find(quote + v + quote)
            while at >= 0:
                spans.append((at + 1, at + 1 + len(v)))
                at = text.find(quote + v + quote, at + 1)
    pieces = sp.encode(text, out_type="immutable_proto").pieces
    kinds = ["value" if any(p.begin < e and p.end > b for b, e in spans) else "structure" for p in pieces]
    return [p.id for p in pieces], kinds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run", help="a training directory: checkpoint.pt, tokenizer.model, weights.json")
    ap.add_argument("--heldout", action="store_true")
    ap.add_argument("--count", type=int, default=250)
    args = ap.parse_args()
    torch.set_num_threads(2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.run, "tokenizer.model"))
    renderer = T.Renderer(sp, T.load_tools())
    model = T.load_run(args.run)
    model.qat = model.q8 = True
    fresh, heldout = generate(101, args.count, args.count, 0.5)
    counts = {"value": [0, 0], "structure": [0, 0]}
    whole = 0
    with torch.no_grad():
        for ex in (heldout if args.heldout else fresh)[:args.count]:
            ids, mask = renderer.example(ex)
            # The example's target tokens in order, with their kinds (the EOS is structure).
            kinds = [k for turn in ex["turns"] for k in target_kinds(sp, renderer, turn)[1]] + ["structure"]
            where = torch.tensor([mask[1:]]) > 0
            x = torch.tensor([ids])
            right = (model(x[:, :-1], at=where).argmax(-1) == x[:, 1:][where]).tolist()
            whole += all(right)
            for kind, ok in zip(kinds, right):
                counts[kind][0] += 1
                counts[kind][1] += not ok
    print(json.dumps({"commands": args.count, "heldout": args.heldout, "whole_right": whole,
                      **{f"{k}_tokens": n for k, (n, _) in counts.items()},
                      **{f"{k}_wrong": round(e / max(n, 1), 4) for k, (n, e) in counts.items()}}))


if __name__ == "__main__":
    main()
