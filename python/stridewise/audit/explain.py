"""The diagnosis of one group of failures: which case predicate explains it, in words.

Scoring (diagnose.py's docstring says how a predicate is chosen), the ``Diagnosis`` record, the
per-class diagnosis ``diagnose_class`` and the wording. It sits below harm.py, whose groups are
each diagnosed here, and diagnose.py, which puts the whole-op headline together from those
groups; diagnose.py re-exports every public name, so ``diagnose.Diagnosis`` etc. still work.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .features import OPERAND_WORDS
from .oracle import FAILING


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
    cls: str = ""  # harm class (harm.py) the diagnosis is about; "" for every failure at once
    example: str = ""  # a case id of the group
    phrase: str = ""  # the text without its leading verb: "only when ... (...): cause"
    ops: list = field(default_factory=list)  # the ops whose cases the group holds

    def __post_init__(self):
        if self.explained < 0:
            self.explained = self.failing

    def to_json(self):
        return {"scope": self.scope, "text": self.text, "predicate": self.predicate,
                "failing": self.failing, "explained": self.explained, "covered": self.covered,
                "statuses": self.statuses, "alternatives": self.alternatives, "class": self.cls,
                "example": self.example, "phrase": self.phrase, "ops": self.ops}


# layout class of an operand -> the feature it exercises (for layout:<operand>=<class> keys)
_LAYOUT_FEATURE = {"expand": "stride0", "expand_all": "stride0", "expand_nondim": "stride0",
                   "transpose": "noncontig", "permute": "noncontig", "step_slice": "noncontig",
                   "compound": "noncontig", "compound_writable": "noncontig",
                   "deep_compound": "noncontig", "offset": "offset"}


def _operands_with(feature: str, fails) -> list:
    """Operands for which ``feature`` (stride0 | noncontig | offset) holds in most of ``fails``
    (>= 90%; else every operand it holds for in any of them), in a stable order."""
    counts: dict = {}
    for r in fails:
        for k, v in r.features.items():
            if k.endswith("." + feature) and v and not k.startswith("any."):
                counts[k.split(".")[0]] = counts.get(k.split(".")[0], 0) + 1
    most = [o for o, n in counts.items() if n >= 0.9 * len(fails)]
    return sorted(most or counts, key=lambda o: (list(OPERAND_WORDS).index(o)
                                                 if o in OPERAND_WORDS else 9, o))


def _words(operands) -> str:
    return " / ".join(OPERAND_WORDS.get(o, o) for o in operands) or "an operand"


def _layout_explain(o: str, feature: str, st: set) -> str:
    """What ignoring operand ``o``'s layout does, named: 'the index is read as contiguous
    memory (its strides are ignored)'; for crashes, where the read goes."""
    w = OPERAND_WORDS.get(o, o)
    if feature == "offset":
        return f"the storage offset of {w} is ignored"
    crash = st <= {"crash", "device-assert"}
    if o == "out":
        return ("out= strides are ignored: the result is written as if out were contiguous"
                + (", past its storage" if crash else ""))
    notes = ["its strides are ignored"]
    if o == "idx" and not crash and ("crash" in st or feature == "stride0"):
        notes.append("past its storage when expanded")
    return (f"{w} is read as contiguous memory ({'; '.join(notes)})"
            + (": reads past its storage" if crash and feature == "stride0" else ""))


_OVERLAP = "more than one element of the written-to tensor refers to a single memory location"


