"""End to end: gather inside real models, forward + backward, routed to stridewise
(stridewise.use(include=['gather'])) vs native. Outputs must be bitwise equal, gradients
allclose, and stats() must show that gather really ran inside the model.

(a) A tiny BERT from transformers (BertConfig: hidden 64, 2 layers, 2 heads, vocab 100,
    random weights, nothing downloaded). transformers' BertEmbeddings calls
    ``torch.gather(self.token_type_ids.expand(B, -1), 1, position_ids)`` when the caller
    passes no token_type_ids. That buffer is all zeros in a fresh model, which would make
    any gather look right, so the test fills it with random segment ids (values the model
    then embeds). Two inputs: default position ids (a contiguous index, as in the seed's
    e2e test) and left-padding position ids built as a transposed (B, T) view (a
    non-contiguous index).
(b) A top-k routing (MoE-style) block: router -> softmax -> topk; expert scores gathered with
    a transposed index, expert outputs gathered with an index expanded along hidden, and
    expert-choice token dispatch gathered from an expanded self with a permuted+expanded
    index. stats() must count non-contiguous indices.

``run_bert`` / ``run_moe`` / ``compare_runs`` are also used by test_gather_planted.py,
which plants a broken aten::gather and checks that compare_runs reports it.
"""
from __future__ import annotations

import contextlib
import os
import sys

import pytest
import torch
from torch import nn

from conftest import DEVICES, fail_msg
from stridewise.audit.specs import gather_layouts as specs

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

GRAD_TOL = dict(rtol=1e-5, atol=1e-6)


def _stats():
    sw = sys.modules.get("stridewise")
    if sw is None or not hasattr(sw, "stats"):
        return None
    return dict(sw.stats()["gather"])


def _delta(a, b):
    if a is None or b is None:
        return None
    # Counters only: fallback_reasons is a dict of per-rule counts, not a number.
    return {k: b[k] - a.get(k, 0) for k in b if isinstance(b[k], int)}


# --- (a) BERT -----------------------------------------------------------------------------

def build_bert(device, seed):
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=64, type_vocab_size=4,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    try:
        cfg._attn_implementation = "eager"
    except Exception:  # noqa: BLE001
        pass
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertModel(cfg).to(device)
        g = torch.Generator().manual_seed(seed + 1)
        emb = model.embeddings
        assert hasattr(emb, "token_type_ids"), "this transformers' BertEmbeddings has no token_type_ids buffer"
        emb.token_type_ids.copy_(torch.randint(0, 4, tuple(emb.token_type_ids.shape), generator=g).to(device))
    model.train()  # dropout is 0; train mode keeps autograd paths realistic
    return model


def run_bert(device, seed, ctx_factory, variant="padded"):
    """Forward + backward of the tiny BERT under ``ctx_factory()``; returns outputs, grads,
    the stats delta and the gather calls seen."""
    model = build_bert(device, seed)
    g = torch.Generator().manual_seed(seed + 2)
    B, T = 3, 12
    input_ids = torch.randint(1, 100, (B, T), generator=g).to(device)
    kwargs = {"attention_mask": torch.ones(B, T, dtype=torch.long, device=device)}
    if variant == "padded":
        # per-row position offsets (left padding), built as (T, B) and transposed: the index
        # reaching gather is a non-contiguous view.
        shift = torch.randint(0, 20, (B,), generator=g)
        pos_tb = (torch.arange(T)[:, None] + shift[None, :]).to(device)
        kwargs["position_ids"] = pos_tb.t()
        assert not kwargs["position_ids"].is_contiguous()
    gy = torch.randn(B, T, 64, generator=g).to(device)
    st0 = _stats()
    with ctx_factory():
        out = model(input_ids=input_ids, output_hidden_states=True, **kwargs)
        loss = (out.last_hidden_state * gy).sum() + out.pooler_output.square().sum()
        loss.backward()
    st1 = _stats()
    outputs = [h.detach() for h in out.hidden_states] + [out.pooler_output.detach()]
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return {"outputs": outputs, "grads": grads, "stats": _delta(st0, st1), "loss": loss.detach()}


# --- (b) top-k routing ----------------------------------------------------------------------

class TinyMoE(nn.Module):
    def __init__(self, hidden=32, experts=4, k=2, capacity=3):
        super().__init__()
        self.router = nn.Linear(hidden, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, hidden, 2 * hidden) * 0.2)
        self.w2 = nn.Parameter(torch.randn(experts, 2 * hidden, hidden) * 0.2)
        self.k, self.capacity = k, capacity

    def forward(self, x):
        B, T, H = x.shape
        E = self.w1.shape[0]
        probs = self.router(x).softmax(-1)                       # (B, T, E)
        _, top_i = probs.topk(self.k, dim=-1)                    # (B, T, k)
        # expert scores: self (B, E, T) and index (B, k, T) are transposed views
        scores = torch.gather(probs.transpose(1, 2), 1, top_i.transpose(1, 2))
        h = torch.einsum("bth,ehf->btef", x, self.w1).relu()
        y_all = torch.einsum("btef,efh->bteh", h, self.w2)       # (B, T, E, H)
        # chosen experts' outputs: index expanded along hidden (stride 0), the seed's layout
        chosen = torch.gather(y_all, 2, top_i.unsqueeze(-1).expand(B, T, self.k, H))
        y = (chosen * scores.transpose(1, 2).unsqueeze(-1)).sum(2)
        # expert choice: each expert takes its top-capacity tokens; self is x expanded over
        # experts, index is the permuted topk result expanded along hidden
        cap_p, cap_i = probs.topk(self.capacity, dim=1)          # (B, C, E)
        tok_idx = cap_i.permute(0, 2, 1).unsqueeze(-1).expand(B, E, self.capacity, H)
        tokens = torch.gather(x.unsqueeze(1).expand(B, E, T, H), 2, tok_idx)
        z = torch.einsum("bech,ehf->becf", tokens * cap_p.permute(0, 2, 1).unsqueeze(-1), self.w1)
        return y, z.relu().sum((1, 2))


