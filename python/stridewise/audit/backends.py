"""--backend MODULE[:CALL[(ARGS)]]: import a third-party module and enable its kernels.

Examples::

    --backend stridewise                      # import stridewise; stridewise.enable()
    --backend my_kernels                      # import my_kernels; my_kernels.enable()
    --backend my_kernels:install              # ...; my_kernels.install()
    --backend 'tests/planted_backend:enable(flat_index)'   # a path works too; bare words are str
    --backend "flag_gems:enable()"

``--flush MODULE:CALL[(ARGS)]`` names a call that surfaces errors the backend reports after the
call that caused them, e.g. ``--flush 'stridewise:check_errors(True)'`` for stridewise's deferred
CUDA check mode. It is stored with the backend (``spec["flush"]``).

Only workers import the backend; the parent (which computes the native CPU oracle) never does,
so a backend whose import alone registers kernels cannot leak into the oracle.
"""
from __future__ import annotations

import ast
import functools
import importlib
import os
import re
import sys

_SPEC = re.compile(r"^(?P<mod>[^:()]+?)(?::(?P<call>[A-Za-z_][\w.]*)(?:\((?P<args>.*)\))?)?$")


class BackendError(RuntimeError):
    pass


def parse(text: str) -> dict:
    m = _SPEC.match(text.strip())
    if not m:
        raise BackendError(f"cannot read --backend {text!r}: expected MODULE[:CALL[(ARGS)]], "
                           "e.g. my_kernels, my_kernels:enable, 'pkg/dir:enable(fast)'")
    mod, call, args = m.group("mod"), m.group("call") or "enable", m.group("args")
    path = None
    if os.sep in mod or mod.endswith(".py") or os.path.isdir(mod):
        full = os.path.abspath(mod)
        if not os.path.exists(full):
            raise BackendError(f"--backend {text!r}: {full} does not exist")
        path, base = os.path.dirname(full), os.path.basename(full)
        mod = base[:-3] if base.endswith(".py") else base
    parsed, kwargs = _arguments(text, args)
    return {"text": text, "module": mod, "call": call, "args": parsed, "kwargs": kwargs,
            "path": path}