def _explain(key: str, fails, considered) -> str:
    st = {r.verdict.status for r in fails}
    reasons = {r.verdict.reason for r in fails}
    base = key.split("&")[0]
    if reasons <= {"missing-error", "error-type"} and fails and sum(
            _OVERLAP in (r.verdict.detail or "") for r in fails) >= 0.9 * len(fails):
        # what native raises says which check is missing (not the layout predicate)
        return ("writing in place into a self-overlapping (expanded) tensor is not refused: "
                f"native PyTorch raises 'unsupported operation: {_OVERLAP}'")
    if base.startswith("any."):
        feature = base[4:]
        who = _operands_with(feature, fails)
        if feature == "offset":
            return f"the storage offset of {_words(who)} is ignored"
        return "; ".join(_layout_explain(o, feature, st) for o in who) or \
            "an operand is read as contiguous memory (its strides are ignored)"
    if base.startswith("layout:") and "=" in base:
        o, v = base[7:].split("=", 1)
        if v in _LAYOUT_FEATURE:
            return _layout_explain(o, _LAYOUT_FEATURE[v], st)
        return _by_reason(fails)
    if base.endswith((".stride0", ".noncontig", ".offset")):
        o, feature = base.split(".", 1)
        return _layout_explain(o, feature, st)
    if base == "rank=0":
        return "0-dim tensors mishandled (a tensor with no dims is indexed as if it had one)"
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
    if base == "grad.repeats" or (base == "kind=dup" and fails and all(
            (r.verdict.reason or "").startswith("backward") for r in fails)):
        return ("the gradient terms of repeated indices are not all summed (the backward "
                "overwrites, or races, where it must accumulate)")
    if base == "grad_out.strided":
        return "the upstream gradient is read as contiguous memory (its strides are ignored)"
    if base == "kind=dup":
        return "duplicate indices mishandled (lost or racing updates)"
    if base == "kind=wide":
        return "a fast path for wide inner dims is wrong"
    if base == "kind=empty":
        return "size-0 dims mishandled"
    if base == "always":
        return "the kernel is wrong regardless of layout"
    if base == "floating" or (base.startswith(("dtype=", "elem_size=")) and fails and all(
            "accumulation" in (r.verdict.detail or "") for r in fails)):
        return "floating-point results differ beyond the accumulation tolerance (precision lost)"
    return _by_reason(fails)


