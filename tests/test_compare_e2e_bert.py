"""End to end (issue 25): a small BERT from transformers (random weights, 2 layers, hidden 64,
dropout on), forward and backward plus a torch.gather, dumped natively and routed through
stridewise, compared with sw-compare:

- native vs routed: PASS, with the self of every overwrite-only op (bernoulli_, fill_, zero_,
  normal_, ...) marked not read, so uninitialized memory is not a difference;
- a weight perturbed in the second run only, by an add_ inside the dump: the first divergent op is
  the first op that reads it, its origin the one-sided add_, and the chain reaches the loss;
- a planted kernel bug in one routed op (one element of one output changed): named as that op,
  introduced there, forward or backward;
- a run whose index is cut short: INCOMPLETE (exit 3), never PASS.
CPU always; CUDA when present (deterministic algorithms, so two native runs agree bitwise)."""
from __future__ import annotations

import contextlib

import pytest
import torch

from conftest import DEVICES, deterministic_device

import stridewise
import stridewise.dump as swdump
from stridewise.dump import compare

transformers = pytest.importorskip("transformers")

from compare_planted_backend import planted_bug  # noqa: E402


device = pytest.fixture(params=DEVICES, name="device")(deterministic_device)


def bert(seed, device):
    from transformers import BertConfig, BertModel
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=32)
    return BertModel(cfg).train().to(device)


def run(root, seed, device, *, routed=False, perturb=False, bug=None):
    """One forward and backward under the dump. The model is built outside it (its weights enter
    from outside the dump); dropout draws from the same seed in every run."""
    m = bert(seed, device)
    g = torch.Generator().manual_seed(seed + 1)
    tok = torch.randint(0, 100, (2, 12), generator=g).to(device)
    gidx = torch.randint(0, 64, (2, 12, 5), generator=g).to(device)
    with contextlib.ExitStack() as stack:
        if bug:
            stack.enter_context(planted_bug(*bug))  # below the dump: it records the bug's output
        stack.enter_context(swdump.dump(root))
        if routed:
            stack.enter_context(stridewise.use())
        torch.manual_seed(seed + 2)
        with torch.no_grad():  # overwrite-only ops on every device (CUDA's dropout is fused):
            m.pooler.dense.reset_parameters()  # uniform_ over weights it does not read
        if perturb:
            with torch.no_grad():
                m.encoder.layer[1].attention.self.query.weight.add_(1e-3)
        out = m(tok).last_hidden_state
        scale = torch.empty_like(out).fill_(0.5)  # fill_ over uninitialized memory
        loss = (out * scale).pow(2).mean() + torch.gather(out, 2, gidx).sum() + m.pooler(out).sum()
        loss.backward()


@pytest.fixture
def native(tmp_path, seed, device):
    run(tmp_path / "native", seed, device)
    return tmp_path / "native"


def test_routed_run_passes_and_overwritten_inputs_are_not_read(tmp_path, exe, seed, device, native):
    run(tmp_path / "sw", seed, device, routed=True)
    r = compare(native, tmp_path / "sw")
    assert r.returncode == 0 and r.verdict == "PASS", (r.report["summary"], r.failing()[:3], r.incomplete)
    not_read = {e["op"] for e in r.entries if e["status"] == "NOT_READ"}
    assert {"aten::uniform_", "aten::fill_"} | ({"aten::bernoulli_"} if device == "cpu" else set()) <= not_read, not_read
    assert all(e["io"] == "input" for e in r.entries if e["status"] == "NOT_READ")
    assert r.report["summary"]["only_a_ops"] == r.report["summary"]["only_b_ops"] == 0
    ops = {e["op"] for e in r.entries}
    assert {"aten::gather", "aten::embedding", "aten::embedding_dense_backward"} <= ops, ops


def test_perturbed_weight_is_traced_to_its_first_reader_and_the_add(tmp_path, exe, seed, device, native):
    run(tmp_path / "perturbed", seed, device, perturb=True)
    r = compare(native, tmp_path / "perturbed")
    assert r.returncode == 1 and r.verdict == "DIVERGED"
    first = r.first_divergent
    assert first["kind"] == "one_sided", first
    assert (first["writer"]["op"], first["writer"]["side"]) == ("aten::add_", "B"), first
    assert first["op"] in ("aten::t", "aten::linear", "aten::addmm", "aten::matmul"), first
    assert first["phase"] == "forward" and first["failing"][0].startswith("in#")
    chain = [c["op"] for c in first["chain"]]
    assert chain[0] == first["op"] and first["chain_total"] > 10, chain
    # nothing earlier differs: every op before it agrees
    before = [e for e in r.entries if e["seq"] is not None and e["seq"] < first["seq"] and e["phase"] == "forward"]
    assert before and all(e["status"] in ("PASS", "IGNORED", "NOT_READ", "ONLY_B") for e in before)
    assert len(r.report["origins"]) <= 3, [(o["op"], o["kind"]) for o in r.report["origins"]]


@pytest.mark.parametrize("op,phase", [("aten::gather", "forward"), ("aten::embedding", "forward"),
                                      ("aten::embedding_dense_backward", "backward")])
def test_planted_kernel_bug_in_a_routed_op_is_named(tmp_path, exe, seed, device, native, op, phase):
    run(tmp_path / "bug", seed, device, routed=True, bug=(op, phase))
    r = compare(native, tmp_path / "bug")
    assert r.returncode == 1
    first = r.first_divergent
    assert (first["op"], first["phase"], first["kind"]) == (op, phase, "introduced"), first
    assert [o["kind"] for o in r.report["origins"]][0] == "introduced"


def test_index_cut_short_is_incomplete(tmp_path, exe, seed, device, native):
    run(tmp_path / "cut", seed, device)
    index = tmp_path / "cut" / "step0" / "rank0" / "index.jsonl"
    lines = index.read_text().splitlines()
    index.write_text("\n".join(lines[:70]) + "\n")
    r = compare(native, tmp_path / "cut")
    assert r.returncode == 3 and r.verdict == "INCOMPLETE" and "ran in A only" in r.incomplete[0], r.incomplete
    r = compare(native, tmp_path / "cut", subset="B")
    assert r.returncode in (0, 3)  # a cut inside an op's records stays damaged