def run_moe(device, seed, ctx_factory):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyMoE().to(device)
    g = torch.Generator().manual_seed(seed + 3)
    x = torch.randn(2, 10, 32, generator=g).to(device).requires_grad_(True)
    gy = torch.randn(2, 10, 32, generator=g).to(device)
    gz = torch.randn(2, 64, generator=g).to(device)
    st0 = _stats()
    with ctx_factory():
        y, z = model(x)
        loss = (y * gy).sum() + (z * gz).sum()
        loss.backward()
    st1 = _stats()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    grads["x"] = x.grad.detach().clone()
    return {"outputs": [y.detach(), z.detach()], "grads": grads, "stats": _delta(st0, st1),
            "loss": loss.detach()}


# --- comparison -----------------------------------------------------------------------------

def compare_runs(native_res, ours_res, tol=GRAD_TOL) -> list:
    problems = []
    for k, (a, b) in enumerate(zip(ours_res["outputs"], native_res["outputs"])):
        m = specs.bitwise_mismatch(a, b, what=f"outputs[{k}]")
        if m:
            problems.append(m)
    for name, gn in native_res["grads"].items():
        go = ours_res["grads"].get(name)
        if go is None:
            problems.append(f"grads: {name} missing")
        elif not torch.allclose(go, gn, **tol):
            problems.append(f"grads: {name} max abs diff {(go - gn).abs().max().item():.3e}")
    return problems


def _ours(sw):
    return lambda: sw.use(include=["gather"])


def _compare(run, device, seed, sw, *args):
    """native vs routed. On CUDA the bitwise claim needs a deterministic device: if two
    native runs already differ (cuBLAS / atomics), outputs are compared with allclose and
    the test says so; on the CPU outputs are always compared bitwise."""
    native_res = run(device, seed, specs.native, *args)
    ours_res = run(device, seed, _ours(sw), *args)
    problems = compare_runs(native_res, ours_res)
    note = ""
    if problems and device != "cpu":
        again = run(device, seed, specs.native, *args)
        if any(p.startswith("outputs") for p in compare_runs(native_res, again)):
            note = " (native itself is not bitwise reproducible on this device: outputs allclose)"
            problems = [p for p in problems if not p.startswith("outputs")]
            for k, (a, b) in enumerate(zip(ours_res["outputs"], native_res["outputs"])):
                if not torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True):
                    problems.append(f"outputs[{k}] not allclose: max abs diff {(a - b).abs().max().item():.3e}")
    return native_res, ours_res, problems, note


# --- tests ------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("variant", ["default", "padded"])
def test_bert_forward_backward(sw, variant, device, seed):
    pytest.importorskip("transformers")
    native_res, ours_res, problems, note = _compare(run_bert, device, seed, sw, variant)
    assert native_res["stats"]["calls"] == 0
    st = ours_res["stats"]
    assert st["calls"] >= 1, (
        f"gather never ran inside BertModel (transformers "
        f"{__import__('transformers').__version__}): {st}")
    if variant == "padded":
        assert st["noncontig_index"] >= 1, st
    assert st["copies"] == 0 and st["errors"] == 0, st
    assert not problems, fail_msg([f"BERT {variant} on {device} (gather calls {st['calls']}){note}"] + problems)


@pytest.mark.parametrize("device", DEVICES)
def test_moe_topk_routing_forward_backward(sw, device, seed):
    native_res, ours_res, problems, note = _compare(run_moe, device, seed, sw)
    st = ours_res["stats"]
    assert st["calls"] >= 3 and st["noncontig_index"] >= 3 and st["expanded_index"] >= 2, st
    assert st["noncontig_self"] >= 2 and st["copies"] == 0, st
    assert not problems, fail_msg([f"MoE on {device} (stats {st}){note}"] + problems)


@pytest.mark.parametrize("device", DEVICES)
def test_moe_on_cuda_matches_cpu(sw, device, seed):
    """Forward outputs of the routed model agree across devices up to float tolerance (the
    gathers themselves are exact; matmuls differ between devices)."""
    if device == "cpu":
        pytest.skip("CPU is the reference here")
    cpu = run_moe("cpu", seed, _ours(sw))
    gpu = run_moe(device, seed, _ours(sw))
    for a, b in zip(gpu["outputs"], cpu["outputs"]):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-4, atol=1e-5)


def test_transformers_version_is_pinned():
    """requirements.txt pins the transformers these tests were written against."""
    transformers = pytest.importorskip("transformers")
    req = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "requirements.txt")
    pins = {}
    if os.path.exists(req):
        for line in open(req):
            line = line.split("#")[0].strip()
            if "==" in line:
                k, v = line.split("==", 1)
                pins[k.strip().lower()] = v.strip()
    assert "transformers" in pins, "transformers is not pinned in requirements.txt"
    if pins["transformers"] != transformers.__version__:
        pytest.skip(f"installed transformers {transformers.__version__} != pinned {pins['transformers']}")
