"""Case features and the predicates the diagnosis scores (diagnose.py).

Each case gets features from its inputs and its native answer: which operand has a stride-0
dim, a storage offset, is non-contiguous; its layout classes, rank, dtype, index dtype and
kind, variant, parameters; whether native raised; whether an index value is negative, >= 2**31
or >= 2**32. A predicate is a named test over those features with the phrase that reads it
("the index has a stride-0 (expanded) dim") and a priority (ties: the more specific kind).
"""
from __future__ import annotations

from dataclasses import dataclass

OPERAND_WORDS = {"self": "self", "idx": "the index", "src": "src", "out": "out=",
                 "grad_out": "the upstream gradient",
                 "written": "the written tensor (self in place, or out=)"}


def grad_features(upstream: str, repeats: bool) -> dict:
    """--grad (grad.py): the features of a case whose backward was judged: the upstream
    gradient's layout (contiguous | transpose | step_slice | expand), and whether some input
    gradient element sums several upstream elements (repeated indices, in backward)."""
    return {"layout:grad_out": upstream, "grad.repeats": bool(repeats)}


def features(spec, built, ref) -> dict:
    import torch

    case = built.case
    f: dict = {"variant": case.variant, "dtype": case.dtype, "idx_dtype": case.idx_dtype,
               "kind": case.kind, "rank": case.rank, "expects_error": ref.error is not None}
    for k, v in case.params:
        f[f"param:{k}"] = v
    elem = None
    for name, val in built.tensors.items():
        ts = [t for t in (val if isinstance(val, list) else [val]) if t is not None]
        f[f"{name}.stride0"] = any(any(st == 0 and sz > 1 for sz, st in zip(t.shape, t.stride()))
                                   for t in ts)
        f[f"{name}.noncontig"] = any(not t.is_contiguous() for t in ts)
        f[f"{name}.offset"] = any(t.storage_offset() > 0 for t in ts)
        f[f"layout:{name}"] = case.layout_of(name)
        if name == "self" and ts:
            elem = ts[0].element_size()
        if name in spec.index_operands:  # or-ed over every index operand
            # in int64: an int32 tensor compared with 2**31 would wrap the bound
            ints = [t.to(torch.int64).abs() for t in ts if t.dtype != torch.bool and t.numel()]
            f["idx.neg"] = f.get("idx.neg", False) or any(
                bool((t < 0).any()) for t in ts if t.dtype != torch.bool and t.numel())
            f["idx.huge"] = f.get("idx.huge", False) or any(bool((t >= 2**31).any()) for t in ints)
            big = [int(t[t >= 2**32].min()) for t in ints if bool((t >= 2**32).any())]
            if big:  # a value 32-bit truncation may wrap into range (smallest one, for the text)
                f["idx.ge32"] = True
                f["idx.big"] = min(big + ([f["idx.big"]] if f.get("idx.big") else []))
            f.setdefault("idx.ge32", False)
    f["elem_size"] = elem
    if built.written:  # the tensor written in place or out=: one name for self and out=, so a
        # kernel that mishandles its target's layout reads as one cause across variants
        for k in ("stride0", "noncontig", "offset"):
            f[f"written.{k}"] = f.get(f"{built.written}.{k}", False)
    f["bad_index"] = case.kind in ("oob", "oobneg", "oobbig") or (
        case.kind == "neg" and ref.error is not None)
    return f


@dataclass
class Pred:
    key: str
    test: object
    phrase: str  # "the index has a stride-0 dim"
    prio: int = 50

    def __call__(self, f) -> bool:
        try:
            return bool(self.test(f))
        except Exception:  # noqa: BLE001
            return False


