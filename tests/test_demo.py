"""`python3 -m stridewise demo` (the README's first command ends with it) runs clean on CPU, and
its scatter step shows the nothing-lost contract: ours raises on the bad index and self stays
bit for bit as it was."""
from __future__ import annotations


def test_demo_runs_clean_on_cpu(sw, capsys):
    from stridewise import demo

    rc = demo.main(["--device", "cpu"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "all bitwise equal to native" in out, out
    line = next(ln for ln in out.splitlines() if ln.startswith("in-place scatter_add_"))
    assert "RuntimeError: index 512 is out of bounds for dimension 0 with size 512" in line, line
    assert "; self unchanged" in line, line
    st = sw.stats()
    assert st["scatter_add"]["calls"] > 0 and st["scatter_reduce"]["calls"] > 0, st
