"""The README's first screen says what is true (issue 40), checked where a test can check it:

- its list of routed ops is `stridewise.supported_ops()`, in order;
- its precision example computes what it says: the float16 values it quotes, reduced by
  `index_reduce_` mean, give the float64 value it quotes, stridewise the nearest float16 to it,
  and native ATen on the CPU the other value it quotes;
- its PyTorch-suite figures (passed of total, the failing tests, the fallback counts now and
  before) are those of the recorded run, `bench/results/pytorch_suite*.json`;
- every relative link of README.md and docs/*.md names a file of the tree (backticked paths:
  tests/test_docs_paths.py).
"""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _sentence(start: str) -> str:
    i = README.index(start)
    return README[i:README.index("\n\n", i)].replace("\n", " ")


def test_the_routed_op_list_is_supported_ops(sw):
    text = _sentence("Routed ops (`stridewise.supported_ops()`):")
    listed = re.findall(r"`([a-z_]+)`", text.split(":", 1)[1])
    assert listed == list(sw.supported_ops()), (listed, sw.supported_ops())


def test_the_precision_example_computes_what_it_says(sw):
    text = _sentence("**Precision.**")
    m = re.search(r"the float16 values ([\d., ]+?) into one element: float64 gives ([\d.]+), "
                  r"stridewise ([\d.]+) \(its nearest float16\), ATen ([\d.]+)", text)
    assert m, text
    vals = [float(v) for v in m.group(1).replace(" ", "").strip(",").split(",")]
    f64, ours_said, aten_said = (float(m.group(k)) for k in (2, 3, 4))
    src = torch.tensor(vals, dtype=torch.float16)
    assert src.double().tolist() == vals  # the quoted values are float16 values
    idx = torch.zeros(len(vals), dtype=torch.long)

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # index_reduce is in beta
            return torch.zeros(1, dtype=torch.float16).index_reduce_(0, idx, src, "mean", include_self=False)

    assert src.double().mean().item() == f64
    sw.disable()
    aten = run().item()
    with sw.use(include=["index_reduce"]):
        ours = run().item()
    assert ours == ours_said == torch.tensor(f64).half().item(), (ours, ours_said)
    assert aten == aten_said != ours, (aten, aten_said)


def test_the_pytorch_suite_figures_are_the_recorded_run():
    text = _sentence("**Precision.**")
    now = json.loads((ROOT / "bench/results/pytorch_suite.json").read_text())
    before = json.loads((ROOT / "bench/results/pytorch_suite_before.json").read_text())
    on = now["files"]["test_indexing.py"]["routing_on"]
    o = on["outcomes"]
    m = re.search(r"passes (\d+) of (\d+) \(([\d-]+), torch ([\d.]+)\)", text)
    assert m and (int(m.group(1)), int(m.group(2))) == (o["passed"], o["passed"] + o["failed"]), (m and m.groups(), o)
    assert m.group(3) == now["date"] and now["torch"].startswith(m.group(4)), (m.groups(), now["date"], now["torch"])
    failed = sorted(t.split("::")[1] for t in on["failed"])
    assert failed == ["test_index_reduce_reduce_mean_cpu_bfloat16", "test_index_reduce_reduce_mean_cpu_float16",
                      "test_index_reduce_reduce_prod_cpu_float16"], failed  # what the README names

    def fallbacks(run):
        return sum(v["fallback"] for v in run["files"]["test_indexing.py"]["routing_on"]["ops"].values())

    m = re.search(r"(\d+) calls in that suite now .*?, (\d+) when the counters came in", text)
    assert m and (int(m.group(1)), int(m.group(2))) == (fallbacks(now), fallbacks(before)), (
        m and m.groups(), fallbacks(now), fallbacks(before))


def test_every_relative_link_names_a_file():
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    bad = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in link.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            if not (doc.parent / target).exists():
                bad.append(f"{doc.relative_to(ROOT)}: {target}")
    assert not bad, bad
