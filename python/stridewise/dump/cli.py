"""Command line: ``python3 -m stridewise dump --dir D [--ops ...] -- script.py args`` runs a script
under ``stridewise.dump``; ``python3 -m stridewise.dump compare A B [sw-compare options]`` runs
sw-compare."""
from __future__ import annotations

import argparse
import os
import runpy
import subprocess
import sys
import traceback

USAGE = """\
python3 -m stridewise dump --dir DIR [options] -- script.py [args...]
python3 -m stridewise dump --dir DIR [options] -- -m module [args...]
python3 -m stridewise.dump compare A B [sw-compare options]   (exit 0 pass, 1 divergence, 2 error, 3 incomplete)"""


def _parser():
    p = argparse.ArgumentParser(prog="python3 -m stridewise dump", usage=USAGE,
                                description="Record the inputs and outputs of ATen ops (forward and backward) "
                                            "of a script to DIR/step{N}/rank{R}/ (index.jsonl + safetensors).")
    p.add_argument("--dir", required=True, help="dump root directory")
    p.add_argument("--ops", default=None, help="comma-separated op names or globs (default: every op)")
    p.add_argument("--exclude", default=None, help="comma-separated op names or globs not to record")
    p.add_argument("--step", type=int, default=0, help="step number (default 0)")
    p.add_argument("--rank", type=int, default=None, help="rank (default: torch.distributed, $RANK, 0)")
    p.add_argument("--shard-mib", type=int, default=1024, help="max MiB of tensor data per shard (default 1024)")
    p.add_argument("--fsync", choices=("record", "shard", "never"), default="shard")
    p.add_argument("--no-inputs", action="store_true", help="do not record op inputs")
    p.add_argument("--no-outputs", action="store_true", help="do not record op outputs")
    p.add_argument("--overwrite", action="store_true", help="replace an existing step/rank directory")
    # what follows the options is the target's: everything after -m (the module and its args),
    # else from the first positional on (script.py and its args); argparse stops parsing there
    p.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE [ARGS]",
                   help="run a module as __main__ (like python3 -m), with the arguments after it")
    p.add_argument("script", nargs=argparse.REMAINDER, metavar="script.py [ARGS]",
                   help="the script to run, with its arguments (a leading -- is dropped)")
    return p


def _target(args) -> list:
    """[script.py, args...] or [-m, module, args...] from the parsed options."""
    if args.module is not None:
        return ["-m"] + args.module
    target = list(args.script)
    if target[:1] == ["--"]:  # `-- script.py` / `-- -m module` (argparse keeps the --)
        target = target[1:]
    return target


def _run_target(target):
    """Runs [script.py, args...] or [-m, module, args...] as __main__; returns its exit status."""
    try:
        if target[0] == "-m":
            if len(target) < 2:
                raise SystemExit("error: -m needs a module name")
            sys.argv = [target[1]] + target[2:]
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        else:
            script = target[0]
            if not os.path.isfile(script):
                print(f"python3 -m stridewise dump: error: {script}: no such script", file=sys.stderr)
                return 2
            sys.argv = list(target)
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - report the script's error, keep what was dumped
        traceback.print_exc()
        return 1


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "dump":  # forwarded as-is from `python3 -m stridewise dump ...`
        argv = argv[1:]
    if argv and argv[0] == "compare":
        from .compare import CompareError, find_compare_binary
        try:
            exe = find_compare_binary()
        except CompareError as e:
            print(f"python3 -m stridewise.dump compare: error: {e}", file=sys.stderr)
            return 2
        return subprocess.call([exe] + argv[1:])
    p = _parser()
    args = p.parse_args(argv)
    target = _target(args)
    if not target:
        p.error("no script given: ... -- script.py [args] or -- -m module [args]")
    from ._capture import dump
    try:
        d = dump(args.dir, ops=args.ops, exclude=args.exclude, step=args.step, rank=args.rank,
                 inputs=not args.no_inputs, outputs=not args.no_outputs, shard_bytes=args.shard_mib << 20,
                 fsync=args.fsync, overwrite=args.overwrite)
        with d:
            rc = _run_target(target)
    except (OSError, ValueError) as e:
        print(f"python3 -m stridewise dump: error: {e}", file=sys.stderr)
        return 2
    s = d.stats
    print(f"stridewise dump: {s['ops']} ops, {s['tensors']} tensors, {s['bytes'] / 2**20:.1f} MiB "
          f"({s['skipped']} not stored) -> {d.rank_dir}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
