"""python3 -m stridewise audit: audit indexing kernels against native PyTorch.

Exit status: 0 nothing failed, 1 something failed (wrong / crash / bad-error, or an auditor
error, or with --verify-repros a finding that does not reproduce alone or that native PyTorch
fails), 2 the audit could not run (bad arguments, backend import failure, ...: the message
says why).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

EPILOG = """\
auditing a third-party backend (e.g. FlagGems; docs/audit.md "Auditing a third-party backend"):
  python3 -m stridewise audit --device cuda --backend flag_gems:enable --matrix quick --verify-repros
  python3 -m stridewise audit --device cuda --backend my_kernels:enable --ops gather,scatter_add
  python3 script.py cuda [--native]     # a finding's repro script: with the backend / without it

examples:
  python3 -m stridewise audit --device cpu                      # ATen, whole family
  python3 -m stridewise audit --device cuda --backend stridewise --ops gather
  python3 -m stridewise audit --device cpu --backend 'tests/planted_backend:enable(flat_index)' --guard
  python3 -m stridewise audit --case 'gather/idx=expand/r3/float16/s123' --device cuda
  python3 -m stridewise audit --list --ops take --matrix quick
docs: docs/audit.md
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m stridewise audit", description=__doc__,
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("what to audit")
    g.add_argument("--device", default="cpu", help="any device torch accepts: cpu, cuda, cuda:1, npu, ...")
    g.add_argument("--ops", default="all", help="comma list of ops (default all); see --list-ops")
    g.add_argument("--backend", metavar="MODULE[:CALL[(ARGS)]]",
                   help="import MODULE (a name or a path) and call CALL (default enable) in every "
                        "worker; 'stridewise' enables stridewise. Without it: the kernels already "
                        "registered (native ATen)")
    g.add_argument("--flush", metavar="MODULE:CALL[(ARGS)]",
                   help="with --backend: a call run after every call of the op, for a backend that "
                        "raises errors after the call that caused them, e.g. "
                        "'stridewise:check_errors(True)' (stridewise's deferred CUDA check mode)")
    g.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE in workers before the backend (e.g. torch_npu); repeatable")
    g.add_argument("--dtypes", help="comma list of data dtypes (default: every dtype native CPU supports)")
    g.add_argument("--ranks", help="comma list of ranks (default 0..8,10; quick: 0,1,2,3,6,10)")
    g.add_argument("--variants", help="comma list of func,inplace,out (default all)")
    g.add_argument("--matrix", choices=("full", "quick"), default="full")
    g.add_argument("--seed", type=int, default=0, help="seed of every case (part of its id)")
    g.add_argument("--repeat", type=int, default=1, help="run the matrix with N seeds (seed, seed+1, ...)")
    g.add_argument("--limit", type=int, default=0, metavar="N",
                   help="at most N cases per op, chosen (from --seed) to keep every value of every "
                        "matrix dimension at least once, then at random: a sized-down audit for "
                        "scarce device time (default 0: no limit)")
    g.add_argument("--large", action="store_true",
                   help="add the >2**31-element probes (storage stays small; slower)")
    g.add_argument("--large-only", action="store_true", help="run only the >2**31-element probes")
    g.add_argument("--grad", action="store_true",
                   help="also run the backward of every differentiable case (func variant, floating "
                        "dtype, native computes it) with a random upstream gradient (contiguous, "
                        "non-contiguous or expanded) and compare the input gradients with native's "
                        "(docs/audit.md \"--grad\")")
    g.add_argument("--case", action="append", default=[], metavar="ID",
                   help="run just this case id (repeatable); prints its inputs and verdict")
    g.add_argument("--list", action="store_true", help="print the case ids and exit")
    g.add_argument("--list-ops", action="store_true", help="print the ops and their ATen overloads")
    g = p.add_argument_group("how")
    mem = g.add_mutually_exclusive_group()
    mem.add_argument("--guard", action="store_true",
                     help="every input storage ends at a guard page: reads past it fault at once "
                          "(cpu and cuda; refused, with the reason, on a device without guarded memory)")
    mem.add_argument("--margin", action="store_true",
                     help="every storage sits between poisoned margins, compared after the call: "
                          "writes past a storage are found, reads there return poison (the default "
                          "on a device that gives no guarded memory; plain storages otherwise)")
    g.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                   help="worker processes (default: cores - 1)")
    g.add_argument("--timeout", type=float, default=120.0, help="seconds per case before it counts as a hang")
    g.add_argument("--assert-grace", type=float, default=10.0, metavar="SECONDS",
                   help="a worker that printed a device-side assertion and has not answered this "
                        "many seconds later is stuck: kill it and replay the case (default 10)")
    g.add_argument("--threads", type=int, default=1, help="torch threads per worker (default 1)")
    g.add_argument("--start-method", choices=("auto", "fork", "forkserver", "spawn"), default="auto",
                   help="how workers start; auto: fork for --device cpu, forkserver otherwise (a "
                        "process that touched CUDA, even via is_available(), cannot be forked)")
    g.add_argument("--spares", type=int, default=None, metavar="N",
                   help="warm spare workers started ahead: a worker that crashed, asserted or hung "
                        "is replaced at once (default 1 on a device, 0 on cpu)")
    g.add_argument("--run-native", action="store_true",
                   help="with --backend: also run the cases of variants the backend registers no "
                        "kernel for (by default they are reported as native, not run)")
    g.add_argument("--deadline", type=float, default=0.0, metavar="SECONDS",
                   help="hand out no case after SECONDS (the rest are reported as skip: deadline): "
                        "a partial report rather than none when device time is short")
    g.add_argument("--schedule", choices=("affinity", "order"), default="affinity",
                   help="which case a free worker runs next: affinity (default): the next of the "
                        "(op, variant, dtype) bucket it ran last, so each JIT-compiled kernel is "
                        "compiled in one worker; order: the case list in order")
    g.add_argument("--tol-factor", type=float, default=2.0,
                   help="accumulation tolerance factor F: |got-ref64| <= F*eps*(terms+1)*magnitude + atol")
    g.add_argument("--atol", type=float, default=None, help="absolute floor (default F*tiny(dtype))")
    g.add_argument("--exact-accum", action="store_true",
                   help="floating accumulation must match native CPU bitwise (deterministic backends)")
    g.add_argument("--strict-errors", action="store_true",
                   help="an expected error must have native's exception type")
    kn = g.add_mutually_exclusive_group()
    kn.add_argument("--known", dest="known", action="store_true", default=None,
                    help="report known upstream ATen bugs as 'known' (default without --backend)")
    kn.add_argument("--no-known", dest="known", action="store_false")
    g = p.add_argument_group("output")
    g.add_argument("--json", metavar="FILE", help="write the full report as JSON")
    g.add_argument("--junit-xml", metavar="PATH",
                   help="also write the findings as JUnit XML (a test case per finding group and per "
                        "failing case, with its diagnosis and repro script; stridewise/audit/junit.py)")
    g.add_argument("--repro-dir", default="stridewise-audit-repro",
                   help="directory for repro scripts of failing cases (default ./stridewise-audit-repro)")
    g.add_argument("--max-repros", type=int, default=2000)
    g.add_argument("--no-repros", action="store_true")
    g.add_argument("--max-failures", type=int, default=8, help="failures listed per op in the text report")
    g.add_argument("--verify-repros", action="store_true",
                   help="after the audit, run each finding's repro script alone with the backend and with "
                        "--native: it must reproduce and native must pass (else: an auditor bug, exit 1)")
    g.add_argument("--verify-repros-from", metavar="REPORT.json",
                   help="re-run that check from a JSON report written with --verify-repros (no audit)")
    g.add_argument("--sequence-trials", type=int, default=48, metavar="N",
                   help="a finding that does not reproduce alone (a crash its replay did not "
                        "confirm; with --verify-repros, a script that did not reproduce) is "
                        "replayed after the cases that ran before it in its worker, shrunk to the "
                        "smallest sequence that fails: at most N trials each (0: off)")
    g.add_argument("--log-dir", help="keep worker logs here (default: a temp dir, removed)")
    pr = g.add_mutually_exclusive_group()
    pr.add_argument("--progress", dest="progress", action="store_true", default=None)
    pr.add_argument("--no-progress", dest="progress", action="store_false")
    g.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")
    return p