def predicates(results) -> list:
    ps: list = []
    ops = set()
    for r in results:
        ops.update(k.split(".")[0] for k in r.features if k.endswith(".stride0"))
    for o in sorted(ops):
        w = OPERAND_WORDS.get(o, o)
        ps.append(Pred(f"{o}.stride0", lambda f, o=o: f.get(f"{o}.stride0"),
                       f"{w} has a stride-0 (expanded) dim", 10))
        ps.append(Pred(f"{o}.noncontig", lambda f, o=o: f.get(f"{o}.noncontig"),
                       f"{w} is non-contiguous", 12))
        ps.append(Pred(f"{o}.offset", lambda f, o=o: f.get(f"{o}.offset"),
                       f"{w} has a storage offset", 11))
    ps.append(Pred("any.offset", lambda f: any(v for k, v in f.items() if k.endswith(".offset")),
                   "an operand has a storage offset", 20))
    ps.append(Pred("any.noncontig", lambda f: any(v for k, v in f.items() if k.endswith(".noncontig")),
                   "an operand is non-contiguous", 22))
    ranks = sorted({r.features.get("rank", 0) for r in results})
    if 0 in ranks and len(ranks) > 1:
        ps.append(Pred("rank=0", lambda f: f.get("rank", 0) == 0, "for 0-dim tensors (rank 0)", 15))
    for m in ranks[1:]:
        ps.append(Pred(f"rank>={m}", lambda f, m=m: f.get("rank", 0) >= m, f"from rank {m} up", 15))
    if any("layout:grad_out" in r.features for r in results):  # --grad: backward's own features
        ps.append(Pred("grad_out.strided", lambda f: f.get("layout:grad_out") not in (None, "contiguous"),
                       "the upstream gradient is not contiguous (transposed, step-sliced or "
                       "expanded)", 12))
        ps.append(Pred("grad.repeats", lambda f: f.get("grad.repeats"), "indices repeat (a "
                       "gradient element sums several upstream elements)", 14))
    ps.append(Pred("idx.neg", lambda f: f.get("idx.neg"), "the index has negative values", 14))
    ps.append(Pred("idx.huge", lambda f: f.get("idx.huge"), "an index value is >= 2**31", 14))
    ps.append(Pred("idx.ge32", lambda f: f.get("idx.ge32"), "with index values >= 2**32{eg}", 13))
    ps.append(Pred("bad_index", lambda f: f.get("bad_index"), "an index is out of range", 16))
    ps.append(Pred("expects_error", lambda f: f.get("expects_error"),
                   "native PyTorch raises an error", 30))
    ps.append(Pred("large", lambda f: f.get("kind") == "large", "above 2**31 elements", 13))
    ps.append(Pred("floating", lambda f: str(f.get("dtype")).startswith(("float", "bfloat", "complex")),
                   "for floating-point dtypes", 38))
    for key, prio in (("kind", 25), ("variant", 35), ("dtype", 40), ("idx_dtype", 26),
                      ("elem_size", 41)):
        for v in sorted({str(r.features.get(key)) for r in results} - {"None"}):
            ps.append(Pred(f"{key}={v}", lambda f, key=key, v=v: str(f.get(key)) == v,
                           _phrase(key, v), prio))
    pkeys = sorted({k for r in results for k in r.features if k.startswith("param:")})
    for k in pkeys:
        for v in sorted({str(r.features.get(k)) for r in results}):
            ps.append(Pred(f"{k}={v}", lambda f, k=k, v=v: str(f.get(k)) == v,
                           f"{k[6:]}={v}", 33))
    lkeys = sorted({k for r in results for k in r.features if k.startswith("layout:")})
    for k in lkeys:
        for v in sorted({str(r.features.get(k)) for r in results} - {"contiguous"}):
            ps.append(Pred(f"{k}={v}", lambda f, k=k, v=v: f.get(k) == v,
                           f"{OPERAND_WORDS.get(k[7:], k[7:])} is laid out '{v}'", 45))
    return ps


def _phrase(key, v):
    return {
        "kind": {"dup": "indices repeat", "neg": "indices are negative", "empty": "a dim is 0",
                 "wide": "inner dims are wide (16..48)", "oob": "an index equals/exceeds the size",
                 "oobneg": "an index is below -size",
                 "oobbig": "an index is huge (2**32+k; 2**31-1 for int32 indices)",
                 "rand": "indices are plain random", "large": "above 2**31 elements"}.get(v, v),
        "variant": f"in the {v} variant",
        "dtype": f"for dtype {v}",
        "idx_dtype": f"with {v.replace('i', 'int')} indices",
        "elem_size": f"for {v}-byte element types",
    }[key]
