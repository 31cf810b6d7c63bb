"""The probe heads of the demo model, trained on the frozen base (spec section 4).

contrastive  retrieval: a query (BOS + encode(query)) against the compact JSON
             of each tool (BOS + encode(json)), cosine similarity, every tool
             of the catalogue as the negatives of a query; a command that
             makes two calls has two right tools, each scored against the
             wrong ones alone (InfoNCE per right tool).
confidence   a correctness classifier over the conversation from BOS through
             "</tool_call><|im_end|>": the training target (right) against
             corrupted calls (wrong tool, wrong value, missing argument, a
             call where none fits, none where one does).

The base runs with the deployment numerics (CQ weights and fast mode's int8
activations, faked), as
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


def start_as_mean(model, kind):
    """Probes near zero, so that pooling starts as a mean over every cell and
    the gradient reaches every cell: large random probes lock the softmax onto
    one cell whose features say little about the query or the call. (Retrieval
    in PyTorch on the held-out commands, one base: 85.6% top-5 from the
    model's initial probes, 93.8% from these.)"""
    with torch.no_grad():
        model.raw(f"{kind}_head.probes").normal_(0.0, 0.01)


def each_right_tool_loss(sim, positive):
    """InfoNCE of every right tool against the wrong ones alone. With the
    right tools pooled in one softmax term instead, the loss is met by any one
    of them, and a command of two or three calls found only one of its tools
    (held-out multi-call commands with every tool among the five retrieved, in
    PyTorch on one base: 48 of 60 pooled, 57 of 60 each)."""
    wrong = torch.logsumexp(sim.masked_fill(positive, float("-inf")), 1, keepdim=True)
    per_tool = torch.logaddexp(sim, wrong) - sim
    return (per_tool * positive).sum() / positive.sum()


def train_contrastive(model, renderer, train, log, steps=400, batch=64, tau=0.1, seed=1):
    names = list(renderer.tools)
    tool_cells = cells_of(model, [[BOS] + renderer.encode(json.dumps(renderer.tools[n], separators=(",", ":")))
                                  for n in names])
    items = [(ex["turns"][0]["query"], {c["name"] for c in ex["turns"][0]["calls"]})
             for ex in train if ex["kind"] in ("call", "multi", "followup")]
    rng = random.Random(seed)
    start_as_mean(model, "contrastive")
    params = [model.raw(f"contrastive_head.{k}") for k in ("probes", "proj", "bias")]
    opt = torch.optim.Adam(params, lr=1e-2)
    for step in range(steps):
        chosen = rng.sample(items, batch)
        cells, valid = cells_of(model, [[BOS] + renderer.encode(q) for q, _ in chosen])
        sim = embed(model, cells, valid) @ embed(model, *tool_cells).t() / tau
        positive = torch.tensor([[n in tools for n in names] for _, tools in chosen])
        loss = each_right_tool_loss(sim, positive)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 50 == 0:
            log(f"contrastive step {step + 1}/{steps} loss {loss.item():.4f}")


def garbled(value, rng):
    """value as the model most often gets a held-out value wrong: cut short
    ("Ben" for "Bengali"), its last word dropped, or a piece of it repeated
    ("Casablanlanca")."""
    words = value.split()
    how = rng.randrange(3)
    if how == 0 and len(words) > 1:
        return " ".join(words[:-1])
    cut = rng.randrange(1, len(value) - 1)
    if how == 2:
        start = rng.randrange(max(0, cut - 3), cut)
        return value[:cut] + value[start:]
    return value[:cut]


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
    kinds = ["wrong tool", "wrong value", "garbled value", "missing argument", "no call"]
    kind = rng.choice(kinds)
    if kind == "garbled value":
        strings = [k for k, v in call["arguments"].items() if isinstance(v, str) and len(v) > 2]
        if strings:
            key = rng.choice(strings)
            right = call["arguments"][key]
            call["arguments"][key] = garbled(right, rng)
            turn["reasoning"] = turn["reasoning"].replace(f"'{right}'", f"'{call['arguments'][key]}'")
        else:
            kind = "wrong value"
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


def corrupted_examples(renderer, train, rng, count):
    """(example, label, 1.0): training targets (right) and corrupted calls
    (wrong) half and half."""
    single = [ex for ex in train if ex["kind"] in ("call", "multi", "refusal")]
    values = {n: [] for n in renderer.tools}
    for ex in single:
        for c in ex["turns"][0]["calls"]:
            values[c["name"]].append(c["arguments"])
    pairs = []
    for _ in range(count):
        ex = rng.choice(single)
        right = rng.random() < 0.5
        # No decode probability: the model did not make these calls.
        pairs.append((ex, 1.0, 1.0) if right else (corrupt(ex, renderer.tools, rng, values)[0], 0.0, 1.0))
    return pairs


def own_examples(own):
    """(example, label, decode probability) of the model's own calls on fresh
    commands (`own`: (example, calls, correct, decode probability) from
    own-calls.mjs)."""
    triples = []
    for ex, calls, correct, decoded in own:
        ex = copy.deepcopy(ex)
        ex["turns"] = [dict(ex["turns"][0], calls=calls)]
        triples.append((ex, 1.0 if correct else 0.0, decoded))
    return triples


def cached_batches(model, renderer, triples, batch):
    """The frozen base's cells of every (example, label, decode probability),
    computed once, in batches of similar length: [(cells, valid, labels,
    decode probabilities)]."""
    order = sorted(range(len(triples)), key=lambda i: len(renderer.example(triples[i][0], eos=False)[0]))
    out = []
    for at in range(0, len(order), batch):
        chosen = [triples[i] for i in order[at:at + batch]]
        cells, valid = cells_of(model, [renderer.example(ex, eos=False)[0] for ex, _, _ in chosen])
        out.append((cells, valid, torch.tensor([t[1] for t in chosen]), torch.tensor([t[2] for t in chosen])))
    return out


def auroc(scores, labels):
    pos = scores[labels > 0.5]
    neg = scores[labels <= 0.5]
    if not len(pos) or not len(neg):
        return float("nan")
    return ((pos[:, None] > neg[None, :]).float() + 0.5 * (pos[:, None] == neg[None, :]).float()).mean().item()


def train_confidence(model, renderer, train, log, steps, lr, corrupted, own, batch=32, seed=2):
    """A correctness classifier on the frozen base (probes: start_as_mean),
    from the model's own calls and `corrupted` targets and corruptions. One
    batch of own calls in eight is held back to report a validation AUROC on
    the mistakes the model makes, and to choose open_head's offset. (At lr
    1e-2 the validation AUROC swung between 0.68 and 0.75 from one hundred
    steps to the next.)"""
    rng = random.Random(seed)
    mine = cached_batches(model, renderer, own_examples(own), batch)
    rng.shuffle(mine)
    held, fit = mine[: max(1, len(mine) // 8)], mine[max(1, len(mine) // 8):]
    fit += cached_batches(model, renderer, corrupted_examples(renderer, train, rng, corrupted), batch)
    rng.shuffle(fit)
    start_as_mean(model, "confidence")
    params = [model.raw(f"confidence_head.{k}") for k in ("probes", "proj", "bias")]
    opt = torch.optim.Adam(params, lr=lr)
    for step in range(steps):
        cells, valid, labels, _ = fit[step % len(fit)]
        logit = model.head("confidence", cells, valid)[:, 0]
        loss = F.binary_cross_entropy_with_logits(logit, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 100 == 0 or step + 1 == steps:
            logits, labels, _ = held_back_scores(model, held)
            log(f"confidence step {step + 1}/{steps} loss {loss.item():.4f} "
                f"validation AUROC {auroc(logits, labels):.3f}")
    open_head(model, held, log)


def held_back_scores(model, held):
    with torch.no_grad():
        logits = torch.cat([model.head("confidence", c, v)[:, 0] for c, v, _, _ in held])
    return logits, torch.cat([b[2] for b in held]), torch.cat([b[3] for b in held])


def open_head(model, held, log):
    """Raises the head's bias by the offset that best separates the held-back
    own calls by the runtime's confidence, min(head, decode probability).
    Trained alone, the head is below the decode probability on most calls and
    decides the minimum with a weaker ranking than the decode probability's
    (held-out AUROC, one model: head 0.659, decode probability 0.707, their
    minimum 0.673); raised, it speaks only where it is sure a call is wrong."""
    logits, labels, decoded = held_back_scores(model, held)
    best = max((auroc(torch.minimum(torch.sigmoid(logits + b), decoded), labels), -b)
               for b in [k * 0.25 for k in range(41)])
    with torch.no_grad():
        model.raw("confidence_head.bias").add_(-best[1])
    log(f"confidence bias raised by {-best[1]:.2f}: validation AUROC of min(head, decode probability) "
        f"{best[0]:.3f} (head alone {auroc(logits, labels):.3f}, decode probability alone {auroc(decoded, labels):.3f})")


def freeze_quantised(model):
    """The base's CQ matrices replaced by their dequantised values once
    (the base is frozen, so fake quantisation per forward would redo it)."""
    model.qat = model.q8 = True
    with torch.no_grad():
        for name in model.names():
            if model.is_cq(name):
                model.raw(name).copy_(model.w(name))
    model.qat = False


def restore(model, base):
    with torch.no_grad():
        for name, weights in base.items():
            model.p[name].copy_(weights)


def train_heads(model, renderer, train, args, log, own_calls_of):
    """Both heads on the frozen base, which then gets its own weights back:
    the exporter quantises them, and quantising the dequantised matrices a
    second time moves their levels (it measurably cost held-out calls).
    own_calls_of(model) runs between the two, so the base's own calls are
    made as users run it, with its retrieval head trained."""
    base = {name: p.detach().clone() for name, p in model.p.items() if "_head__" not in name}
    freeze_quantised(model)
    for name, p in model.p.items():
        p.requires_grad_("_head__" in name)
    train_contrastive(model, renderer, train, log, steps=args.contrastive_steps)
    restore(model, base)
    own = own_calls_of(model)
    freeze_quantised(model)
    train_confidence(model, renderer, train, log, args.confidence_steps, args.confidence_lr,
                     args.corrupted_examples, own)
    restore(model, base)
    model.q8 = False