def _csv(s):
    return tuple(x.strip() for x in s.split(",") if x.strip()) if s else None


def main(argv=None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return _main(args, list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 2


def _fail(msg: str) -> int:
    print(f"stridewise audit: error: {msg}", file=sys.stderr)
    return 2


def _main(args, argv) -> int:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the oracle is tiny; and workers are forked from this process
    try:
        return _audit(args, argv)
    finally:
        torch.set_num_threads(threads)


def _audit(args, argv) -> int:
    import torch
    from . import backends, matrix, report, repro
    from .caseid import CaseIdError, parse_case_id
    from .gen import DTYPES
    from .oracle import Tolerance
    from .runner import AuditError, RunConfig, Runner
    from .specs import SPECS, resolve

    if args.verify_repros_from:  # no audit: replay the findings a report recorded
        from . import verify

        return verify.from_json(args.verify_repros_from, max(1, args.jobs), args.timeout, args.quiet)
    if args.verify_repros and args.no_repros:
        return _fail("--verify-repros runs the repro scripts: drop --no-repros")
    if args.list_ops:
        for name, s in SPECS.items():
            print(f"{name:22s} variants={','.join(s.variants):18s} aten: {', '.join(s.aten)}")
        return 0
    try:
        torch.device(args.device)
        known_device = True
    except (RuntimeError, ValueError) as e:
        known_device = False
        if not args.imports:  # a plug-in device needs its module (imported in the workers)
            return _fail(f"--device {args.device!r}: {e} (for a plug-in device, add "
                         f"--import MODULE, e.g. --import torch_npu)")
    from .guard import guard_support

    guardable, why_not = guard_support(args.device) if known_device else (False, "")
    if args.guard and not guardable:
        return _fail(f"--guard refused: {why_not or 'the device is unknown in this process'}. "
                     "Without --guard the audit checks the poisoned margins around each storage "
                     "instead (writes past a storage are found; a read past it returns poison)")
    memory = "guard" if args.guard else "margin" if args.margin or not guardable else "plain"
    try:
        ops = resolve(_csv(args.ops) or ["all"])
    except KeyError as e:
        return _fail(str(e.args[0]))
    dtypes = _csv(args.dtypes)
    if dtypes:
        bad = [d for d in dtypes if d not in DTYPES]
        if bad:
            return _fail(f"--dtypes: unknown {', '.join(bad)}; known: {', '.join(DTYPES)}")
    backend = None
    if args.backend:
        try:
            backend = backends.parse(args.backend)
            if args.flush:
                if ":" not in args.flush:
                    raise backends.BackendError(f"--flush {args.flush!r}: name the call, "
                                                "MODULE:CALL[(ARGS)], e.g. stridewise:check_errors(True)")
                backend["flush"] = backends.parse(args.flush)
        except backends.BackendError as e:
            return _fail(str(e))
    elif args.flush:
        return _fail("--flush needs --backend (it belongs to the backend under audit)")
    tol = Tolerance(args.tol_factor, args.atol, args.exact_accum, args.strict_errors)
    if args.case:
        cases = []
        for cid in args.case:
            op = cid.strip().strip("/").split("/")[0]
            if op not in SPECS:
                return _fail(f"--case {cid!r}: unknown op {op!r}; known: {', '.join(SPECS)}")
            s = SPECS[op]
            try:
                cases.append(parse_case_id(cid, s.operands + ("out",), tuple(s.params)))
            except CaseIdError as e:
                return _fail(f"--case: {e}")
    else:
        opt = matrix.MatrixOptions(args.matrix, args.seed, dtypes,
                                   tuple(int(r) for r in _csv(args.ranks)) if args.ranks else None,
                                   ("none",) if args.large_only else _csv(args.variants),
                                   args.large or args.large_only)
        cases = []
        for k in range(max(1, args.repeat)):
            opt.seed = args.seed + k
            cases += matrix.build_matrix([SPECS[o] for o in ops], opt)
        if args.limit:
            cases = matrix.sample(cases, args.limit, args.seed)
    if args.list:
        for c in cases:
            print(c.id)
        return 0
    sw = sys.modules.get("stridewise")
    routed = getattr(sw, "enabled", None)
    if callable(routed):  # the oracle must be native: refuse a process with routing enabled
        try:
            on = list(routed())
        except Exception:  # noqa: BLE001
            on = []
        if on:
            return _fail(f"stridewise routing is enabled in this process ({on}); the oracle must "
                         "be native PyTorch: call stridewise.disable() first (use --backend "
                         "stridewise to audit it)")
    known = args.known if args.known is not None else backend is None
    cfg = RunConfig(device=args.device, backend=backend, imports=tuple(args.imports), guard=args.guard,
                    margin=memory == "margin",
                    jobs=max(1, args.jobs), timeout=args.timeout, assert_grace=args.assert_grace,
                    threads=args.threads, start_method=args.start_method, log_dir=args.log_dir,
                    keep_logs=bool(args.log_dir), apply_known=known, tol=tol, schedule=args.schedule,
                    run_native=args.run_native, deadline=max(0.0, args.deadline),
                    spares=max(0, args.spares if args.spares is not None
                               else int(args.device.split(":")[0] != "cpu")))
    cfg.grad = bool(args.grad)
    bar, on_result = _progress(args, len(cases))
    started = datetime.datetime.now().isoformat(timespec="seconds")
    t0 = time.time()
    runner = Runner(cfg, SPECS, on_result)
    try:
        results = runner.run(cases)
    except AuditError as e:
        if bar:
            bar.close()
        return _fail(str(e))
    if bar:
        bar.close()
    seconds = time.time() - t0
    order = {c.id: i for i, c in enumerate(cases)}
    results.sort(key=lambda r: order.get(r.case.id, 0))
    info = report.analyse(results)
    meta = {"device": args.device, "backend": args.backend, "guard": args.guard,
            "memory": {"mode": memory, "guard_pages": guardable, "why_no_guard": why_not or None},
            "oracle": f"native PyTorch {torch.__version__} on CPU, over copies in the same layouts",
            "matrix": "cases" if args.case else args.matrix, "seed": args.seed, "seconds": seconds,
            "jobs": cfg.jobs, "limit": args.limit or None, "started": started, "argv": argv, "json": args.json,
            "backend_info": runner.backend_info, "device_name": runner.device_name,
            "coverage": runner.coverage,  # with --backend: who runs each overload (coverage.py)
            "sanitizer": _sanitizer_tool(),  # compute-sanitizer's tool, when run under it
            "timing": runner.timing,  # where the time went (timing.py)
            "grad": bool(args.grad),
            "tolerance": {"factor": tol.factor, "atol": tol.atol, "exact_accum": tol.exact_accum,
                          "strict_errors": tol.strict_errors, "rule": tol.describe()}}
    need = [r for r in results if r.built is not None]
    found = []
    if args.verify_repros:  # each finding's representative gets a script, whatever --max-repros
        from . import verify

        found = verify.findings(info)
    if need and not args.no_repros:
        # each script names its own finding's diagnosis (its harm class, or spurious message)
        diag = {op: v["diagnosis"][0].text for op, v in info["ops"].items() if v["diagnosis"]}
        diag.update({r.case.id: x["diagnosis"].text for v in info["ops"].values() for g in v["harm"]
                     for x in (g["groups"] or [g]) if x.get("diagnosis") is not None
                     for r in x["results"]})
        meta["repros"] = repro.write_all(need, SPECS, args.repro_dir, args.device, backend, memory,
                                         diag, tol.describe(), args.max_repros, args.imports,
                                         always=[r for f in found for r in f.get("candidates") or ()])
        meta["repro_dir"] = os.path.abspath(args.repro_dir)
    checks = None
    if args.verify_repros:
        if found and not args.quiet:
            print(f"replaying {len(found)} finding(s) alone, with the backend and --native ...",
                  file=sys.stderr, flush=True)
        checks = verify.run_findings(found, args.device, max(1, args.jobs), args.timeout)
    from . import sequence

    wanted = sequence.targets(results, checks)
    if wanted and args.sequence_trials > 0 and not args.quiet:
        print(f"replaying {len(wanted)} finding(s) after the cases that ran before them ...",
              file=sys.stderr, flush=True)
    flags = {o for a in build_parser()._actions for o in a.option_strings if a.nargs == 0}
    seqs = sequence.search(runner, wanted, argv, args.sequence_trials, flags)
    sequence.settle(checks, seqs)
    text = report.text(results, info, meta, args.max_failures)
    if checks is not None or seqs:  # the sections go before the verdict line (the last)
        head, _, last = text.rpartition("\n")
        text = "\n".join(([head] if head else []) + (verify.text(checks) if checks is not None else [])
                         + sequence.text(seqs) + [last + (verify.verdict_suffix(checks) if checks else "")])
    if args.case and not args.quiet:
        _print_cases(results)
    if args.quiet:
        print(text.splitlines()[-1])
    else:
        print(text)
    bad = bool(checks and verify.failed(checks))
    if args.junit_xml:
        from . import junit

        junit.write(args.junit_xml, results, info, meta)
    if args.json:
        doc = report.to_json(results, info, meta)
        if seqs:
            doc["sequences"] = seqs
        if checks is not None:
            doc["repro_check"] = checks
            doc["summary"]["exit_status"] = 1 if info["counts"]["failed"] or bad else 0
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1, default=str)
    return 1 if info["counts"]["failed"] or bad else 0


def _sanitizer_tool():
    from ..testing.sanitizer import sanitizer

    return sanitizer()


def _print_cases(results):
    from .report import _describe

    for r in results:
        print(f"case {r.case.id}: {r.verdict.status} ({r.verdict.reason})")
        if r.built is not None and hasattr(r.built, "tensors"):
            for n, v in r.built.tensors.items():
                print(f"  {n}: {_describe(v)}")
            print(f"  scalars: {r.built.scalars}")
        if r.verdict.detail:
            print(f"  {r.verdict.detail}")
        if r.replay:
            print(f"  replay: {r.replay}")
        if r.repro:
            print(f"  repro: {r.repro}")
        print()


def _progress(args, total):
    show = args.progress if args.progress is not None else (sys.stderr.isatty() and not args.quiet)
    if not show:
        return None, None
    try:
        import tqdm
    except ImportError:  # pinned in requirements.txt; degrade to no bar
        return None, None
    tqdm.tqdm.monitor_interval = 0  # no monitor thread: workers are forked
    bar = tqdm.tqdm(total=total, unit="case", file=sys.stderr, dynamic_ncols=True)
    fails = [0]

    def on_result(r):
        if r.verdict.status in ("wrong", "crash", "bad-error", "error"):
            fails[0] += 1
            bar.set_postfix_str(f"{fails[0]} failing", refresh=False)
        bar.set_description_str(r.case.op, refresh=False)
        bar.update(1)

    return bar, on_result


if __name__ == "__main__":
    sys.exit(main())
