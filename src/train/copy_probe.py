"""Whether a trained base copies by content (issue 12's diagnosis).

    /usr/bin/python3 src/train/copy_probe.py build/train [--count 96]
    /usr/bin/python3 src/train/copy_probe.py src/train/demo-model/needle-demo.cact

Each probe sequence is random pieces with a span of 4-24 random pieces in it,
and the same span again after a marker, at a random distance. A model that
copies by content (an induction head: find the current piece earlier, read
the piece after it) predicts the second span's pieces after its first; one
that learned a fixed distance, or none, does not. Also counted: predictions
of the current piece again, the signature of a head that finds the earlier
copy but does not step past it. Copying a value the model has never seen
(a held-out name, an invented word) needs exactly this.
"""

import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train as T  # noqa: E402
from model import Needle  # noqa: E402

FIRST_PIECE = 15  # after the specials, the chat markers and the word boundary
MARKER = 4  # <|im_start|>, before the second span


def probe_batch(count, vocabulary, length, gen):
    """(ids, where) of `count` sequences of `length`: where marks the
    positions whose next piece is the second span's second piece or later."""
    ids = torch.randint(FIRST_PIECE, vocabulary, (count, length), generator=gen)
    where = torch.zeros(count, length - 1, dtype=torch.bool)
    ids[:, 0] = T.BOS
    for row in range(count):
        n = int(torch.randint(4, 25, (), generator=gen))
        first = 1 + int(torch.randint(0, length - 2 * n - 2, (), generator=gen))
        second = int(torch.randint(first + n + 1, length - n, (), generator=gen))
        span = ids[row, first:first + n].clone()
        ids[row, second - 1] = MARKER
        ids[row, second:second + n] = span
        where[row, second:second + n - 1] = True
    return ids, where


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run", help="a training directory (checkpoint.pt, weights.json) or an archive of train.py's geometry")
    ap.add_argument("--count", type=int, default=96)
    ap.add_argument("--length", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(2)
    if args.run.endswith(".cact"):
        geometry = T.GEOMETRY
        model = Needle(geometry, T.bit_map, T.GROUP).double()
        T.load_archive(model, args.run)
    else:
        model = T.load_run(args.run)
        geometry = model.g
    ids, where = probe_batch(args.count, geometry["vocabulary"], args.length, torch.Generator().manual_seed(1))
    with torch.no_grad():
        guess = model(ids[:, :-1], at=where).argmax(-1)
    copied = (guess == ids[:, 1:][where]).float().mean().item()
    repeated = (guess == ids[:, :-1][where]).float().mean().item()
    print(json.dumps({"pieces": int(where.sum()), "copied": round(copied, 4), "current_piece_again": round(repeated, 4)}))


if __name__ == "__main__":
    main()
