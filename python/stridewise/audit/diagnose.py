"""Diagnosis from the failure pattern.

Each case gets features (which operand has a stride-0 dim, a storage offset, is non-contiguous;
rank, dtype, index kind, variant, parameters...). For an op's failures we score each
predicate by the passing cases it holds for plus twice the failing cases it leaves out (at most
10% of them may be left out) and report the cheapest: with no exceptions that is the one that
holds for the fewest cases (the most specific explanation), and a precise predicate with a stray
exception beats a vague one that happens to hold for every failure. Conjunctions of two
predicates are tried too. "fails only when X (k of n such cases fail, none of the others)" plus
what X usually means ("fails mostly when X (...; j other failing cases outside it)").
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .oracle import FAILING

OPERAND_WORDS = {"self": "self", "idx": "the index", "src": "src", "out": "out="}


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
    for m in ranks[1:]:
        ps.append(Pred(f"rank>={m}", lambda f, m=m: f.get("rank", 0) >= m, f"from rank {m} up", 15))
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


@dataclass
class Diagnosis:
    scope: str  # op name or "all ops"
    text: str
    predicate: str
    failing: int
    covered: int
    statuses: dict = field(default_factory=dict)
    alternatives: list = field(default_factory=list)
    explained: int = -1  # failing cases the predicate holds for (-1: all of them)

    def __post_init__(self):
        if self.explained < 0:
            self.explained = self.failing

    def to_json(self):
        return {"scope": self.scope, "text": self.text, "predicate": self.predicate,
                "failing": self.failing, "explained": self.explained, "covered": self.covered,
                "statuses": self.statuses, "alternatives": self.alternatives}


def _explain(key: str, fails, considered) -> str:
    st = {r.verdict.status for r in fails}
    reasons = {r.verdict.reason for r in fails}
    base = key.split("&")[0]
    if base == "any.offset":
        who = sorted({k.split(".")[0] for r in fails for k, v in r.features.items()
                      if k.endswith(".offset") and v})
        return f"the storage offset of {' / '.join(OPERAND_WORDS.get(o, o) for o in who)} is ignored"
    if base.endswith(".stride0") or base.endswith(".noncontig"):
        o = base.split(".")[0]
        if o == "idx":
            return ("the index is read as contiguous memory"
                    + (" (past its storage when expanded)" if "crash" in st or base.endswith("stride0") else "")
                    + ": its strides are ignored")
        if o == "out":
            return "out= strides are ignored: the result is written as if out were contiguous"
        return f"{OPERAND_WORDS.get(o, o)} is read as contiguous memory: its strides are ignored"
    if base.endswith(".offset"):
        o = base.split(".")[0]
        return f"the storage offset of {OPERAND_WORDS.get(o, o)} is ignored"
    if base.startswith("rank>="):
        m = int(base[6:])
        below = [r.features.get("rank", 0) for r in considered if r.features.get("rank", 0) < m]
        hi = max(below) if below else None
        gap = f"; ranks {hi + 1}..{m - 1} not tested" if hi is not None and hi < m - 1 else ""
        return (f"a rank limit: dims beyond the first {m - 1} are mishandled"
                + (f" (rank {hi} and below pass{gap})" if hi is not None else ""))
    if base in ("idx.neg", "kind=neg"):
        wrapped = any(r.features.get("idx.neg") and not r.features.get("expects_error")
                      for r in considered)
        return ("negative indices not wrapped" if wrapped
                else "negative indices accepted instead of rejected")
    if base in ("idx.ge32", "idx.huge"):
        if reasons <= {"missing-error"}:
            return ("out-of-range check done on a truncated 32-bit index (the value wraps into "
                    "range)")
        return "index values truncated to 32 bits"
    if base in ("bad_index", "kind=oob", "kind=oobneg", "kind=oobbig", "expects_error"):
        if reasons <= {"missing-error"}:
            return "out-of-range index silently ignored: no error raised"
        if st <= {"crash"}:
            return "an out-of-range index crashes the process instead of raising an error"
        return "out-of-range indices are not rejected"
    if base in ("large", "kind=large"):
        return "wrong above 2**31 elements: 32-bit offset/index arithmetic overflows"
    if base == "kind=dup":
        return "duplicate indices mishandled (lost or racing updates)"
    if base == "kind=wide":
        return "a fast path for wide inner dims is wrong"
    if base == "kind=empty":
        return "size-0 dims mishandled"
    if base == "always":
        return "the kernel is wrong regardless of layout"
    if base == "floating":
        return "floating-point results differ beyond the accumulation tolerance (precision lost)"
    return _by_reason(fails)


_REASON_WORDS = {
    "input-modified": "an input is modified (the out-of-place form writes into its input)",
    "outside-view-written": "writes land outside the written view (its strides or offset are ignored)",
    "missing-error": "no error is raised where native PyTorch raises one",
    "spurious-error": "raises errors where native PyTorch does not",
    "not-aliased": "the in-place/out= form does not return its target",
}


def _by_reason(fails) -> str:
    """The failure reason that explains the group, when one dominates (>= 90% of it): a
    fault rarely shows the same symptom everywhere (writing into an expanded input also
    races, so a few cases show wrong values instead of a modified input)."""
    counts: dict = {}
    for r in fails:
        counts[r.verdict.reason] = counts.get(r.verdict.reason, 0) + 1
    if not counts:
        return ""
    top, n = max(counts.items(), key=lambda kv: kv[1])
    if top not in _REASON_WORDS or n < 0.9 * len(fails):
        return ""
    rest = len(fails) - n
    return _REASON_WORDS[top] + (f" ({rest} other failing case{'s' if rest > 1 else ''}: "
                                 + ", ".join(sorted(k for k in counts if k != top)) + ")"
                                 if rest else "")


EXCEPTION_WEIGHT = 2  # a failure left outside costs as much as two passing cases inside
MAX_EXCEPTIONS = 0.1  # a predicate may leave at most this share of the failures unexplained


@dataclass
class Cand:
    """A candidate explanation: a predicate (or a pair) and how well it separates the failures.

    cost = passing cases it covers + EXCEPTION_WEIGHT * failing cases outside it; the ranking is
    (cost, prio). With no exceptions that is the old rule (fewest cases covered), and a
    predicate that leaves a stray failure or two outside but is far more precise wins over a
    vague one that happens to hold for every failure (e.g. "from rank 2 up")."""
    cost: int
    prio: int
    pred: object  # Pred | (Pred, Pred)
    cov: set  # ids of the considered cases it holds for
    hit: int  # failing cases it holds for
    miss: int  # failing cases it does not hold for (exceptions)

    @property
    def n(self) -> int:
        return len(self.cov)

    @property
    def key(self):
        return (self.cost, self.prio)


def _cand(pred, prio, cid, fail_ids, allowed):
    hit = len(fail_ids & cid)
    miss = len(fail_ids) - hit
    if not hit or miss > allowed:
        return None
    return Cand(len(cid) - hit + EXCEPTION_WEIGHT * miss, prio, pred, cid, hit, miss)


def _best(fails, considered, preds):
    fail_ids = {id(r) for r in fails}
    allowed = int(MAX_EXCEPTIONS * len(fail_ids))
    single = []
    for p in preds:
        c = _cand(p, p.prio, {id(r) for r in considered if p(r.features)}, fail_ids, allowed)
        if c is not None:
            single.append(c)
    single.sort(key=lambda c: c.key)
    pairs = []
    # conjunctions: only of informative predicates, and only when they cut the cover by >= 20%
    top = [c for c in single[:14] if c.n <= 0.85 * len(considered)]
    best = single[0].n if single else 0
    for i in range(len(top)):
        for j in range(i + 1, len(top)):
            ci = top[i].cov & top[j].cov
            if len(ci) <= 0.8 * best:
                c = _cand((top[i].pred, top[j].pred), top[i].pred.prio + top[j].pred.prio + 5,
                          ci, fail_ids, allowed)
                if c is not None and c.key < single[0].key:
                    pairs.append(c)
    return sorted(single + pairs, key=lambda c: c.key)


def diagnose(scope: str, results) -> list:
    """Diagnoses for the results of one op (or all ops): a main one, then per-status ones."""
    considered = [r for r in results if r.verdict.status not in ("skip", "unsupported", "known")]
    fails = [r for r in considered if r.verdict.status in FAILING]
    if not fails:
        return []
    preds = predicates(considered)
    out = []
    groups = [("", fails)]
    by_status: dict = {}
    for r in fails:
        by_status.setdefault(r.verdict.status, []).append(r)
    if len(by_status) > 1:  # per-status detail, for groups big enough to matter
        groups += [(s, rs) for s, rs in sorted(by_status.items())
                   if len(rs) >= max(3, 0.1 * len(fails))]
    for label, group in groups:
        d = _diagnose_group(scope, group, considered, preds, label)
        if d and not (label and out and d.predicate == out[0].predicate):
            out.append(d)
    return out


def _diagnose_group(scope, group, considered, preds, label):
    ranked = _best(group, considered, preds)
    verb = {"": "fails", "crash": "crashes", "wrong": "is wrong", "bad-error": "errs badly"}.get(label, label)
    statuses: dict = {}
    for r in group:
        statuses[r.verdict.status] = statuses.get(r.verdict.status, 0) + 1
    if not ranked or (ranked[0].n == len(considered) and not ranked[0].miss):
        if len(group) == len(considered):
            return Diagnosis(scope, f"{verb} on every case: {_explain('always', group, considered)}",
                             "always", len(group), len(considered), statuses)
        return Diagnosis(scope, f"{verb} in {len(group)} of {len(considered)} cases with no single "
                         "feature in common (see the failing cases)", "none", len(group),
                         len(considered), statuses)
    c = ranked[0]
    key, phrase = _key_phrase(c.pred, group)
    inside = [r for r in group if id(r) in c.cov]
    expl = _explain(key, inside, considered)
    others = c.n - c.hit
    conn = "" if phrase.startswith(("above", "in the", "for ", "with ", "from ")) else "when "
    text = (f"{verb} {'mostly' if c.miss else 'only'} {conn}{phrase} ({c.hit} of {c.n} such cases"
            + (f"; the other {others} pass" if others else ", all of them")
            + (f"; {c.miss} other failing case{'s' if c.miss > 1 else ''} outside it"
               if c.miss else "") + ")"
            + (f": {expl}" if expl else ""))
    alts = [(_key_phrase(x.pred, group)[1], x.n, x.miss) for x in ranked[1:]
            if x.n <= 0.85 * len(considered)][:3]
    return Diagnosis(scope, text, key, len(group), c.n, statuses,
                     [f"{ph} ({n} cases" + (f", {m} failing outside" if m else "") + ")"
                      for ph, n, m in alts], c.hit)


def _key_phrase(p, group=()):
    if isinstance(p, tuple):
        parts = [_key_phrase(x, group) for x in p]
        return "&".join(k for k, _ in parts), " and ".join(ph for _, ph in parts)
    phrase = p.phrase
    if "{eg}" in phrase:
        egs = [r.features.get("idx.big") for r in group if r.features.get("idx.big")]
        phrase = phrase.replace("{eg}", f" (e.g. {min(egs)})" if egs else "")
    return p.key, phrase



def explain_group(group, considered, preds) -> str:
    """One group's diagnosis as a phrase ("fails only when ... (k of n such cases ...)"), or ""
    when no feature explains it (a predicate that merely covers every case never heads it)."""
    if not group:
        return ""
    d = _diagnose_group("", group, considered, preds, "")
    return d.text if d is not None and d.predicate != "none" else ""
