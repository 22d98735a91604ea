"""torch.compile support for routing: the one module that touches Inductor internals.

Contract (docs/python_api.md, "torch.compile, torch.export, opcheck"):

- While an op is routed (enable()/use()), Inductor compiles the routed ``aten::`` nodes of
  every graph it compiles (forward and backward graphs; ops that Inductor's decompositions
  produce, e.g. take_along_dim -> gather) as calls through the dispatcher ("fallback" kernels)
  instead of generating its own code for them. The compiled code calls ``aten::gather`` etc.
  when it runs, so the routing in effect at CALL time picks the kernel: stridewise while the op
  is routed, ATen's eager kernel after disable().
- A graph compiled while an op was NOT routed keeps Inductor's generated code for that op:
  stridewise does not reach it, even when routing is enabled later, until it is recompiled
  (torch.compiler.reset()). Dynamo has no guard on the routing, so it does not recompile by
  itself.

Why this mechanism (and not a TorchFunctionMode that maps torch.gather to the stridewise op):
a mode would make Dynamo recompile on routing changes, but it slows every eager torch call made
while routing is on (measured: 1.4 -> 3.8 us for a small add on CPU), is thread-local while the
dispatcher routing is process-wide, and sees only Python-level torch.gather calls (not the
gather inside take_along_dim, nor the scatter_add of gather's backward, nor the scatter family,
which has no stridewise:: op).

Mechanism: a CustomGraphPass appended to ``torch._inductor.config.post_grad_custom_post_pass``
that sets ``node.meta["should_fallback"]`` on the routed ops' nodes, which makes Inductor's
GraphLowering emit a FallbackKernel for them (the mechanism torch's own test helper
torch.testing._internal.inductor_utils.patch_custom_fallback_pass uses). Its uuid() names the
routed ops, so Inductor's FX graph cache and the AOTAutograd cache never return a graph
compiled with other routing. The pass is in the config only while some op is routed (other
passes there are kept, in order). These are private torch APIs: if they are missing, sync()
warns once and compiled code uses Inductor's own kernels for routed ops;
tests/test_custom_op.py fails if the pass stops taking effect.

Importing Inductor costs seconds, so it is never imported here: if ``torch._inductor.config``
is not loaded yet when routing is enabled, the pass is installed when it is (a one-shot import
hook for that module alone).
"""
from __future__ import annotations

import importlib.abc
import sys
import warnings
from typing import Any, Iterable, List, Optional

import torch

_CONFIG = "torch._inductor.config"
_KEY = "post_grad_custom_post_pass"
_PASS_VERSION = 1

_packets: Optional[dict] = None


def packets() -> dict:
    """The aten:: packets whose overloads each routable op name covers (functional, in-place and
    out= forms), from the native op table (core/include/stridewise/ops.def)."""
    global _packets
    if _packets is None:
        rows = (r.split() for r in torch.ops.stridewise._op_table())
        _packets = {row[0]: tuple(row[2:]) for row in rows}
    return _packets


_pass: Optional[Any] = None  # the installed pass object (None: not installed)
_saved: Any = None  # the config value our install replaced
_hook: Optional["_InstallOnImport"] = None
_warned = False


def routed_targets(ops: Iterable[str]) -> frozenset:
    """The aten OpOverloads a set of routed op names covers."""
    out = set()
    for op in ops:
        for name in packets().get(op, ()):
            packet = getattr(torch.ops.aten, name)
            out.update(getattr(packet, ov) for ov in packet.overloads())
    return frozenset(out)


def _routed_now() -> List[str]:
    # The native routing is the truth (stridewise::enable from C++ changes it too).
    return sorted(torch.ops.stridewise._enabled())


