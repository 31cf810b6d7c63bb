"""The Needle 2 architecture in PyTorch, written from shared/spec/needle2-model.md.

One batch of right-padded sequences runs every position at once (causal
attention over the whole sequence: the demo model's sequences are shorter than
its window). Parameters carry the canonical tensor names of js/cact-format.js,
so export is a name-for-name copy. Two training-time numerics:

  qat  every CQ matrix is fake-quantised as the exporter quantises it (per
       group: Hadamard rotation, L2 norm, nearest level, fp16 norm, rotation
       back) with a straight-through gradient;
  q8   the engine's fast mode (src/kernels/cq_q8.h): the input of every
       CQ product but the mHC Phi, rotated per group, as int8 per group
       (scale amax / 127, round half away from zero), rotated back, with a
       straight-through gradient; and the levels as int8 under one scale.

Both off and float64 weights give the reference forward the engine's exact
mode is compared against.
"""

import math

import torch
import torch.nn.functional as F

EPS = 1e-6
SINKHORN_ITERATIONS = 20
ENGRAM_SEED = 0x9E3779B9
ENGRAM_PRIME = 0x01000193
HEAD_SHAPES = {"contrastive": (4, 128), "confidence": (8, 1)}
# The matrices stored as Cactus Quants (the forward reads them through w());
# every other parameter is FP16 in the archive, whatever its shape.
CQ_MATRICES = ("embedding", "q_proj", "k_proj", "v_proj", "gate_proj", "out_proj",
               "phi_pre", "phi_post", "phi_res", "tables", "key_proj", "value_proj")

# Lloyd-Max levels of a unit Gaussian (js/cact-format.js LLOYD_MAX_LEVELS).
LLOYD_MAX = {
    2: [-1.5066708475715247, -0.4514406093934405, 0.4529474939511613, 1.5099326242547164],
    4: [-2.709990028558534, -2.0444556051349223, -1.5947570221842275, -1.2333361910827123,
        -0.9222139662739897, -0.6395373737252813, -0.37266394934485414, -0.11445072030649898,
        0.14380628677643076, 0.4039889754802918, 0.6726933686864702, 0.9614053009735016,
        1.275525783123495, 1.6370587960592822, 2.0844263722579237, 2.7410141261982846],
    3: [-2.141247862845774, -1.3337164609389893, -0.7483982925010272, -0.23774016363616238,
        0.2500446195658646, 0.7555868210708537, 1.3379826350451236, 2.1476362705161427],
}


def hadamard(n, dtype=torch.float32):
    """The n-point normalised Walsh-Hadamard matrix, Sylvester order."""
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h / math.sqrt(n)).to(dtype)


class ZcRms(torch.autograd.Function):
    """(1 + scale) * v / sqrt(mean(v^2) + EPS) over the last dimension, with
    the gradient written out: autograd's chain of small ops costs about
    three times as many passes over v (the trainer is bound by such passes).
    scale None: plain rms_unit."""

    @staticmethod
    def forward(ctx, v, scale):
        r = torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + EPS)
        n = v * r
        ctx.save_for_backward(n, r, scale)
        return n if scale is None else n * (1 + scale)

    @staticmethod
    def backward(ctx, g):
        n, r, scale = ctx.saved_tensors
        dscale = None
        if scale is not None:
            if ctx.needs_input_grad[1]:
                dscale = (g * n).reshape(-1, n.shape[-1]).sum(0).reshape(scale.shape)
            g = g * (1 + scale)
        # d/dv of v r with r = (mean(v^2) + EPS)^-1/2: r (g - n mean(g n)).
        dv = torch.addcmul(g, n, (g * n).mean(-1, keepdim=True), value=-1).mul_(r)
        return dv, dscale


def rms_unit(v):
    return ZcRms.apply(v, None)


def zcrms(v, scale):
    return ZcRms.apply(v, scale)


class StraightThrough(torch.autograd.Function):
    """Forward the value q, backward the gradient to v unchanged: v + (q -
    v).detach() without its two extra passes over the tensor."""

    @staticmethod
    def forward(ctx, v, q):
        return q

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def round_away(v):
    """Round half away from zero (the engine's quantiser; torch.round is half to even)."""
    return torch.sign(v) * torch.floor(v.abs() + 0.5)


def int8_scale(amax):
    """The engine's scale of an int8 group: amax times f32(1/127), 1 for zeros."""
    scale = amax.float() * torch.tensor(1 / 127, dtype=torch.float32)
    return torch.where(scale > 0, scale, torch.ones_like(scale)).to(amax.dtype)