_REASON_WORDS = {
    "input-modified": "an input is modified (the out-of-place form writes into its input)",
    "outside-view-written": "writes land outside the written view (its strides or offset are ignored)",
    "outside-storage-written": "writes run past a tensor's storage into the poisoned margin (a "
                               "view read or written as if it were dense, or past its end)",
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


# what a harm class's cases do, as the verb of its diagnosis
VERB = {"": "fails", "crash": "crashes", "wrong": "is wrong", "input-modified": "modifies an input",
        "missing-error": "raises no (or the wrong) error", "spurious-error": "raises",
        "device-assert": "asserts on the device", "backward": "fails in backward"}

_CRASH_KINDS = (("illegal memory access|illegal address", "illegal address"),
                ("misaligned address", "misaligned address"), ("SIGSEGV", "segfault"),
                ("SIGBUS", "bus error"), ("SIGABRT|abort", "abort"),
                ("device-side assert|Assertion", "device-side assert"),
                ("no answer within|hang", "hang"))


def crash_kind(group) -> str:
    """The commonest way the cases of ``group`` crashed ('illegal address', 'segfault', ...)."""
    import re

    counts: dict = {}
    for r in group:
        text = f"{r.verdict.detail or ''} {getattr(r, 'exc', '') or ''}"
        for pat, name in _CRASH_KINDS:
            if re.search(pat, text, re.I):
                counts[name] = counts.get(name, 0) + 1
                break
    return max(counts.items(), key=lambda kv: kv[1])[0] if counts else ""


def diagnose_class(scope, cls, group, considered, preds, sub=None):
    """The diagnosis of one harm class (or one spurious-error message) alone: the other
    classes' failures are left out of the evidence (a case that raised never computed a value,
    so it says nothing for or against a layout predicate of the wrong values)."""
    if not group:
        return None
    gids = {id(r) for r in group}
    mine = [r for r in considered if id(r) in gids or r.verdict.status not in FAILING]
    verb = VERB.get(cls, cls)
    if cls == "crash":
        kind = crash_kind(group)
        verb += f" ({kind})" if kind else ""
    elif cls == "spurious-error" and sub is not None and sub.get("exception"):
        verb += f" {sub['exception']}: {sub['message'][:80]}"
    elif cls == "missing-error" and sub is not None and sub.get("message"):
        verb += f" where native raises {sub['exception']}: {sub['message'][:80]}"
    d = diagnose_group(scope, group, mine, preds, cls, verb)
    d.cls, d.example = cls, group[0].case.id if hasattr(group[0], "case") else ""
    return d


MIN_GROUP = 3  # a smaller group is diagnosed only by one predicate that holds for it alone (a
# conjunction that singles out one or two cases always exists and explains nothing)
MIN_LIFT = 1.5  # a predicate heads a group only if the group's share of failures inside it is
# at least this many times its share overall: "from rank 1 up" over nearly every case explains
# nothing, however many failures it holds


def _informative(c, group, considered) -> bool:
    if c.n == len(group) == c.hit:
        return True
    share = len(group) / max(1, len(considered))
    return c.n < len(considered) and (c.hit / c.n) >= MIN_LIFT * share


def diagnose_group(scope, group, considered, preds, label, verb=None):
    ranked = _best(group, considered, preds)
    verb = verb or VERB.get(label, label)
    ops = sorted({r.case.op for r in group if hasattr(r, "case")})
    statuses: dict = {}
    for r in group:
        statuses[r.verdict.status] = statuses.get(r.verdict.status, 0) + 1
    if len(group) == len(considered) and (not ranked or ranked[0].n == len(considered)):
        tail = f"on every case: {_explain('always', group, considered)}"
        return Diagnosis(scope, f"{verb} {tail}", "always", len(group), len(considered), statuses,
                         cls=label, phrase=tail, ops=ops)
    ranked = [c for c in ranked if _informative(c, group, considered)]
    if ranked and len(group) < MIN_GROUP and (ranked[0].n != ranked[0].hit or ranked[0].miss
                                             or isinstance(ranked[0].pred, tuple)):
        tail = (f"in {len(group)} of {len(considered)} cases: too few to tell what they share "
                "(see the example)")
        return Diagnosis(scope, f"{verb} {tail}", "none", len(group), len(considered), statuses,
                         cls=label, phrase=tail, ops=ops)
    if not ranked:
        tail = (f"in {len(group)} of {len(considered)} cases with no single feature in common "
                "(see the failing cases)")
        return Diagnosis(scope, f"{verb} {tail}", "none", len(group), len(considered), statuses,
                         cls=label, phrase=tail, ops=ops)
    c = ranked[0]
    key, phrase = _key_phrase(c.pred, group)
    inside = [r for r in group if id(r) in c.cov]
    expl = _explain(key, inside, considered)
    if label in _RESTATED and expl and expl == _by_reason(inside):
        expl = ""  # "raises errors where native does not" says nothing its class does not
    others = c.n - c.hit
    conn = "" if phrase.startswith(("above", "in the", "for ", "with ", "from ")) else "when "
    tail = (f"{'mostly' if c.miss else 'only'} {conn}{phrase} ({c.hit} of {c.n} such cases"
            + (f"; the other {others} pass" if others else ", all of them")
            + (f"; {c.miss} other failing case{'s' if c.miss > 1 else ''} outside it"
               if c.miss else "") + ")"
            + (f": {expl}" if expl else ""))
    alts = [(_key_phrase(x.pred, group)[1], x.n, x.miss) for x in ranked[1:]
            if x.n <= 0.85 * len(considered)][:3]
    return Diagnosis(scope, f"{verb} {tail}", key, len(group), c.n, statuses,
                     [f"{ph} ({n} cases" + (f", {m} failing outside" if m else "") + ")"
                      for ph, n, m in alts], c.hit, cls=label, phrase=tail, ops=ops)


# classes whose name already says what the dominant failure reason would
_RESTATED = ("missing-error", "spurious-error")


def _key_phrase(p, group=()):
    if isinstance(p, tuple):
        parts = [_key_phrase(x, group) for x in p]
        return "&".join(k for k, _ in parts), " and ".join(ph for _, ph in parts)
    phrase = p.phrase
    if "{eg}" in phrase:
        egs = [r.features.get("idx.big") for r in group if r.features.get("idx.big")]
        phrase = phrase.replace("{eg}", f" (e.g. {min(egs)})" if egs else "")
    return p.key, phrase



def explain_group(group, considered, preds, cls="", sub=None) -> str:
    """One group's diagnosis as a phrase ("is wrong only when ... (k of n such cases ...)"), or
    "" when no feature explains it (a predicate that merely covers every case never heads it)."""
    d = diagnose_class("", cls, group, considered, preds, sub)
    return d.text if d is not None and d.predicate != "none" else ""