def _warn(why: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(f"stridewise: {why}; torch.compile'd code will run Inductor's own kernels "
                      "for routed ops (torch.ops.stridewise.gather still runs stridewise)",
                      RuntimeWarning, stacklevel=3)


def _make_pass() -> Optional[Any]:
    try:
        from torch._inductor.custom_graph_pass import CustomGraphPass
    except ImportError as e:
        _warn(f"torch._inductor.custom_graph_pass.CustomGraphPass is unavailable ({e})")
        return None

    class RoutedFallbackPass(CustomGraphPass):
        """Marks the nodes of the ops routed at compile time as dispatcher fallbacks."""

        def __call__(self, graph: torch.fx.Graph) -> None:
            targets = routed_targets(_routed_now())
            for node in graph.nodes:
                if node.op == "call_function" and node.target in targets:
                    node.meta["should_fallback"] = True

        def uuid(self) -> Any:
            # Part of Inductor's cache keys: a graph compiled under other routing never matches.
            return ("stridewise.RoutedFallbackPass", _PASS_VERSION, tuple(_routed_now()))

    return RoutedFallbackPass()


def _install(config: Any) -> None:
    global _pass, _saved
    if _pass is not None and _contains(getattr(config, _KEY, None), _pass):
        return
    if not hasattr(config, _KEY):
        _warn(f"{_CONFIG} has no {_KEY!r}")
        return
    p = _make_pass()
    if p is None:
        return
    current = getattr(config, _KEY)
    if current is None:
        new: Any = p
    elif isinstance(current, (list, tuple)):
        new = list(current) + [p]
    else:
        new = [current, p]
    setattr(config, _KEY, new)
    _pass, _saved = p, current


def _contains(value: Any, p: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(x is p for x in value)
    return value is p


def _uninstall(config: Any) -> None:
    global _pass, _saved
    if _pass is None:
        return
    current = getattr(config, _KEY, None)
    if isinstance(current, (list, tuple)) and _contains(current, _pass):
        rest = [x for x in current if x is not _pass]
        # Restore the exact value we replaced when nothing else changed since.
        if rest == (list(_saved) if isinstance(_saved, (list, tuple)) else [_saved]):
            setattr(config, _KEY, _saved)
        else:
            setattr(config, _KEY, rest or None)
    elif current is _pass:
        setattr(config, _KEY, _saved)
    # else: someone replaced the value since; theirs stays.
    _pass, _saved = None, None


def sync() -> None:
    """Brings Inductor's config in line with the current routing (enable()/disable() call it):
    the pass is installed while some op is routed, removed when none is."""
    config = sys.modules.get(_CONFIG)
    routed = bool(_routed_now())
    if config is None:
        if routed:
            _watch_import()
        else:
            _unwatch()
        return
    if routed:
        _install(config)
    else:
        _uninstall(config)


def installed() -> bool:
    """True when the pass is in Inductor's config now."""
    config = sys.modules.get(_CONFIG)
    return config is not None and _pass is not None and _contains(getattr(config, _KEY, None),
                                                                  _pass)


# ---- Inductor's out-variant lowering of custom ops ---------------------------------------------


def keep_functional_ops_off_out_lowering() -> bool:
    """Inductor (torch 2.13, FallbackKernel.create) lowers a functional custom op that has a
    Tag.out overload in its packet to a call of that overload, emitting the tensor arguments
    first and the others after them: ``stridewise.gather.out(self, index, dim, False,
    sparse_grad=False, out=buf)``, which is wrong for gather's (self, dim, index) order and
    fails at run time. gather.out needs Tag.out (functionalization of out= custom ops), so
    Inductor's lookup (torch._library._out_variant.to_out_variant, imported by Inductor at each
    lowering) is wrapped to answer "no out variant" for stridewise:: ops only; Inductor then
    emits the functional op itself, in schema order. Done at import (the module is light; no
    Inductor import). Returns whether the wrapper is in place (False: no such lookup in this
    torch, so nothing to avoid)."""
    try:
        from torch._library import _out_variant as ov
    except ImportError:
        return False
    orig = getattr(ov, "to_out_variant", None)
    if orig is None:
        return False
    if getattr(orig, "_stridewise_wrapped", False):
        return True

    def to_out_variant(op: Any) -> Any:
        if getattr(op, "namespace", None) == "stridewise":
            return None
        return orig(op)

    to_out_variant._stridewise_wrapped = True  # type: ignore[attr-defined]
    to_out_variant.__wrapped__ = orig  # type: ignore[attr-defined]
    ov.to_out_variant = to_out_variant
    return True


# ---- one-shot import hook for torch._inductor.config ------------------------------------------


class _Loader(importlib.abc.Loader):
    """Wraps the real loader of torch._inductor.config; runs sync() once it has executed."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        try:
            sync()
        except Exception as e:  # noqa: BLE001 - never break the user's import of Inductor
            _warn(f"installing the routing pass failed ({type(e).__name__}: {e})")

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for inspect
        return getattr(self._inner, name)


class _InstallOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _CONFIG:
            return None
        _unwatch()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def _watch_import() -> None:
    global _hook
    if _hook is None:
        _hook = _InstallOnImport()
        sys.meta_path.insert(0, _hook)


def _unwatch() -> None:
    global _hook
    if _hook is not None:
        if _hook in sys.meta_path:
            sys.meta_path.remove(_hook)
        _hook = None
