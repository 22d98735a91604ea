#!/usr/bin/env python3
"""Planted faults in the CUDA scatter's segment and tile paths and its validation, each of
which the host emulation tests (core/tests/cuda/test_scatter_emulated*.cpp) must catch. For each fault: patch the header,
compile the scatter emulation objects against it (-O1), link them with the other test
objects of an existing build, run ScatterEmulated.*, restore the header. CPU only.

    cmake --build build --target stridewise_cuda_tests   # once, for the other objects (BUILD_DIR)
    python3 scripts/plant_scatter_cuda.py [fault ...]    # every fault by default

Prints one line per fault with the tests that failed; exits 1 if any fault went unnoticed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEG = "core/src/common/segments.h"
ROWS = "core/src/scatter/scatter_cuda_rows.h"
DISPATCH = "core/src/scatter/scatter_cuda_dispatch.h"
TILE = "core/src/scatter/scatter_cuda_tile.h"
IMPL = "core/src/scatter/scatter_cuda_impl.h"
LAUNCH = "core/src/scatter/scatter_cuda_launch.h"

# name: (file, text, replacement)
FAULTS = {
    "no_fix": (SEG, "    if (!it.cont_out) return;\n    const uint64_t k = seg_key(a.keys, it.e - 1",
               "    return;\n    const uint64_t k = seg_key(a.keys, it.e - 1"),
    "slot_swap": (SEG, "it.c, head ? 0 : 1, it.l0", "it.c, head ? 1 : 0, it.l0"),
    "no_begin": (SEG, "  if (key >= uint64_t(a.size)) return;  // never an address (validation recorded it)\n"
                 "  if (!a.include_self) {", "  return;\n  if (!a.include_self) {"),
    "copy_last": (SEG, ": !it.cont_out;", ": true;"),
    "self_twice": (SEG, "    if (!it.cont_in) seg_begin<T, V>(a, lb, k, acc);", "    seg_begin<T, V>(a, lb, k, acc);"),
    "mean_count": (SEG, "seg_finish<T, V>(a, lb, k, end - start, acc);", "seg_finish<T, V>(a, lb, k, end - it.b, acc);"),
    "prefetch_stale": (SEG, "        seg_load<T, V>(a, lb, j + 1, nx);\n", ""),
    "validate_one": (DISPATCH, "static_cast<I>(l.numel), site,  abort};", "static_cast<I>(1), site,  abort};"),
    "tile_no_self": (TILE, "m.acc[e] = a.include_self ? Conv<T>::load(x[u]) : id;", "m.acc[e] = id;"),
    "tile_no_count": (TILE, "      if (m.cnt) atomic_count(m.cnt + e);\n", ""),
    "tile_no_zero": (TILE, "      if (m.cnt) m.cnt[e] = 0;\n", ""),
    "tile_row": (TILE, "    out[I(m.off[i * 3]) + I(e >> a.log2_tile) * a.out_dim_stride] = Conv<T>::store(r);",
                 "    out[I(m.off[i * 3])] = Conv<T>::store(r);"),
    "validate_first_only": (IMPL, "      if (j < a.numel && (v[u] < 0 || v[u] >= a.site.size)) {",
                            "      if (u == 0 && (v[u] < 0 || v[u] >= a.site.size)) {"),
    "rows_src_row": (ROWS, "seg_line(a, l).src + I(j) * a.src_dim_stride;", "seg_line(a, l).src;"),
    "rows_tiles_overlap": (ROWS, "(w % a.tiles) * a.tile_threads * kRowsUnroll +", "(w % a.tiles) * a.tile_threads +"),
    "tile_major_chunk": (SEG, "it->c = a.tile_major ? w % a.chunks : w / a.tiles;",
                         "it->c = a.tile_major ? w / a.tiles : w / a.tiles;"),
    "interleave_outer_stride": (LAUNCH, "put(2, 0, l.sizes[0] / inner, inner);", "put(2, 0, l.sizes[0] / inner, 1);"),
    "vec_any_stride": (DISPATCH, "    if (l.strides[kScatterOut][0] != 1 || (src && l.strides[kScatterSrc][0] != 1)) return 1;\n", ""),
}


def build_and_run(build: Path, tmp: Path) -> str:
    objs = build / "core/tests/cuda/CMakeFiles/stridewise_cuda_tests.dir"
    flags = ["-DSW_HAVE_CUDA=1", f"-I{ROOT}/core/tests", f"-I{ROOT}/core/src", f"-I{ROOT}/core/include",
             "-isystem", "/usr/local/cuda/include", "-O1", "-std=c++17", "-w"]
    # Every object that instantiates the patched bodies is compiled again: instantiations are
    # weak symbols, and a stale copy may win the link. The k-index emulation instantiates the
    # sorted path's back half (common/segments.h) since issue 36: left out, its unpatched
    # seg_acc / seg_fix bodies won, and four faults went unseen.
    mine = {"test_scatter_emulated.cpp": tmp / "emu.o", "test_scatter_emulated_paths.cpp": tmp / "paths.o",
            "scatter_test_util.cpp": tmp / "util.o", "test_index_k_emulated.cpp": tmp / "ik.o"}
    with ThreadPoolExecutor(len(mine)) as ex:
        for f in ex.map(lambda kv: subprocess.run(["c++", *flags, "-c", str(ROOT / "core/tests/cuda" / kv[0]),
                                                   "-o", str(kv[1])], capture_output=True, text=True),
                        mine.items()):
            if f.returncode:
                return "compile failed: " + f.stderr[-400:]
    others = [p for p in sorted(objs.rglob("*.o")) if p.name.removesuffix(".o") not in mine]
    exe = tmp / "t"
    link = subprocess.run(["c++", *map(str, others), *map(str, mine.values()), "-o", str(exe),
                           str(build / "core/libstridewise_core.a"), "-L/usr/local/cuda/lib64", "-lcudart",
                           "-lgtest", "-lgtest_main", "-lpthread"], capture_output=True, text=True)
    if link.returncode:
        return "link failed: " + link.stderr[-400:]
    run = subprocess.run([str(exe), "--gtest_filter=ScatterEmulated.*"], capture_output=True, text=True)
    failed = sorted({ln.split()[3] for ln in run.stdout.splitlines()
                     if ln.startswith("[  FAILED  ]") and len(ln.split()) > 3 and "." in ln.split()[3]})
    return "caught by " + ", ".join(failed) if failed else "NOT CAUGHT"


def main(argv: list[str]) -> int:
    build = Path(os.environ.get("BUILD_DIR", ROOT / "build"))  # the build with the test objects
    names = argv or list(FAULTS)
    missed = 0
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            path, old, new = FAULTS[name]
            f = ROOT / path
            orig = f.read_text()
            if orig.count(old) != 1:
                print(f"{name}: the text to patch is not in {path} exactly once (update the fault)")
                missed += 1
                continue
            f.write_text(orig.replace(old, new))
            try:
                res = build_and_run(build, Path(d))
            finally:
                f.write_text(orig)
            print(f"{name:15s} {res}", flush=True)
            missed += 0 if res.startswith("caught") else 1
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
