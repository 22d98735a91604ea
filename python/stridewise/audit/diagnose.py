"""Diagnosis from the failure pattern.

Each case gets features (which operand has a stride-0 dim, a storage offset, is non-contiguous;
rank, dtype, index kind, variant, parameters...). For an op's failures we score each
predicate by the passing cases it holds for plus twice the failing cases it leaves out (at most
10% of them may be left out) and report the cheapest: with no exceptions that is the one that
holds for the fewest cases (the most specific explanation), and a precise predicate with a stray
exception beats a vague one that happens to hold for every failure. Conjunctions of two
predicates are tried too. "fails only when X (k of n such cases fail, none of the others)" plus
what X usually means ("fails mostly when X (...; j other failing cases outside it)").

This module puts an op's diagnoses together (``diagnose``): the whole set's and each harm
class's (harm.py). The scoring and wording of one group's diagnosis live in explain.py, below
harm.py, which diagnoses each of its groups there.
"""
from __future__ import annotations

from . import harm
# explain.py holds the per-group diagnosis that harm.py needs too (it sits below both); its
# public names are re-exported: they lived here before, and callers use diagnose.<name>
from .explain import (  # noqa: F401
    EXCEPTION_WEIGHT, MAX_EXCEPTIONS, MIN_GROUP, MIN_LIFT, VERB, Cand, Diagnosis, crash_kind,
    diagnose_class, diagnose_group, explain_group)
from .features import OPERAND_WORDS, Pred, features, predicates  # noqa: F401 (re-exported)
from .oracle import FAILING


def diagnose(scope: str, results, classes=None) -> list:
    """Diagnoses for the results of one op (or all ops), the first being the headline.

    When one specific predicate explains every failure (one cause, possibly several symptoms:
    an input written in place also races), it heads the list, followed by the harm classes
    whose own diagnosis differs. Otherwise each harm class (harm.py: crashes, wrong values,
    inputs modified, missing errors, spurious errors by message, device asserts) is diagnosed
    on its own, most harmful first: a few hundred spurious errors with one message never
    decide what the wrong values are blamed on. ``classes``: harm.groups(results) when the
    caller has it."""
    considered = [r for r in results if r.verdict.status not in ("skip", "unsupported", "known")]
    fails = [r for r in considered if r.verdict.status in FAILING]
    if not fails:
        return []
    preds = predicates(considered)
    whole = diagnose_group(scope, fails, considered, preds, "")
    per_class = []
    for g in classes if classes is not None else harm.groups(results, preds):
        for sub in subgroups(g):
            d = sub.get("diagnosis") or diagnose_class(scope, g["class"], sub["results"],
                                                       considered, preds, sub)
            if d is not None:
                d.scope = scope
                per_class.append(d)
    # one cause: the whole set's predicate is exact and every class big enough to tell agrees
    # (a backend that is lossy in float32 and raises KeyError on complex128 fails "only for
    # floating-point dtypes", exactly, but those are two causes)
    exact = whole.predicate != "none" and whole.explained == whole.failing and all(
        d.predicate == whole.predicate for d in per_class if d.failing >= MIN_GROUP)
    if exact or len(per_class) <= 1:
        return [whole] + [d for d in per_class if d.predicate != whole.predicate
                          and d.predicate != "none" and len(per_class) > 1]
    # a class of a few cases that share nothing telling (one wrong value where an input written
    # in place also raced) follows the classes that have a cause: the headline names a cause
    return sorted(per_class, key=lambda d: d.predicate == "none" and d.failing < MIN_GROUP)


def subgroups(g: dict) -> list:
    """The groups of a harm class that are diagnosed apart: each spurious message; the missing
    errors split by what native raises only when native raises more than one thing."""
    if g["class"] == "spurious-error" or len(g["groups"]) > 1:
        return g["groups"]
    return [g]
