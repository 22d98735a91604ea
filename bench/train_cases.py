"""The training steps of bench/e2e_train.py: the shapes users train, each a model, its inputs and
one step (forward, backward, SGD) built once and called many times.

Every builder takes (device, dtype, size) and returns (step, meta): ``step()`` runs one whole
training step; ``meta`` is {"size": text}. ``size`` is "full" (the issue's sizes, for a GPU) or
"smoke" (tiny, for the CPU test). The same inputs serve native and stridewise steps: a step
never changes its inputs, only the parameters, whose drift between steps does not change the
work a step does.
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import e2e_scatter  # noqa: E402  (the GNN and the scatter-style MoE)


def _sgd(params, lr=1e-4):
    return torch.optim.SGD([p for p in params if p.requires_grad], lr=lr)


def _step(model_params, loss_fn):
    opt = _sgd(model_params)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
    return step


class _Args:
    def __init__(self, **kw):
        self.__dict__.update(kw)


# --- GNN (PyTorch Geometric), scatter-style MoE ------------------------------------------------

def gnn(kind):
    def build(device, dtype, size):
        full = size == "full"
        a = _Args(nodes=100_000 if full else 600, edges=1_000_000 if full else 4_000,
                  feat=64 if full else 16, hidden=64 if full else 16)
        step = e2e_scatter.gnn_step(kind, device, a)  # float32: PyG's layers
        return step, {"size": f"{a.nodes} nodes, {a.edges} edges, F={a.feat}"}
    return build


def moe_scatter(device, dtype, size):
    full = size == "full"
    a = _Args(tokens=65_536 if full else 256, hidden_moe=1024 if full else 32, experts=16 if full else 4)
    x, router, w, k = e2e_scatter.moe_inputs(device, a, dtype)
    w.requires_grad_(True)

    def loss():
        out, _, _ = e2e_scatter.moe_forward(x, router, w, k)
        return out.float().square().mean()
    return _step([w, *router.parameters()], loss), {
        "size": f"T={a.tokens} H={a.hidden_moe} E={a.experts} top-2, scatter_add_ combine"}


# --- index-style MoE (Mixtral): index_select / x[idx] dispatch, index_add / index_put_ combine --

class IndexMoE(nn.Module):
    """Router -> top-2 -> each expert's tokens gathered (``dispatch``: index_select, or x[idx])
    from a strided slice of the activations -> SwiGLU expert MLP -> combine (``combine``:
    out-of-place index_add, in-place index_add_, or index_put_ accumulate)."""

    def __init__(self, hidden, ffn, experts, dispatch, combine):
        super().__init__()
        self.router = nn.Linear(hidden, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, hidden, ffn) / hidden ** 0.5)
        self.w3 = nn.Parameter(torch.randn(experts, hidden, ffn) / hidden ** 0.5)
        self.w2 = nn.Parameter(torch.randn(experts, ffn, hidden) / ffn ** 0.5)
        self.dispatch, self.combine = dispatch, combine

    def forward(self, act):
        x = act[:, : self.router.in_features]  # a strided slice: rows of a wider buffer
        T, H = x.shape
        gate, eidx = self.router(x).float().softmax(-1).topk(2, dim=-1)
        gate = (gate / gate.sum(-1, keepdim=True)).to(x.dtype)
        out = x.new_zeros(T, H)
        for e in range(self.w1.shape[0]):
            tok, slot = (eidx == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            xe = x.index_select(0, tok) if self.dispatch == "index_select" else x[tok]
            ye = (nn.functional.silu(xe @ self.w1[e]) * (xe @ self.w3[e])) @ self.w2[e]
            ye = ye * gate[tok, slot].unsqueeze(-1)
            if self.combine == "index_add":
                out = out.index_add(0, tok, ye)
            elif self.combine == "index_add_":
                out.index_add_(0, tok, ye)
            else:
                out.index_put_((tok,), ye, accumulate=True)
        return out


def moe_index(dispatch, combine):
    def build(device, dtype, size):
        full = size == "full"
        T, H, F, E = (16384, 2048, 4096, 8) if full else (128, 32, 64, 4)
        g = torch.Generator().manual_seed(3)
        act = torch.randn(T, H + 64, generator=g).to(device=device, dtype=dtype)
        model = IndexMoE(H, F, E, dispatch, combine).to(device=device, dtype=dtype)
        return _step(model.parameters(), lambda: model(act).float().square().mean()), {
            "size": f"T={T} H={H} FFN={F} E={E} top-2, {dispatch} dispatch, {combine} combine"}
    return build


# --- a language model's embedding and sampled head ------------------------------------------

class LMEmbedHead(nn.Module):
    """Token embedding, a position gather from a position table, a small mixer, and a
    candidate-sampled head: logits over a sampled set of vocabulary columns read from a
    transposed view of the output matrix."""

    def __init__(self, vocab, dim, ctx):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(ctx, dim) * 0.02)
        self.mix = nn.Linear(dim, dim)
        self.out = nn.Parameter(torch.randn(vocab, dim) * 0.02)

    def forward(self, ids, positions, cand):
        h = self.tok(ids)  # (B, S, D)
        p = torch.gather(self.pos, 0, positions.view(-1, 1).expand(-1, self.pos.shape[1]))
        h = torch.tanh(self.mix(h + p.view(h.shape)))
        w = self.out.t()[:, cand]  # (D, C): columns of a transposed view
        return h.reshape(-1, h.shape[-1]) @ w


def lm_embed(device, dtype, size):
    full = size == "full"
    V, D, B, S, C = (50257, 1024, 8, 1024, 8192) if full else (500, 32, 2, 16, 64)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, V, (B, S), generator=g).to(device)
    positions = torch.arange(S).repeat(B).to(device)
    cand = torch.randint(0, V, (C,), generator=g).to(device)
    target = torch.randint(0, C, (B * S,), generator=g).to(device)
    model = LMEmbedHead(V, D, S).to(device=device, dtype=dtype)
    return _step(model.parameters(), lambda: nn.functional.cross_entropy(
        model(ids, positions, cand).float(), target)), {
        "size": f"vocab {V} x {D}, batch {B} x {S}, {C} sampled columns"}


# --- a sparse row update ----------------------------------------------------------------------

def sparse_rows(device, dtype, size):
    """index_add_ of many rows into a large table, then a read of those rows (a sparse
    optimizer's or an embedding cache's update): no autograd, the update is the step."""
    full = size == "full"
    N, D, K = (4 * 1024 * 1024, 128, 262144) if full else (4096, 16, 512)
    g = torch.Generator().manual_seed(5)
    table = torch.randn(N, D, generator=g).to(device=device, dtype=dtype)
    idx = torch.randint(0, N, (K,), generator=g).to(device)
    upd = torch.randn(K, D, generator=g).to(device=device, dtype=dtype)
    sink = torch.empty(K, D, device=device, dtype=dtype)

    def step():
        table.index_add_(0, idx, upd, alpha=-1e-3)
        torch.index_select(table, 0, idx, out=sink)
    return step, {"size": f"{K} rows into {N} x {D}, then read back"}


# --- a transformers model built from a config ----------------------------------------------

def hf_gpt2(device, dtype, size):
    """GPT-2 from a config with random weights (no download): a training step on random ids."""
    from transformers import GPT2Config, GPT2LMHeadModel

    full = size == "full"
    cfg = GPT2Config(n_layer=6 if full else 1, n_embd=768 if full else 32, n_head=12 if full else 2,
                     n_positions=1024 if full else 32, vocab_size=50257 if full else 300)
    cfg.bos_token_id = cfg.eos_token_id = cfg.vocab_size - 1
    torch.manual_seed(6)
    model = GPT2LMHeadModel(cfg).to(device=device, dtype=dtype)
    B, S = (8, 1024) if full else (2, 16)
    ids = torch.randint(0, cfg.vocab_size, (B, S)).to(device)
    return _step(model.parameters(), lambda: model(input_ids=ids, labels=ids).loss), {
        "size": f"GPT-2 {cfg.n_layer} layers, d={cfg.n_embd}, vocab {cfg.vocab_size}, batch {B} x {S}"}


# name -> (builder, dtypes it runs in: PyG's layers are float32)
CASES = {
    "sage": (gnn("sage"), ("float32",)),
    "gat": (gnn("gat"), ("float32",)),
    "moe_scatter": (moe_scatter, ("float32", "bfloat16")),
    "moe_index": (moe_index("index_select", "index_add"), ("float32", "bfloat16")),
    "moe_index_xi": (moe_index("x[idx]", "index_add_"), ("float32", "bfloat16")),
    "moe_index_put": (moe_index("index_select", "index_put_"), ("float32", "bfloat16")),
    "lm_embed": (lm_embed, ("float32", "bfloat16")),
    "sparse_rows": (sparse_rows, ("float32", "bfloat16")),
    "hf_gpt2": (hf_gpt2, ("float32", "bfloat16")),
}