def _value(node, text: str):
    """A literal, with bare words read as strings (``enable(flat_index, [gather])``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_value(e, text) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Dict):
        return {_value(k, text): _value(v, text) for k, v in zip(node.keys, node.values)}
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise BackendError(f"cannot read --backend {text!r}: {ast.unparse(node)!r} is not a "
                           "literal (numbers, strings, bare words, lists, None, True/False)") from None


def _arguments(text: str, args) -> tuple:
    """(positional, keyword) arguments of ``CALL(ARGS)``: Python's call syntax over literals and
    bare words; what that cannot read (a path: ``enable(hang, /tmp/state)``) is split at top-level
    commas, each piece a literal or else a string."""
    if not args or not args.strip():
        return [], {}
    try:
        call = ast.parse(f"f({args})", mode="eval").body
        return ([_value(a, text) for a in call.args],
                {k.arg: _value(k.value, text) for k in call.keywords})
    except (SyntaxError, BackendError):
        pass
    out = []
    for a in _split_args(args):
        try:
            out.append(ast.literal_eval(a))
        except (ValueError, SyntaxError):
            out.append(a.strip())
    return out, {}


def _split_args(s: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def resolve(spec: dict):
    """Import the module of ``spec`` (from :func:`parse`) and return its call as a function of
    no arguments (the spec's arguments bound)."""
    if spec.get("path") and spec["path"] not in sys.path:
        sys.path.insert(0, spec["path"])
    try:
        mod = importlib.import_module(spec["module"])
    except Exception as e:  # noqa: BLE001
        raise BackendError(f"--backend {spec['text']!r}: import {spec['module']} failed: "
                           f"{type(e).__name__}: {e}") from e
    fn = mod
    for part in spec["call"].split("."):
        if not hasattr(fn, part):
            names = sorted(n for n in dir(mod) if not n.startswith("_") and callable(getattr(mod, n)))
            raise BackendError(f"--backend {spec['text']!r}: {spec['module']} has no "
                               f"{spec['call']!r}; callables there: {', '.join(names) or 'none'}")
        fn = getattr(fn, part)
    return functools.partial(fn, *spec["args"], **spec.get("kwargs", {})), mod


def enable(spec: dict) -> dict:
    """Import the backend module and call its enable function (in a worker). Returns what the
    report records of it; its flush call (--flush), if any, is resolved in the worker by
    :func:`flush_of`."""
    fn, mod = resolve(spec)
    try:
        ret = fn()
    except Exception as e:  # noqa: BLE001
        call = (f"{spec['module']}.{spec['call']}"
                f"({', '.join([*map(repr, spec['args'])] + [f'{k}={v!r}' for k, v in spec.get('kwargs', {}).items()])})")
        refused = override_refused(e)
        if refused:  # the op and torch's reason named up front: the backend never ran anything
            raise BackendError(f"--backend {spec['text']!r}: {call} could not register its kernel: "
                               f"{refused}") from e
        raise BackendError(f"--backend {spec['text']!r}: {call} raised {type(e).__name__}: {e}") from e
    return {"module": spec["module"], "file": getattr(mod, "__file__", None),
            "call": spec["call"], "args": spec["args"], "kwargs": spec.get("kwargs", {}),
            "returned": repr(ret)[:300],
            "version": str(getattr(mod, "__version__", ""))}


# torch.library.Library.impl's refusal to replace a kernel that was registered from Python
# (torch/library.py; raised before anything is registered): the default of its allow_override
# argument is False on torch 2.8-2.12 (2.11 on the H200) and True from 2.13 on.
_OVERRIDE_REFUSED = re.compile(r"already a kernel registered from python overriding (?P<op>[\w.]+)'s "
                               r"behavior for (?P<key>\w+) dispatch key and (?P<ns>\w+) namespace")


def override_refused(e: BaseException) -> str:
    """When ``e`` is torch's refusal to override a Python-registered kernel: a sentence naming
    the overload, the dispatch key, what registered the kernel already there (the dispatch
    table's entry), torch's own message and this torch's allow_override default; else ''."""
    m = _OVERRIDE_REFUSED.search(str(e))
    if not m:
        return ""
    import inspect

    import torch

    q, key = f"{m.group('ns')}::{m.group('op')}", m.group("key")
    there = ""
    try:
        for line in torch._C._dispatch_dump_table(q).splitlines():
            if line.startswith(f"{key}: "):
                there = f" (the kernel there: {line[len(key) + 2:].strip()})"
    except Exception:  # noqa: BLE001 - an overload name torch cannot look up: say less
        pass
    try:
        default = inspect.signature(torch.library.Library.impl).parameters["allow_override"].default
        how = (f"this torch's Library.impl has allow_override={default!r} by default; the backend "
               "can pass allow_override=True")
    except (KeyError, ValueError, TypeError):
        how = "this torch's Library.impl has no allow_override argument"
    return (f"torch {torch.__version__} refuses to override {q} for the {key} dispatch key, which "
            f"already has a kernel registered from Python{there}. torch says: "
            f"{type(e).__name__}: {str(e).strip()} ({how})")


def flush_of(spec: dict):
    """The backend's flush call (``--flush``), or None. The worker runs it after every call of
    the op and the device synchronization: a backend that reports errors after the call that
    caused them (stridewise's deferred CUDA check mode) raises them there, and the error counts
    as the call's."""
    f = spec.get("flush")
    return resolve(f)[0] if f else None


def literal(b):
    """The backend spec ``b`` (parse(), with its flush) as the Python literal a repro script
    embeds (repro.py, large.py): what the script imports and calls to enable the backend."""
    if not b:
        return "None"
    lit = {"module": b["module"], "call": b["call"], "args": b["args"],
           "kwargs": b.get("kwargs", {}), "path": b["path"]}
    if b.get("flush"):
        f = b["flush"]
        lit["flush"] = {"module": f["module"], "call": f["call"], "args": f["args"],
                        "kwargs": f.get("kwargs", {}), "path": f["path"]}
    return repr(lit)
