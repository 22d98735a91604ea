"""Guarded memory (CPU): every operand's storage is placed so that it ends (or starts) exactly
at an inaccessible page (mmap + mprotect(PROT_NONE)). Any read or write one byte outside a
storage kills the process with SIGSEGV, so the kernels run in a subprocess and the parent
looks at the exit status.

 - The seed's repro (index = 4 int64 at the very end of the accessible region, expanded to
   1536 logical elements) and the layout matrix must run to completion with correct results.
 - A PLANTED flat reader (the seed's kernel: the expanded index read as 1536 contiguous
   int64) in the same setup must die with SIGSEGV: proof that the guard catches the bug.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import PYDIR

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="mmap/mprotect guard pages: Linux only")

CHILD = textwrap.dedent(r'''
    import ctypes, mmap, sys
    sys.path.insert(0, sys.argv[1])
    import torch
    import stridewise
    from stridewise.testing import layouts
    from stridewise.audit.specs import gather_layouts as specs

    PAGE = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    KEEP = []

    def guarded(nbytes, at_end=True):
        """A writable region of nbytes with a PROT_NONE page right after it (at_end) or right
        before it (not at_end); returns a memoryview of exactly the region."""
        npages = max(1, (nbytes + PAGE - 1) // PAGE)
        m = mmap.mmap(-1, (npages + 2) * PAGE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        for p in (base, base + (npages + 1) * PAGE):
            if libc.mprotect(p, PAGE, 0) != 0:
                raise OSError(ctypes.get_errno(), "mprotect")
        start = PAGE + npages * PAGE - nbytes if at_end else PAGE
        KEEP.append(m)
        return memoryview(m)[start:start + nbytes]

    def place_factory(at_end):
        def place(t):
            t = t.contiguous()
            n = t.numel() * t.element_size()
            if n == 0:
                return t
            mv = guarded(n, at_end)
            g = torch.frombuffer(mv, dtype=torch.uint8)
            edge = g.data_ptr() + n if at_end else g.data_ptr()
            assert edge % PAGE == 0 and g.untyped_storage().nbytes() == n, "storage not at a guard page"
            g.copy_(t.reshape(-1).view(torch.uint8))
            return g.view(t.dtype).view(t.shape)
        return place

    def seed_index(at_end=True):
        store = torch.frombuffer(guarded(4 * 8, at_end), dtype=torch.int64)
        edge = store.data_ptr() + 32 if at_end else store.data_ptr()
        assert edge % PAGE == 0, "index storage does not abut the guard page"
        store.fill_(15)
        idx = store.view(4, 1, 1).expand(4, 1, 384)
        assert idx.untyped_storage().nbytes() == 32
        return idx

    def seed_x():
        x = place_factory(True)(torch.randn(4, 16, 384, generator=torch.Generator().manual_seed(7)).half())
        return x

    mode = sys.argv[2]
    if mode == "seed":
        for at_end in (True, False):
            x, idx = seed_x(), seed_index(at_end)
            want = x[:, 15:16, :].contiguous()
            out = place_factory(at_end)(torch.zeros(4, 1, 384, dtype=torch.float16))
            print("running seed repro at_end=%s" % at_end, file=sys.stderr, flush=True)
            got = torch.ops.stridewise.gather(x, 1, idx)
            assert torch.equal(got.view(torch.int16), want.view(torch.int16)), "wrong result"
            torch.ops.stridewise.gather.out(x, 1, idx, out=out)
            assert torch.equal(out.view(torch.int16), want.view(torch.int16)), "wrong out= result"
            with stridewise.use(include=["gather"]):
                got = torch.gather(x, 1, idx)
            assert torch.equal(got.view(torch.int16), want.view(torch.int16)), "wrong routed result"
        print("OK seed")
    elif mode == "matrix":
        cases = (specs.seed_matrix() + specs.layout_cross_cases() + specs.layout_cross_cases(out=True)
                 + specs.rank_cases() + specs.edge_cases() + specs.dtype_cases())
        n = 0
        for at_end in (True, False):
            place = place_factory(at_end)
            for k, case in enumerate(cases):
                case = case.with_seed(int(sys.argv[3]) + k)
                inp = specs.build_inputs(case, "cpu", place=place)
                print("running", case.id, "at_end=%s" % at_end, specs.describe_inputs(inp),
                      file=sys.stderr, flush=True)
                want = specs.reference(specs.build_inputs(case, "cpu"))
                if "out" in inp:
                    torch.ops.stridewise.gather.out(inp["self"], inp["dim"], inp["index"], out=inp["out"])
                    got = inp["out"]
                else:
                    got = torch.ops.stridewise.gather(inp["self"], inp["dim"], inp["index"])
                m = specs.bitwise_mismatch(got, want)
                assert m is None, case.id + ": " + m
                n += 1
        print("OK matrix %d" % n)
    elif mode == "planted":
        # The seed's kernel: index read as contiguous from its data pointer, 1536 elements
        # where the storage holds 4. A ctypes array over the raw pointer has no bounds;
        # native gather then reads it as the index.
        x, idx = seed_x(), seed_index(True)
        flat = torch.frombuffer((ctypes.c_int64 * idx.numel()).from_address(idx.data_ptr()),
                                dtype=torch.int64)
        print("planted flat reader starts", file=sys.stderr, flush=True)
        torch.gather(x, 1, flat.view(4, 1, 384))
        print("planted reader survived: the guard page did not fire")
    elif mode == "planted-before":
        # Reading one element before a storage that starts at a page boundary.
        x, idx = seed_x(), seed_index(False)
        before = torch.frombuffer((ctypes.c_int64 * 5).from_address(idx.data_ptr() - 8), dtype=torch.int64)
        print(int(before.sum()))
        print("planted reader survived: the guard page did not fire")
    else:
        raise SystemExit("unknown mode " + mode)
''')


def _run_child(tmp_path, mode, *args, timeout=240):
    script = tmp_path / "guarded_child.py"
    script.write_text(CHILD)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYDIR) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "2")
    return subprocess.run([sys.executable, str(script), str(PYDIR), mode, *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def _explain(p):
    last = [l for l in p.stderr.splitlines() if l.startswith("running")][-1:]
    sig = ""
    if p.returncode < 0:
        sig = f" (killed by {signal.Signals(-p.returncode).name})"
    return (f"exit {p.returncode}{sig}; last case started: {last}\nstdout: {p.stdout[-2000:]}\n"
            f"stderr: {p.stderr[-3000:]}")


def test_seed_repro_in_guarded_memory(sw, tmp_path):
    p = _run_child(tmp_path, "seed")
    assert p.returncode == 0 and "OK seed" in p.stdout, _explain(p)


def test_layout_matrix_in_guarded_memory(sw, tmp_path, seed):
    """Every operand of every matrix case abuts a guard page (after it, then before it)."""
    p = _run_child(tmp_path, "matrix", seed)
    assert p.returncode == 0 and "OK matrix" in p.stdout, _explain(p)


@pytest.mark.parametrize("mode", ["planted", "planted-before"])
def test_planted_flat_reader_dies_on_the_guard(sw, tmp_path, mode):
    """The guard is real: the seed's flat index read segfaults in the same setup."""
    p = _run_child(tmp_path, mode)
    assert p.returncode == -signal.SIGSEGV, (
        f"the planted out-of-bounds reader should die with SIGSEGV (-11): {_explain(p)}")
