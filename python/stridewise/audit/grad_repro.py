"""The backward part of a --grad finding's repro script (repro.py writes the operands and the
forward call before it; grad.py judged the finding)."""
from __future__ import annotations

from . import gen
from .grad import upstream


def repro_check(res, spec, lit, tensor_expr, guard) -> str:
    """The tail of a backward finding's repro script (repro.py writes the operands and the
    forward call before it, and checks nothing of the forward, which passed): the forward again
    with the data operands as leaves, ``torch.autograd.grad`` with the audit's upstream gradient
    (same values, same layout), and the input gradients compared with native CPU's as the audit
    compared them (bitwise where an element got at most one term, else the float64 rule)."""
    gr, case = res.grad_ref, res.case
    up = upstream(case, list(res.ref.expected.shape), res.ref.expected.dtype)
    compared = [n for n, g in gr.grads.items() if g is not None]
    sets = [list(gr.grads)] if gr.error is None else [[n] for n in compared]
    exp = {}
    for n in compared:
        g = gr.grads[n]
        dt = gen.DTYPE_NAME[g.dtype]
        e = {"val": f"storage({lit(g)}, torch.{dt}).reshape({tuple(g.shape)})"}
        if n in gr.tol:
            e["ref64"] = (f"storage({lit(gr.ref64[n])}, torch.{gen.DTYPE_NAME[gr.ref64[n].dtype]})"
                          f".reshape({tuple(g.shape)})")
            e["tol"] = f"storage({lit(gr.tol[n])}, torch.float64).reshape({tuple(g.shape)})"
            e["exact"] = f"storage({lit(gr.exact[n])}, torch.bool).reshape({tuple(g.shape)})"
        exp[n] = "{" + ", ".join(f"{k!r}: {v}" for k, v in e.items()) + "}"
    call = spec.calls["func"]
    return "\n".join([
        "# ---- backward (--grad): the forward passed; its backward is what fails ----",
        f"UPSTREAM = {tensor_expr(up, guard)}  # upstream gradient, layout {gr.upstream}",
        f"LEAF_SETS = {sets!r}  # leaves per backward (each alone where native refuses them together)",
        "EXPECTED_GRADS = {" + ", ".join(f"{n!r}: {v}" for n, v in exp.items()) + "}",
        "failures = []",
        "for names in LEAF_SETS:",
        "    leaves = {n: TENSORS[n].detach().requires_grad_(True) for n in names}",
        "    globals().update(leaves)  # the call reads its operands by name",
        "    try:",
        "        with torch.enable_grad():",
        f"            out = {call}",
        "        grads = torch.autograd.grad(out, [leaves[n] for n in names], UPSTREAM, allow_unused=True)",
        "        sync()",
        "    except Exception as e:",
        "        _kind = device_error(e)",
        "        if _kind:",
        "            device_crash(e, _kind + ' in backward')",
        "        failures.append(f'backward ({names}) raised where native PyTorch does not: {type(e).__name__}: {e}'.splitlines()[0])",
        "        continue",
        "    for n, g in zip(names, grads):",
        "        want = EXPECTED_GRADS.get(n)",
        "        if want is None:",
        "            continue",
        "        if g is None:",
        "            failures.append(f'no gradient for {n} (native has one)')",
        "            continue",
        "        g = g.detach().cpu()",
        "        if tuple(g.shape) != tuple(want['val'].shape) or g.dtype != want['val'].dtype:",
        "            failures.append(f'gradient of {n}: {tuple(g.shape)} {g.dtype}, expected {tuple(want[\"val\"].shape)} {want[\"val\"].dtype}')",
        "            continue",
        "        ok = same_bits(g, want['val'])",
        "        if 'tol' in want:",
        "            r = want['ref64']",
        "            close = ((g.to(r.dtype) - r).abs() <= want['tol']) | (~torch.isfinite(r) & same_bits(g.to(r.dtype), r))",
        "            ok = torch.where(want['exact'], ok, ok | close)",
        "        if not bool(ok.all()):",
        "            pos = tuple((~ok).nonzero()[0].tolist()) if ok.dim() else ()",
        "            failures.append(f'gradient of {n}: {int((~ok).sum())} of {g.numel()} elements differ; first at '",
        "                            f'{list(pos)}: expected {want[\"val\"][pos].item()!r}, got {g[pos].item()!r}')",
        "if failures:",
        "    print(FAILED + ' (backward):\\n  ' + '\\n  '.join(failures))",
        "    sys.exit(1)",
        "print('OK: the gradients match native PyTorch')",
        "sys.exit(0)",
    ])
