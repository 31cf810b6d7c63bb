"""The probe heads of the demo model, trained on the frozen base (spec section 4).

contrastive  retrieval: a query (BOS + encode(query)) against the compact JSON
             of each tool (BOS + encode(json)), cosine similarity, every tool
             of the catalogue as the negatives of a query (multi-positive
             InfoNCE: a command that makes two calls has two right tools).
confidence   a correctness classifier over the conversation from BOS through
             "</tool_call><|im_end|>": the training target (right) against
             corrupted calls (wrong tool, wrong value, missing argument, a
             call where none fits, none where one does).

The base runs with the deployment numerics (CQ and A8 fake quantisation), as
the engine pools the cells it computes.
"""

import copy
import json
import random

import torch
import torch.nn.functional as F

BOS, PAD = 2, 0


def pad_batch(seqs):
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), PAD, dtype=torch.int64)
    for r, s in enumerate(seqs):
        ids[r, :len(s)] = torch.tensor(s)
    return ids, ids != PAD


def cells_of(model, seqs):
    ids, valid = pad_batch(seqs)
    with torch.no_grad():
        _, cells = model(ids, want_cells=True)
    return cells, valid


def embed(model, cells, valid):
    out = model.head("contrastive", cells, valid)
    return out / torch.sqrt(out.pow(2).sum(-1, keepdim=True) + 1e-12)


def train_contrastive(model, renderer, train, log, steps=400, batch=64, tau=0.05, seed=1):
    names = list(renderer.tools)
    tool_cells = cells_of(model, [[BOS] + renderer.encode(json.dumps(renderer.tools[n], separators=(",", ":")))
                                  for n in names])
    items = [(ex["turns"][0]["query"], {c["name"] for c in ex["turns"][0]["calls"]})
             for ex in train if ex["kind"] in ("call", "multi", "followup")]
    rng = random.Random(seed)
    params = [model.raw(f"contrastive_head.{k}") for k in ("probes", "proj", "bias")]
    opt = torch.optim.Adam(params, lr=3e-3)
    for step in range(steps):
        chosen = rng.sample(items, batch)
        cells, valid = cells_of(model, [[BOS] + renderer.encode(q) for q, _ in chosen])
        sim = embed(model, cells, valid) @ embed(model, *tool_cells).t() / tau
        positive = torch.tensor([[n in tools for n in names] for _, tools in chosen])
        loss = (torch.logsumexp(sim, 1) - torch.logsumexp(sim.masked_fill(~positive, float("-inf")), 1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 50 == 0:
            log(f"contrastive step {step + 1}/{steps} loss {loss.item():.4f}")


def corrupt(ex, tools, rng, values):
    """A copy of a single-turn example whose call is wrong, and what was done."""
    ex = copy.deepcopy(ex)
    turn = ex["turns"][0]
    calls = turn["calls"]
    if not calls:
        # A call where none fits: any declared tool with arguments from another example.
        name = rng.choice(ex["tools"])
        turn["calls"] = [{"name": name, "arguments": rng.choice(values[name])}] if values[name] else []
        return ex, "call where none fits"
    call = rng.choice(calls)
    kinds = ["wrong tool", "wrong value", "missing argument", "no call"]
    kind = rng.choice(kinds)
    if kind == "wrong tool":
        others = [n for n in ex["tools"] if n != call["name"]]
        if not others:
            kind = "wrong value"
        else:
            call["name"] = rng.choice(others)
    if kind == "missing argument":
        if len(call["arguments"]) > 0:
            del call["arguments"][rng.choice(list(call["arguments"]))]
        else:
            kind = "no call"
    if kind == "wrong value":
        if not call["arguments"]:
            kind = "no call"
        else:
            key = rng.choice(list(call["arguments"]))
            pool = [a[key] for a in values[call["name"]] if key in a and a[key] != call["arguments"][key]]
            if pool:
                call["arguments"][key] = rng.choice(pool)
            else:
                kind = "no call"
    if kind == "no call":
        turn["calls"] = []
    return ex, kind


def train_confidence(model, renderer, train, log, steps=500, batch=32, seed=2):
    single = [ex for ex in train if ex["kind"] in ("call", "multi", "refusal")]
    values = {n: [] for n in renderer.tools}
    for ex in single:
        for c in ex["turns"][0]["calls"]:
            values[c["name"]].append(c["arguments"])
    rng = random.Random(seed)
    params = [model.raw(f"confidence_head.{k}") for k in ("probes", "proj", "bias")]
    opt = torch.optim.Adam(params, lr=3e-3)
    for step in range(steps):
        seqs, labels = [], []
        for ex in rng.sample(single, batch):
            right = rng.random() < 0.5
            if not right:
                ex, _ = corrupt(ex, renderer.tools, rng, values)
            seqs.append(renderer.example(ex, eos=False)[0])
            labels.append(1.0 if right else 0.0)
        cells, valid = cells_of(model, seqs)
        logit = model.head("confidence", cells, valid)[:, 0]
        loss = F.binary_cross_entropy_with_logits(logit, torch.tensor(labels))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 50 == 0:
            acc = ((logit > 0).float() == torch.tensor(labels)).float().mean().item()
            log(f"confidence step {step + 1}/{steps} loss {loss.item():.4f} batch accuracy {acc:.2f}")


def freeze_quantised(model):
    """The base's CQ matrices replaced by their dequantised values once
    (the base is frozen, so fake quantisation per forward would redo it)."""
    model.qat = True
    with torch.no_grad():
        for name in model.names():
            if "_head." not in name and model.raw(name).dim() == 2:
                model.raw(name).copy_(model.w(name))
    model.qat, model.a8 = False, True


def train_heads(model, renderer, train, args, log):
    freeze_quantised(model)
    for name, p in model.p.items():
        p.requires_grad_("_head__" in name)
    train_contrastive(model, renderer, train, log, steps=args.contrastive_steps)
    train_confidence(model, renderer, train, log, steps=args.confidence_steps)
