"""Helpers for the dump/compare tests: synthetic dumps written without torch, and the sw-compare
binary (built on demand when the project build has not produced it)."""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np

from ._writer import IndexWriter, ShardWriter
from .compare import CompareError, find_compare_binary, source_tree


_NP_CODES = {np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("float16"): "F16",
             np.dtype("int64"): "I64", np.dtype("int32"): "I32", np.dtype("int16"): "I16", np.dtype("int8"): "I8",
             np.dtype("uint8"): "U8", np.dtype("uint16"): "U16", np.dtype("uint32"): "U32", np.dtype("uint64"): "U64",
             np.dtype("bool"): "BOOL"}
_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
          "I16": "int16", "I8": "int8", "U8": "uint8", "U16": "uint16", "U32": "uint32", "U64": "uint64",
          "BOOL": "bool"}


def compare_binary(build_if_missing=True) -> str:
    """sw-compare from $STRIDEWISE_COMPARE or the project build; else builds tools/compare alone
    into build/compare-standalone (about a minute on 2 cores)."""
    try:
        return find_compare_binary()
    except CompareError:
        # An installed package has no tools/compare to build: its wheel ships sw-compare.
        repo = source_tree()
        if not build_if_missing or not shutil.which("cmake") or repo is None:
            raise
    bdir = os.path.join(repo, "build", "compare-standalone")
    exe = os.path.join(bdir, "sw-compare")
    if not os.access(exe, os.X_OK):
        gen = ["-G", "Ninja"] if shutil.which("ninja") and not os.path.exists(os.path.join(bdir, "CMakeCache.txt")) else []
        cfg = subprocess.run(["cmake", "-S", os.path.join(repo, "tools", "compare"), "-B", bdir, *gen,
                              "-DSW_BUILD_TESTS=OFF"], capture_output=True, text=True)
        if cfg.returncode == 0:
            cfg = subprocess.run(["cmake", "--build", bdir, "--target", "sw-compare"], capture_output=True, text=True)
        if cfg.returncode != 0 or not os.access(exe, os.X_OK):
            raise CompareError(f"building sw-compare in {bdir} failed:\n{cfg.stdout[-2000:]}\n{cfg.stderr[-2000:]}")
    os.environ["STRIDEWISE_COMPARE"] = exe
    return exe


def run_compare(exe, *args):
    """Runs sw-compare ``exe`` with ``args`` (each passed through str); returns
    (exit status, stdout, stderr)."""
    p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


class SyntheticDump:
    """Writes DIR/step{N}/rank{R}/ like stridewise.dump does, from numpy arrays.

        d = SyntheticDump(root, step=0, rank=0)
        d.op("aten::gather", inputs=[x, idx], outputs=[y])             # forward
        d.op("aten::scatter_add", outputs=[g], phase="backward")
        d.close()

    An array may be given as (array, "BF16") to store raw uint16 bits as bfloat16.
    in_fields / out_fields: per tensor, extra record fields (``addr``, ``alias``, ...); a record
    with ``"read": False`` gets no bytes, as stridewise.dump writes an input the op does not
    read. ``close()`` writes the end record the meta record promises (``end=False``: a run cut
    short).
    """

    def __init__(self, root, step=0, rank=0, shard_bytes=1 << 30):
        self.dir = os.path.join(root, f"step{step}", f"rank{rank}")
        os.makedirs(self.dir, exist_ok=True)
        self.step, self.rank = step, rank
        self.shards = ShardWriter(self.dir, shard_bytes=shard_bytes, fsync="never")
        self.index = IndexWriter(os.path.join(self.dir, "index.jsonl"), fsync="never")
        self.index.write({"kind": "meta", "v": 1, "step": step, "rank": rank, "synthetic": True,
                          "end_record": True})
        self.seq = 0
        self.calls = {}
        self.n_ops = self.n_tensors = 0

    def op(self, name, inputs=(), outputs=(), phase="forward", overload="default", in_fields=(),
           out_fields=()):
        call = self.calls.get((name, phase), 0)
        self.calls[(name, phase)] = call + 1
        base = {"step": self.step, "rank": self.rank, "seq": self.seq, "op": name, "overload": overload,
                "call": call, "phase": phase}
        self.index.write({"kind": "op", **base, "args": {}, "inputs": len(inputs)})
        self.n_ops += 1
        for io, arrays, fields in (("input", inputs, in_fields), ("output", outputs, out_fields)):
            for pos, a in enumerate(arrays):
                extra = dict(fields[pos]) if pos < len(fields) and fields[pos] else {}
                self.n_tensors += 1
                code = None
                if isinstance(a, tuple):
                    a, code = a
                a = np.ascontiguousarray(a)
                code = code or _NP_CODES[a.dtype]
                rec = {"kind": "tensor", "v": 1, **base, "io": io, "pos": pos, "arg": f"{io}{pos}",
                       "dtype": _NAMES[code], "shape": list(a.shape)}
                if extra.get("read", True):
                    key = f"{self.seq}.{phase[0]}.{name}.{call}.{io[0]}{pos}"
                    fname, offset, nbytes = self.shards.append(key, code, a.shape, a.reshape(-1).view(np.uint8))
                    rec.update(file=fname, key=key, offset=offset, nbytes=nbytes)
                else:
                    rec.update(file=None, key=None)
                rec.update(extra)
                self.index.write(rec)
        self.seq += 1
        return call

    def close(self, end=True):
        if end:
            self.index.write({"kind": "end", "step": self.step, "rank": self.rank, "ops": self.n_ops,
                              "tensors": self.n_tensors})
        self.shards.close()
        self.index.close()
