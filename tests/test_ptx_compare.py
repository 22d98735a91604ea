"""scripts/ptx_compare.py's comparison on hand-written PTX: line directives and path hashes are
not differences, a changed body is, unless the change was meant (--changed); a function on one
side only is always named."""
import importlib.util

from conftest import ROOT


def _load():
    spec = importlib.util.spec_from_file_location("ptx_compare", ROOT / "scripts/ptx_compare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PTX = """
.version 9.0
.func _ZN45_INTERNAL_{h}_14_gather_cuda_cu_{g}10stridewise6detail6reportEv()
{{
.loc 1 {line} 3
ret;
}}
.visible .entry _ZN10stridewise4k_4IjLi4EEEv(
.param .u64 p
)
{{
.loc 2 {line} 5
ld.param.u64 %rd1, [p];
mul.lo.s64 %rd2, %rd1, {m4};
$L__BB0_{lab}:
ret;
}}
.visible .entry _ZN10stridewise4k_4IjLi64EEEv(
.param .u64 p
)
{{
mul.lo.s64 %rd2, %rd1, {m64};
ret;
}}
"""


def _ptx(h="2af9e1f0", g="e1e074c7", line=10, lab=1, m4=3, m64=3):
    return PTX.format(h=h, g=g, line=line, lab=lab, m4=m4, m64=m64)


def test_line_directives_labels_and_path_hashes_are_not_differences():
    m = _load()
    old, new = m.functions(_ptx()), m.functions(_ptx(h="0badcafe", g="12345678", line=99, lab=7))
    assert len(old) == 3
    problems, counts = m.compare(old, new, None)
    assert problems == [] and counts["identical"] == 3


def test_a_changed_body_is_named_unless_meant():
    m = _load()
    old = m.functions(_ptx())
    problems, counts = m.compare(old, m.functions(_ptx(m64=5)), None)
    assert problems == ["differs: _ZN10stridewise4k_4IjLi64EEEv"] and counts["changed_unmeant"] == 1
    problems, counts = m.compare(old, m.functions(_ptx(m64=5)), r"Li64E")
    assert problems == [] and counts["changed_as_meant"] == 1
    problems, _ = m.compare(old, m.functions(_ptx(m4=5, m64=5)), r"Li64E")
    assert problems == ["differs: _ZN10stridewise4k_4IjLi4EEEv"]


def test_a_function_on_one_side_is_named():
    m = _load()
    old = m.functions(_ptx())
    new = dict(old)
    new.pop("_ZN10stridewise4k_4IjLi4EEEv")
    problems, _ = m.compare(old, new, r"Li4E")
    assert problems == ["only in old: _ZN10stridewise4k_4IjLi4EEEv"]
