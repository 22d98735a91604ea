"""Writes docs/fallbacks.md: the rules that hand a stridewise call to ATen's own kernel, per op,
with how often each fired in PyTorch's own test_indexing.py and test_scatter_gather_ops.py
(scripts/pytorch_suite.py's JSON: bench/results/pytorch_suite_before.json, the rules as they
were, and bench/results/pytorch_suite.json, as they are), and the pytest outcomes.

    python scripts/fallbacks_doc.py          # rewrite docs/fallbacks.md
    python scripts/fallbacks_doc.py --check  # exit 1 if docs/fallbacks.md is not what it writes

tests/test_fallbacks_doc.py runs --check, so every count in the doc is the JSON's.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "fallbacks.md"
BEFORE = ROOT / "bench" / "results" / "pytorch_suite_before.json"
NOW = ROOT / "bench" / "results" / "pytorch_suite.json"
FILES = ("test_indexing.py", "test_scatter_gather_ops.py")
SOURCES = {  # the versions the search index held (pytorch/pytorch), by commit
    "test_indexing.py": "017943b70f6920c395e3b6dac100e2cd7ecfa92a",
    "test_scatter_gather_ops.py": "00d73471c2dc65d96b9e799ba1c62933d482c94b",
}

SCATTER = ("scatter", "scatter_add", "scatter_reduce")
DIM_OPS = ("index_add", "index_copy", "index_reduce")
ADV = ("index", "index_put", "take", "put")

# What each rule is, whether ATen's semantics force it, and what became of it.
# forced: "yes" (ATen's own error or behaviour must be ATen's), "no" (the core could run it),
# "limit" (a limit of the core, not of ATen's semantics).
RULES = {
    "unmapped_dtype": ("yes", "kept",
                       "a dtype the core has no entry for (quantized, bits, sub-byte): ATen's "
                       "kernel raises or runs it"),
    "dtype_rejected": ("yes", "kept",
                       "ATen's kernel raises NotImplementedError for the dtype (with this "
                       "combine, on this device): its error, word for word. index_fill: a "
                       "dtype outside ATen's fill list (uint16/32/64, float8, bits)"),
    "dtype_moved": ("no", "CPU: removed; CUDA: kept",
                    "a dtype without arithmetic in the core, in an op that only moves bytes. "
                    "The CPU now moves every dtype ATen's CPU kernel moves "
                    "(tests/test_dtype_rules.py); ATen's CUDA coverage is not measured here"),
    "dtype_arith": ("no", "kept (open)",
                    "ATen computes in a dtype the core has no arithmetic for (index_put "
                    "accumulate of complex32/float8, index_add of complex32)"),
    "complex_mean": ("no", "CPU: removed; CUDA: kept",
                     "scatter_reduce mean of a complex self: ATen divides every position by "
                     "its count as complex division, also positions no index reaches (by "
                     "1 + 0i). The CPU core now does the same; the CUDA kernels do not yet"),
    "reduce_dtype": ("no", "kept (open)",
                     "index_reduce of a bool or complex self: ATen accepts or refuses it per "
                     "internal path (2-D with include_self computes prod; 1-D raises)"),
    "complex_product": ("yes", "kept",
                        "ATen's CPU complex product is neither formula the core has (never on "
                        "torch 2.13's x86 builds, any ATEN_CPU_CAPABILITY)"),
    "alpha_kind": ("no", "kept (open)",
                   "index_add with a floating alpha on an integral self, or a complex alpha "
                   "on a real one: ATen converts the alpha its own way"),
    "empty_self": ("no", "kept (open)",
                   "an empty self with a non-empty index: ATen checks the range or not per "
                   "path"),
    "source_shape": ("no", "kept (open)",
                     "a source whose shape is not self's with dim resized (shapes ATen's "
                     "checks let through)"),
    "shape_error": ("yes", "kept",
                    "embedding_dense_backward with shapes ATen rejects: its error"),
    "needs_copy": ("yes", "kept",
                   "ATen's result needs a copy or a cast stridewise never makes (embedding "
                   "out= of another dtype or overlapping; embedding_dense_backward's grad "
                   "of another shape than the index's plus D whose leading dims do not "
                   "flatten with the index's (ATen reads it as (numel, D)); put_'s source not "
                   "viewable as the index's shape). An index whose dims do not flatten runs "
                   "on the core since issue 33"),
    "rank": ("limit", "kept", "more than 64 dims (kMaxRank)"),
    "index_terms": ("limit", "kept (open)",
                    "more than 4 index tensors (kMaxIndexTerms; a mask counts its dims, a "
                    "Python True one): raising it changes the CUDA kernels, not measured "
                    "without a GPU"),
    "no_index_terms": ("yes", "kept",
                       "no index tensor: ATen raises (\"at least one index must be provided\" "
                       "or an internal assert); only a 0-dim mask through "
                       "torch.ops.aten.index_put_ computes (a masked fill of all or nothing)"),
    "device_mix": ("yes", "kept",
                   "an index, out= or values on another device than self: ATen moves them "
                   "(a copy) or raises"),
    "expanded_self": ("no", "kept (open)",
                      "index_put_ on a self with internal overlap: ATen warns and writes "
                      "(racily without accumulate, serially with)"),
    "masked_fill": ("no", "CPU: removed; CUDA: kept",
                    "x[mask] = one CPU value: ATen's masked_fill_. The CPU core writes it at "
                    "the mask's nonzero() positions; on CUDA nonzero() would synchronize the "
                    "host, which masked_fill_ does not"),
    "core_declined": ("yes", "kept",
                      "the core's plan or kernel returned kUnsupported (none known)"),
}

# Why a PyTorch test fails where it does (matched on the name without its dtype suffix).
FAILURE_NOTES = {
    "test_index_reduce_reduce_mean_cpu": "float16/bfloat16: stridewise accumulates in float32 "
    "and rounds once (docs/scatter.md, \"Accumulation precision\"); the test's reference "
    "rounds after every step as ATen does, and its default float16 tolerance sees the "
    "difference. Not a fallback",
    "test_index_reduce_reduce_prod_cpu": "the same float16 accumulation difference",
    "test_scatter_reduce_prod_cpu": "the complex128 product, 1 ulp off ATen's fused one "
    "(docs/scatter.md, \"Complex product\"); fixed",
    "test_gather_cpu": "ATen 2.13's CPU gather has no uint16/32/64 kernel (NotImplementedError); "
    "the test file is newer than torch 2.13. Routed, stridewise's gather moves these dtypes: it "
    "differs from 2.13 there",
}


def _note(test: str) -> str:
    base = test.split("::")[-1]
    for key, why in FAILURE_NOTES.items():
        if base.startswith(key):
            return why
    return "not explained here"


# The rules each op can take (adapter/scatter.cpp, index_dim.cpp, index_adv.{h,cpp}).
BY_OP = [(op, r) for op in SCATTER for r in (
    "unmapped_dtype", "dtype_rejected", "complex_product", "rank", "core_declined")
    if not (op == "scatter_add" and r == "complex_product")]
BY_OP.insert(BY_OP.index(("scatter_reduce", "complex_product")), ("scatter_reduce", "complex_mean"))
BY_OP += [("index_select", r) for r in ("unmapped_dtype", "dtype_moved", "empty_self", "rank")]
BY_OP += [(op, r) for op in DIM_OPS for r in (
    ("reduce_dtype",) if op == "index_reduce" else ()) + (
    "unmapped_dtype", "dtype_rejected") + (("dtype_arith", "alpha_kind") if op == "index_add"
                                          else ("dtype_moved",) if op == "index_copy" else ()) + (
    "empty_self", "source_shape", "rank", "core_declined")]
BY_OP += [("embedding", r) for r in ("needs_copy", "unmapped_dtype", "dtype_moved", "empty_self",
                                     "rank")]
BY_OP += [("embedding_dense_backward", r) for r in ("shape_error", "unmapped_dtype",
                                                    "dtype_rejected", "needs_copy")]
BY_OP += [("index_fill", r) for r in ("device_mix", "dtype_rejected", "rank", "core_declined")]
BY_OP += [("index", r) for r in ("device_mix", "unmapped_dtype", "dtype_moved", "no_index_terms",
                                 "index_terms", "rank", "core_declined")]
BY_OP += [("index_put", r) for r in ("device_mix", "expanded_self", "masked_fill",
                                     "unmapped_dtype", "dtype_rejected", "dtype_moved",
                                     "dtype_arith", "no_index_terms", "index_terms", "rank",
                                     "core_declined")]
BY_OP += [("take", r) for r in ("device_mix", "unmapped_dtype", "dtype_rejected", "dtype_moved",
                                "rank", "core_declined")]
BY_OP += [("put", r) for r in ("device_mix", "unmapped_dtype", "dtype_rejected", "rank",
                               "needs_copy", "core_declined")]


def _count(run: dict, name: str, op: str, rule: str) -> int:
    ops = run["files"][name]["routing_on"]["ops"]
    return ops.get(op, {}).get("fallback_reasons", {}).get(rule, 0)


def _fired(run: dict) -> set:
    out = set()
    for e in run["files"].values():
        for op, s in e["routing_on"]["ops"].items():
            out |= {(op, r) for r in s.get("fallback_reasons", {})}
    return out


def render(before: dict, now: dict) -> str:
    missing = (_fired(before) | _fired(now)) - set(BY_OP)
    if missing:
        raise SystemExit(f"rules fired that the table does not list: {sorted(missing)}")
    L = []
    w = L.append
    w("# Fallbacks: when stridewise hands a call to ATen")
    w("")
    w("<!-- written by scripts/fallbacks_doc.py from bench/results/pytorch_suite*.json; "
      "tests/test_fallbacks_doc.py checks it -->")
    w("")
    w("A routed call goes to ATen's own kernel (ATen's result, or ATen's error word for word) "
      "when a rule below says so. Each call counts once in `stridewise.stats()[op][\"fallback\"]`"
      " and under its rule's name in `stats()[op][\"fallback_reasons\"]`. A rule is **forced** "
      "when ATen's semantics leave no other choice (ATen's own error must be raised, or ATen "
      "moves data between devices); **limit** marks a limit of the core rather than of ATen; "
      "the others are gaps: removed where the core now runs the calls, open otherwise.")
    w("")
    w("## How often each rule fired in PyTorch's own tests")
    w("")
    w("Counts of calls per rule while PyTorch's `test/test_indexing.py` and "
      "`test/test_scatter_gather_ops.py` ran unmodified on the CPU with every stridewise op "
      "routed: **before** = the rules as they were when the counters came in "
      f"(`{before['stridewise']}`), **now** = `{now['stridewise']}`.")
    w("")
    for tag, run in (("before", before), ("now", now)):
        w(f"- {tag}: `{run['command']}` on {run['date']}, torch {run['torch']} "
          f"(CPU capability {run['cpu_capability']}).")
    w("- The test files: the versions the search index holds of pytorch/pytorch, "
      + ", ".join(f"`{n}` at commit `{SOURCES[n][:12]}` (git blob "
                  f"`{now['files'][n]['git_blob'][:12]}`)" for n in FILES)
      + ". `test_scatter_gather_ops.py` is newer than torch 2.13: it imports "
      + ", ".join(f"`{s}`" for s in now["files"]["test_scatter_gather_ops.py"]["routing_on"]
                  ["shims"])
      + " from `torch.testing._internal`, which 2.13 lacks; the runner adds them (the dtype "
        "lists as all_types_and_complex_and(bool, half, bfloat16, uint16, uint32, uint64), the "
        "ROCm predicate as False) without changing the file.")
    w("- Not run (memory of this 23 GB shared machine): "
      + ", ".join(f"`{d.split('::')[1]}`" for n in FILES for d in now["files"][n]["deselected"])
      + ".")
    w("")
    w("| op | rule | forced? | test_indexing.py before → now | test_scatter_gather_ops.py "
      "before → now | status |")
    w("|---|---|---|---|---|---|")
    for op, rule in BY_OP:
        forced, status, _ = RULES[rule]
        counts = " | ".join(f"{_count(before, n, op, rule)} → {_count(now, n, op, rule)}"
                            for n in FILES)
        w(f"| `{op}` | `{rule}` | {forced} | {counts} | {status} |")
    w("")
    w("`gather` has no rule: it runs every call.")
    w("")
    w("## Outcomes")
    w("")
    w("| file | run | routing | passed | failed | skipped |")
    w("|---|---|---|---|---|---|")
    for n in FILES:
        for tag, run in (("before", before), ("now", now)):
            for mode in ("on", "off"):
                o = run["files"][n][f"routing_{mode}"]["outcomes"]
                w(f"| `{n}` | {tag} | {mode} | {o['passed']} | {o['failed'] + o['error']} | "
                  f"{o['skipped']} |")
    w("")
    for n in FILES:
        for tag, run in (("before", before), ("now", now)):
            for mode in ("on", "off"):
                failed = run["files"][n][f"routing_{mode}"]["failed"]
                for note in dict.fromkeys(_note(f) for f in failed):
                    tests = [f.split("::")[-1] for f in failed if _note(f) == note]
                    w(f"- `{n}`, {tag}, routing {mode}: "
                      + ", ".join(f"`{t}`" for t in tests) + f": {note}.")
    w("")
    w("## The rules")
    w("")
    for rule, (forced, status, why) in RULES.items():
        w(f"- `{rule}` ({'forced' if forced == 'yes' else forced if forced == 'limit' else 'not forced'}"
          f"; {status}): {why}.")
    w("")
    return "\n".join(L)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    text = render(json.loads(BEFORE.read_text()), json.loads(NOW.read_text()))
    if a.check:
        if DOC.read_text() != text:
            print(f"{DOC} is not what scripts/fallbacks_doc.py writes from the JSON; rerun it")
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