def fake_q8(v, had):
    """v [..., cols] as fast mode multiplies it: per group of had's width the
    rotated values as int8, rotated back."""
    with torch.no_grad():
        group = had.shape[0]
        cols = v.shape[-1]
        padded = -(-cols // group) * group
        r = F.pad(v, (0, padded - cols)).reshape(*v.shape[:-1], padded // group, group) @ had
        scale = int8_scale(r.abs().amax(-1, keepdim=True))
        q = round_away(r * (1 / scale)).clamp_(-128, 127).mul_(scale)
        q = (q @ had).reshape(*v.shape[:-1], padded)[..., :cols]
    return StraightThrough.apply(v, q)


def cq_dequantised(w, bits, group, had, int8_levels=False):
    """The dense matrix the exporter's CQ quantisation of w reconstructs.
    Nearest level with ties to the lower one; the norm rounded to fp16.
    int8_levels: the levels as fast mode holds them (cq_q8.h)."""
    rows, cols = w.shape
    padded = -(-cols // group) * group
    x = F.pad(w, (0, padded - cols)).reshape(rows, padded // group, group)
    r = x @ had
    norm = r.norm(dim=-1, keepdim=True)
    levels = torch.tensor(LLOYD_MAX[bits], dtype=w.dtype) / math.sqrt(group)
    u = r / norm.clamp_min(1e-12)
    idx = torch.bucketize(u, (levels[1:] + levels[:-1]) / 2)
    if int8_levels:
        scale = int8_scale(levels.abs().amax())
        levels = round_away(levels / scale).clamp(-128, 127) * scale
    q = levels[idx] * norm.half().to(w.dtype)
    return (q @ had).reshape(rows, padded)[:, :cols]


def sinkhorn(logits):
    """20 x {rows, then columns} log-normalisation, then exp; [..., n, n].
    Computed as [n, n, ...]: a reduction over the leading dimensions runs
    along contiguous rows of tokens, 3-4x faster than over the last two
    dimensions of size n. Returns a [..., n, n] view of that layout."""
    a = logits.movedim((-2, -1), (0, 1)).contiguous()
    for _ in range(SINKHORN_ITERATIONS):
        a = a - torch.logsumexp(a, 1, keepdim=True)
        a = a - torch.logsumexp(a, 0, keepdim=True)
    return a.exp().movedim((0, 1), (-2, -1))


def rope_tables(positions, hd, theta, dtype):
    """cos and sin [T, hd/2] of the half-split rotation."""
    m = torch.arange(hd // 2, dtype=torch.float64)
    freq = theta ** (-2 * m / hd)
    angle = positions.to(torch.float64)[:, None] * freq[None, :]
    return angle.cos().to(dtype), angle.sin().to(dtype)


# Tables that depend only on a sequence length, built once per length (a
# training run meets a few hundred lengths); never written to.
_rope_cache, _mask_cache = {}, {}


def rope_tables_of_length(T, hd, theta, dtype):
    key = (T, hd, theta, dtype)
    if key not in _rope_cache:
        _rope_cache[key] = rope_tables(torch.arange(T), hd, theta, dtype)
    return _rope_cache[key]


def causal_mask(T, rep, dtype):
    """[rep T, T]: 0 where query t (row r T + t) may see key s <= t, else -inf."""
    key = (T, rep, dtype)
    if key not in _mask_cache:
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        _mask_cache[key] = torch.zeros(T, T, dtype=dtype).masked_fill(future, float("-inf")).repeat(rep, 1)
    return _mask_cache[key]


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)


def engram_slots(ids, geometry):
    """Slot index [B, T, tables] and existence [B, T, tables] of every
    position's n-grams (spec section 3, engram sites): the hash over
    T[p], T[p-1], ... with missing tokens as 0."""
    B, T = ids.shape
    g = geometry
    heads = g["engramTables"] // g["orderCount"]
    tok = ids.to(torch.int64)
    slots = torch.zeros(B, T, g["engramTables"], dtype=torch.int64)
    exists = torch.zeros(B, T, g["engramTables"], dtype=torch.bool)
    pos = torch.arange(T)
    mask32 = 0xFFFFFFFF
    for o in range(g["orderCount"]):
        order = g["orders"][o]
        shifted = [F.pad(tok, (j, 0))[:, :T] for j in range(order)]  # T[p-j], 0 if missing
        for e in range(heads):
            t = o * heads + e
            acc = torch.full((B, T), (ENGRAM_SEED * (t + 1)) & mask32, dtype=torch.int64)
            for j in range(order):
                acc = ((acc ^ shifted[j]) * ENGRAM_PRIME) & mask32
            acc = acc ^ (acc >> 15)
            slots[:, :, t] = acc % g["engramSlots"]
            exists[:, :, t] = (pos >= order - 1)[None, :]
    return slots, exists


class Needle(torch.nn.Module):
    def __init__(self, g, bits, group, heads=("contrastive", "confidence")):
        super().__init__()
        self.g, self.bits, self.group = g, bits, group
        d, n, L, hd = g["hidden"], g["lanes"], g["layers"], g["headDimension"]
        H, KV, N = g["queryHeads"], g["kvHeads"], g["hadamardDimension"]
        tables, sub = g["engramTables"], g["engramSubDimension"]
        self.p = torch.nn.ParameterDict()

        def add(name, *shape, std=0.0, fill=None):
            t = torch.full(shape, float(fill)) if fill is not None else torch.randn(*shape) * std
            self.p[name.replace(".", "__")] = torch.nn.Parameter(t)

        add("embedding", g["vocabulary"], d, std=1 / math.sqrt(d))
        for i in range(L):
            pre = f"layer{i:02d}."
            add(pre + "norm_in", d, fill=0)
            add(pre + "q_proj", H * hd, d, std=1 / math.sqrt(d))
            add(pre + "k_proj", KV * hd, d, std=1 / math.sqrt(d))
            add(pre + "v_proj", KV * hd, d, std=1 / math.sqrt(d))
            add(pre + "q_norm", hd, fill=0)
            add(pre + "k_norm", hd, fill=0)
            add(pre + "gate_proj", H * hd, d, std=1 / math.sqrt(d))
            add(pre + "out_proj", d, H * hd, std=0.5 / math.sqrt(H * hd * L))
            add(pre + "post_norm", d, fill=0)
            add(pre + "attn_gate", 1, fill=0)
            add(pre + "pre_hada", d, fill=0)
            for k in ("d1", "d2"):
                self.p[pre.replace(".", "__") + k] = torch.nn.Parameter(
                    torch.randint(0, 2, (N,)).float() * 2 - 1)
            add(pre + "d3", N, std=0.1 / math.sqrt(L))
        add("mhc.a_pre", L, fill=1)
        add("mhc.a_post", L, fill=1)
        add("mhc.a_res", L, fill=1)
        add("mhc.b_pre", L, n, fill=0)
        add("mhc.b_post", L, n, fill=0)
        self.p["mhc__b_res"] = torch.nn.Parameter(torch.eye(n).repeat(L, 1, 1) * 2)
        add("mhc.phi_pre", L * n, n * d, std=0.02)
        add("mhc.phi_post", L * n, n * d, std=0.02)
        add("mhc.phi_res", L * n * n, n * d, std=0.02)
        for s in range(g["siteCount"]):
            pre = f"engram{s}."
            add(pre + "tables", tables * g["engramSlots"], sub, std=1.0)
            add(pre + "key_proj", d, tables * sub, std=1 / math.sqrt(tables * sub))
            add(pre + "value_proj", d, tables * sub, std=0.1 / math.sqrt(tables * sub))
            add(pre + "taps", g["engramTaps"], d, fill=0.5)
        add("final_norm", d, fill=0)
        self.heads = list(heads)
        for kind in self.heads:
            P, out = HEAD_SHAPES[kind]
            add(f"{kind}_head.probes", P, d, std=1.0)
            add(f"{kind}_head.proj", out, P * d, std=1 / math.sqrt(P * d))
            add(f"{kind}_head.bias", out, fill=0)
        self.register_buffer("had_group", hadamard(group), persistent=False)
        self.register_buffer("had_mlp", hadamard(N), persistent=False)
        self.qat = False
        self.q8 = False
        self._cq = None  # name -> fake-quantised matrix, during one forward

    # ---- parameters -------------------------------------------------------

    @staticmethod
    def is_cq(name):
        return name.split(".")[-1] in CQ_MATRICES

    def names(self):
        return [k.replace("__", ".") for k in self.p.keys()]

    def raw(self, name):
        return self.p[name.replace(".", "__")]

    def w(self, name):
        """A CQ matrix as the model computes with it: fake-quantised when qat."""
        t = self.raw(name)
        if not self.qat:
            return t
        # Within one forward each matrix is quantised once (the mHC Phi
        # matrices are read by every layer, the embedding twice).
        q = self._cq.get(name) if self._cq is not None else None
        if q is None:
            with torch.no_grad():
                q = cq_dequantised(t, self.bits(name), self.group, self.had_group.to(t.dtype), self.q8)
            if self._cq is not None:
                self._cq[name] = q
        return StraightThrough.apply(t, q)

    def q8q(self, v):
        """A CQ product's input as fast mode quantises it (when q8)."""
        return fake_q8(v, self.had_group.to(v.dtype)) if self.q8 else v

    # ---- the forward pass ---------------------------------------------------

    def forward(self, ids, want_cells=False, want_hidden=False, at=None):
        """ids [B, T] -> logits [B, T, V] (and the cells [B, T, L+1, d]), or
        with want_hidden the final hidden states [B, T, d] the logits read,
        or with at (bool [B, T]) the logits [N, V] of those positions only."""
        self._cq = {}
        try:
            return self._forward(ids, want_cells, want_hidden, at)
        finally:
            self._cq = None

    def _forward(self, ids, want_cells, want_hidden, at):
        g = self.g
        B, T = ids.shape
        d, n, L = g["hidden"], g["lanes"], g["layers"]
        E = self.w("embedding")
        # F.embedding, not E[ids]: the gradient of indexing accumulates rows
        # in an order that varies run to run, that of embedding does not.
        x0 = F.embedding(ids, E) * math.sqrt(d)
        X = x0.unsqueeze(2).expand(B, T, n, d)
        cells = [x0] if want_cells else None
        dtype = x0.dtype
        cos, sin = rope_tables_of_length(T, g["headDimension"], g["ropeTheta"], dtype)
        engram = self.engram_values(ids) if g["siteCount"] else None
        for i in range(L):
            X, _ = self.layer(i, X, cos, sin, engram)
            if want_cells:
                cells.append(X.mean(2))
        x = self.q8q(zcrms(X.mean(2), self.raw("final_norm")))
        if want_hidden:
            return x
        if at is not None:
            return x[at] @ E.t()
        logits = x @ E.t()
        return (logits, torch.stack(cells, 2)) if want_cells else logits

    def logits_at(self, x):
        """Logits of final hidden states x [..., d] (tied embedding)."""
        return x @ self.w("embedding").t()

    def mhc(self, i, X):
        g = self.g
        n = g["lanes"]
        B, T = X.shape[:2]
        nx = rms_unit(X.reshape(B, T, n * g["hidden"]))
        c = i % n
        pre_off = torch.full((n,), -4.0, dtype=X.dtype); pre_off[c] = 4.0
        post_off = torch.full((n,), -4.0, dtype=X.dtype); post_off[c] = 0.0
        # The three projections of this layer as one product (small outputs
        # make three products cost about three times one).
        phi = torch.cat([self.w("mhc.phi_pre")[i * n:(i + 1) * n], self.w("mhc.phi_post")[i * n:(i + 1) * n],
                         self.w("mhc.phi_res")[i * n * n:(i + 1) * n * n]])
        pre, post, res = (nx @ phi.t()).split([n, n, n * n], -1)
        hpre = torch.sigmoid(self.raw("mhc.a_pre")[i] * pre + self.raw("mhc.b_pre")[i] + pre_off)
        hpost = 2 * torch.sigmoid(self.raw("mhc.a_post")[i] * post + self.raw("mhc.b_post")[i] + post_off)
        R = sinkhorn(self.raw("mhc.a_res")[i] * res.reshape(B, T, n, n) + self.raw("mhc.b_res")[i])
        return hpre, hpost, R

    def layer(self, i, X, cos, sin, engram):
        hpre, hpost, R = self.mhc(i, X)
        u = (hpre.unsqueeze(-1) * X).sum(2)
        bx = u
        sites = list(self.g["sites"][: self.g["siteCount"]])
        if i in sites:
            ek, ev = engram[sites.index(i)]
            alpha = torch.sigmoid((rms_unit(u) * rms_unit(ek)).sum(-1, keepdim=True) / math.sqrt(self.g["hidden"]))
            bx = u + alpha * ev
        y = self.block(i, bx, cos, sin) - u
        # Lane a: sum over b of R[a, b] X[b], plus hpost[a] y; one broadcast
        # product and sum (indexing lane by lane made a zero-filled gradient
        # tensor per index in the backward).
        mixed = (R.unsqueeze(-1) * X.unsqueeze(2)).sum(3)
        return mixed + hpost.unsqueeze(-1) * y.unsqueeze(2), y

    def block(self, i, x, cos, sin):
        pre = f"layer{i:02d}."
        r = lambda k: self.raw(pre + k)
        a = zcrms(self.attention(i, zcrms(x, r("norm_in")), cos, sin), r("post_norm"))
        x = x + torch.sigmoid(r("attn_gate")) * a
        return x + self.hadamard_mlp(zcrms(x, r("pre_hada")), r("d1"), r("d2"), r("d3"))

    def hadamard_mlp(self, h, d1, d2, d3):
        d, N = h.shape[-1], d1.shape[0]
        had = self.had_mlp.to(h.dtype)
        z = ((F.pad(h, (0, N - d)) if N > d else h) * d1) @ had
        z = F.silu(d2 * z) @ had
        return (d3 * z)[..., :d] if N > d else d3 * z

    def attention(self, i, h, cos, sin):
        g = self.g
        pre = f"layer{i:02d}."
        B, T, _ = h.shape
        H, KV, hd = g["queryHeads"], g["kvHeads"], g["headDimension"]
        h = self.q8q(h)
        q = (h @ self.w(pre + "q_proj").t()).view(B, T, H, hd)
        k = (h @ self.w(pre + "k_proj").t()).view(B, T, KV, hd)
        v = (h @ self.w(pre + "v_proj").t()).view(B, T, KV, hd)
        q = rope(zcrms(q, self.raw(pre + "q_norm")), cos[:, None], sin[:, None])
        k = rope(zcrms(k, self.raw(pre + "k_norm")), cos[:, None], sin[:, None])
        # [B KV, rep T, hd]: the query heads of one KV group share its keys,
        # so they stack along the rows of one product with them (no copy of
        # the keys per head); the causal mask (0 or -inf) is added by baddbmm.
        rep = H // KV
        q = q.view(B, T, KV, rep, hd).permute(0, 2, 3, 1, 4).reshape(B * KV, rep * T, hd)
        k = k.permute(0, 2, 1, 3).reshape(B * KV, T, hd)
        v = v.permute(0, 2, 1, 3).reshape(B * KV, T, hd)
        scores = torch.baddbmm(causal_mask(T, rep, h.dtype), q, k.transpose(1, 2), alpha=1 / math.sqrt(hd))
        o = (scores.softmax(-1) @ v).view(B, KV, rep, T, hd).permute(0, 3, 1, 2, 4).reshape(B, T, H * hd)
        gated = o * torch.sigmoid(h @ self.w(pre + "gate_proj").t())
        return self.q8q(gated) @ self.w(pre + "out_proj").t()

    def engram_values(self, ids):
        """Per site: (ek, ev) [B, T, d] of every position."""
        g = self.g
        B, T = ids.shape
        slots, exists = engram_slots(ids, g)
        out = []
        for s in range(g["siteCount"]):
            pre = f"engram{s}."
            tables = self.w(pre + "tables")
            rows = slots + torch.arange(g["engramTables"]) * g["engramSlots"]
            e = F.embedding(rows, tables) * exists.unsqueeze(-1).to(tables.dtype)  # [B, T, tables, sub]
            e = self.q8q(e.reshape(B, T, -1))
            k = e @ self.w(pre + "key_proj").t()
            v0 = e @ self.w(pre + "value_proj").t()
            taps = self.raw(pre + "taps")
            ev = torch.zeros_like(v0)
            for m in range(g["engramTaps"]):
                shift = m * g["engramDilation"]
                if shift < T:
                    ev = ev + taps[m] * F.pad(v0, (0, 0, shift, 0))[:, :T]
            out.append((k, ev))
        return out

    # ---- probe heads ----------------------------------------------------------

    def head(self, kind, cells, valid):
        """cells [B, T, L+1, d], valid [B, T] -> head output [B, out]."""
        B, T, C, d = cells.shape
        probes = self.raw(f"{kind}_head.probes")
        flat = cells.reshape(B, T * C, d)
        scores = flat @ probes.t() / math.sqrt(d)  # [B, T*C, P]
        keep = valid.unsqueeze(-1).expand(B, T, C).reshape(B, T * C, 1)
        weights = scores.masked_fill(~keep, float("-inf")).softmax(1)
        pooled = torch.einsum("bcp,bcd->bpd", weights, flat).reshape(B, -1)
        return pooled @ self.raw(f"{kind}_head.proj").t() + self.raw(f"{kind}_head.bias")
