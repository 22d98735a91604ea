"""sw-compare on corrupt input (issue 25): random corruptions of a real dump never crash it.

A small dump pair (A, B: the same data, several ops forward and backward, float32/float16/
bfloat16/float64/int64/bool and an empty tensor, spread over many shards) is written with fresh
random data every run; each case corrupts one file of a copy of B and runs
``sw-compare A B --format json``. Every run must end normally (exit 0-3, no signal, no
"terminate called" / sanitizer report, no hang), an exit 2 must come with a
``sw-compare: error: <file>...: <reason>`` line naming a file under A or B, a JSON report (when
one is printed) must parse and carry the exit status, and each class of damage must end as it
should (``CLASSES``):

  structural shard damage (header length, header JSON, truncation, an empty file, a directory,
  a missing shard)                                   -> 2, naming that shard
  tensor data bytes only                             -> 0 or 1 (never 2)
  invalid JSON in a terminated index line            -> 2, naming index.jsonl:<that line>
  a cut-short index, a deleted or duplicated line    -> 3 (INCOMPLETE: the index still parses, but
                                                        its end record is gone or miscounts); 0 or 3
                                                        when only the meta line or the last newline is hit

Header bytes are classified by parsing the corrupted header with a strict JSON parser
(Python's, which rejects what the safetensors library rejects; ``header_verdict``): a header
that is not JSON must be exit 2; one that still parses to the same JSON is not damage (a
padding space turned into a tab: exit 0); one that parses to different JSON is checked only for
the generic rules (a flipped metadata string is legal). A header length moved inside the space padding
leaves a valid safetensors file whose data section starts elsewhere: see
``test_header_length_moved_into_the_padding``.

Seeds: the data and the corruptions come from the per-test seed (conftest: STRIDEWISE_SEED
reproduces a run); a failure lists the seed and each failing case. SW_FUZZ_FINDINGS=DIR copies
A and the corrupted B of every failing case there (for a sanitizer build, say). ``check_run`` is the
checker; ``test_checker_catches_planted_faults`` runs it on fake binaries that crash, exit 2
without a message, print broken JSON, ... to prove each check can fail.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import stat
import struct
import subprocess
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from conftest import BASE_SEED
from stridewise.dump._testing import SyntheticDump

REL = Path("step0") / "rank0"
TIMEOUT_S = 60
CRASH_MARKERS = ("internal error", "terminate called", "Segmentation", "AddressSanitizer", "LeakSanitizer",
                 "UndefinedBehaviorSanitizer", "stack-overflow", "core dumped", "std::bad_alloc",
                 "what():")
UBSAN_LINE = re.compile(r":\d+:\d+: runtime error: ")
# The file may hold ':' (a flipped byte made "shard:00002.safetensors" in CI): it ends at the
# first ": " or ":<line>: ".
ERROR_LINE = re.compile(r"^sw-compare: error: (?P<file>.+?)(?::(?P<line>\d+))?: (?P<reason>\S.*)$")


# ------------------------------------------------------------------------------------------
# the dump pair

def write_dump(root: Path, seed: int) -> Path:
    """A dump with 10 ops (3 backward) and 27 tensors of float32, float16, bfloat16, float64,
    int64 and bool (one empty), in 5-12 shards (shapes are random)."""
    g = np.random.default_rng(seed)

    def shape(lo=1, hi=9):
        return tuple(int(s) for s in g.integers(lo, hi, size=int(g.integers(1, 3))))

    def f32(shp):
        return g.standard_normal(shp).astype(np.float32)

    def bf16(shp):
        return (f32(shp).view(np.uint32) >> 16).astype(np.uint16), "BF16"

    d = SyntheticDump(str(root), shard_bytes=200)
    x = f32(shape(2))
    idx = g.integers(0, x.shape[-1], size=x.shape).astype(np.int64)
    d.op("aten::gather", [x, idx], [np.take_along_axis(x, idx, axis=-1)])
    h = g.standard_normal(shape()).astype(np.float16)
    d.op("aten::mul", [h, h], [h * h])
    w = bf16((int(g.integers(3, 9)), 4))
    tok = g.integers(0, w[0].shape[0], size=int(g.integers(1, 7))).astype(np.int64)
    d.op("aten::embedding", [w, tok], [(w[0][tok], "BF16")])
    v = f32(shape())
    d.op("aten::gt", [v], [v > 0])
    d.op("aten::index_select", [tok, np.zeros(0, np.int64)], [np.zeros((0, 3), np.float32)])  # empty
    d.op("aten::add", [g.standard_normal(shape()).astype(np.float64)],
         [g.standard_normal(shape()).astype(np.float64)])
    d.op("aten::cumsum", [tok], [np.cumsum(tok)])
    gy = f32(x.shape)
    d.op("aten::scatter_add", [np.zeros_like(x), idx, gy], [f32(x.shape)], phase="backward")
    d.op("aten::embedding_dense_backward", [bf16((len(tok), 4)), tok], [bf16(w[0].shape)], phase="backward")
    d.op("aten::mul", [h], [h], phase="backward")
    d.close()
    return root / REL


@pytest.fixture
def pair(tmp_path, seed, exe):
    a = tmp_path / "a"
    b = tmp_path / "b"
    write_dump(a, seed)
    write_dump(b, seed)
    verdict = check_run(exe, a, b, expect={0})
    assert not verdict.problems, f"the uncorrupted pair: {verdict.problems}"
    return a, b


# ------------------------------------------------------------------------------------------
# the checker

@dataclass
class Verdict:
    rc: int | None
    problems: list = field(default_factory=list)
    seconds: float = 0.0


def check_run(exe, a, b, expect=None, name_file=None, name_line=None, max_line=None, timeout=TIMEOUT_S) -> Verdict:
    """Runs ``exe A B --format json``; returns the exit status and every broken rule.

    expect: allowed exit statuses (None: any of 0-3). name_file: a path an exit-2 error line
    must name; name_line: the index line it must give (max_line: at most that line)."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run([str(exe), str(a), str(b), "--format", "json"], capture_output=True, text=True,
                           errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return Verdict(None, [f"hung: no exit within {timeout} s"], time.perf_counter() - t0)
    v = Verdict(p.returncode, seconds=time.perf_counter() - t0)
    rc, out, err = p.returncode, p.stdout, p.stderr
    tail = err[-1500:]
    if rc < 0:
        v.problems.append(f"killed by signal {-rc} ({_signame(-rc)}); stderr: {tail!r}")
    elif rc not in (0, 1, 2, 3):
        v.problems.append(f"exit status {rc} is not one of 0-3; stderr: {tail!r}")
    crash = [m for m in CRASH_MARKERS if m in err] + (["UBSan runtime error"] if UBSAN_LINE.search(err) else [])
    if crash:
        v.problems.append(f"stderr shows a crash or sanitizer report ({', '.join(crash)}): {tail!r}")
    if expect is not None and rc not in expect:
        v.problems.append(f"exit {rc}, expected {sorted(expect)}; stderr: {tail!r}")
    errors = [ln for ln in err.splitlines() if ln.startswith("sw-compare: error")]
    roots = (str(a), str(b))
    for ln in errors:
        m = ERROR_LINE.match(ln)
        if not m:
            v.problems.append(f"malformed error line (want 'sw-compare: error: <file>: <reason>'): {ln!r}")
        elif not m["file"].startswith(roots):
            v.problems.append(f"error line names no file under A or B: {ln!r}")
    if rc == 2:
        named = [m for m in map(ERROR_LINE.match, errors) if m and m["file"].startswith(roots)]
        if not named:
            v.problems.append(f"exit 2 without a 'sw-compare: error: <file>: <reason>' line; stderr: {tail!r}")
        elif name_file is not None:
            hits = [m for m in named if m["file"] == str(name_file)]
            if not hits:
                v.problems.append(f"exit 2 but no error line names {name_file}: {errors}")
            elif name_line is not None and not any(m["line"] == str(name_line) for m in hits):
                v.problems.append(f"exit 2 but no error line names {name_file}:{name_line}: {errors}")
            elif max_line is not None and not any(m["line"] and int(m["line"]) <= max_line for m in hits):
                v.problems.append(f"exit 2 but no error line names {name_file}:<line <= {max_line}>: {errors}")
    if rc in (0, 1) or out.strip():
        try:
            rep = json.loads(out)
        except ValueError as e:
            v.problems.append(f"exit {rc}: stdout is not valid JSON ({e}): {out[:300]!r}")
        else:
            code = rep.get("summary", {}).get("exit_code") if isinstance(rep, dict) else None
            if code is None:
                v.problems.append(f"exit {rc}: the JSON report has no summary.exit_code: {out[:300]!r}")
            elif code != rc:
                v.problems.append(f"exit {rc} but the JSON report says exit_code {code}")
    return v


def _signame(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return "?"


# ------------------------------------------------------------------------------------------
# corruptions: each writes a corrupted copy of B's rank directory (files it does not touch are
# hard links) and says what sw-compare must do

@dataclass
class Case:
    kind: str
    desc: str
    expect: set | None = None  # allowed exit statuses; None: any of 0-3
    name_file: Path | None = None
    name_line: int | None = None
    max_line: int | None = None


def clone_rank(src: Path, dst: Path, skip=()):
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.name in skip:
            continue
        try:
            os.link(f, dst / f.name)
        except OSError:
            shutil.copy2(f, dst / f.name)


def shards(rank: Path):
    return sorted(p for p in rank.iterdir() if p.name.startswith("shard_"))


def header_of(data: bytes):
    """(header length, JSON text length without the space padding)."""
    (h,) = struct.unpack("<Q", data[:8])
    return h, len(data[8:8 + h].rstrip(b" "))


def _strict_json(text):
    def no_constants(c):
        raise ValueError(f"non-standard constant {c}")
    return json.loads(text, parse_constant=no_constants)


def header_verdict(orig: bytes, new: bytes) -> str:
    """How sw-compare's header check sees ``new`` (a shard's bytes) against ``orig``:
    'invalid' (too short, a length past the file, not JSON, not an object), 'same' (the same
    JSON and length), 'shifted' (the same JSON, a different length: the data section moves),
    or 'changed' (different valid JSON)."""
    if len(new) < 8:
        return "invalid"
    (h,) = struct.unpack("<Q", new[:8])
    if h > 100 << 20 or h > len(new) - 8:
        return "invalid"
    try:
        obj = _strict_json(new[8:8 + h].decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and json.JSONDecodeError are ValueErrors
        return "invalid"
    if not isinstance(obj, dict):
        return "invalid"
    (h0,) = struct.unpack("<Q", orig[:8])
    if obj != json.loads(orig[8:8 + h0]):
        return "changed"
    return "same" if h == h0 else "shifted"


def _shard_case(kind, src, dst, r, mutate):
    """Corrupts one random shard with ``mutate(bytes, rng) -> (bytes, desc)``."""
    target = r.choice(shards(src))
    clone_rank(src, dst, skip={target.name})
    orig = target.read_bytes()
    new, desc = mutate(orig, r)
    (dst / target.name).write_bytes(new)
    return target.name, orig, new, desc


def _expect_from_header(case, orig, new, path):
    verdict = header_verdict(orig, new)
    case.desc += f" [{verdict}]"
    if verdict == "invalid":
        case.expect, case.name_file = {2}, path
    elif verdict == "same":
        case.expect = {0}
    return verdict


def c_header_len(src, dst, r):
    def mutate(data, r):
        b = bytearray(data)
        h, jlen = header_of(data)
        how = r.choice(["bitflip", "byte", "random64", "delta"])
        for _ in range(20):  # a length inside [JSON end, reserved end) is the 'shifted' test's case
            if how == "bitflip":
                nh = h ^ (1 << r.randrange(64))
            elif how == "byte":
                k = r.randrange(8)
                nh = (h & ~(0xFF << 8 * k)) | (r.randrange(256) << 8 * k)
            elif how == "random64":
                nh = r.getrandbits(64)
            else:
                nh = h + r.choice([-1, 1]) * r.randrange(1, 4096)
            nh &= (1 << 64) - 1
            if nh != h and not jlen <= nh < h:
                break
        else:
            nh = h + 1
        b[:8] = struct.pack("<Q", nh)
        return bytes(b), f"{how}: header length {h} -> {nh}"
    name, orig, new, desc = _shard_case("header_len", src, dst, r, mutate)
    case = Case("header_len", f"{name}: {desc}")
    verdict = _expect_from_header(case, orig, new, dst / name)
    assert verdict in ("invalid", "shifted"), case.desc  # a different length with the same JSON
    if verdict == "shifted":  # only past the padding's end: JSON + spaces + whitespace data bytes
        case.expect = None
    return case


JSON_STRUCT = b'{}[]:,"'
INVALID_EVERYWHERE = bytes([0, 1, 2, 0x1f]) + bytes(range(0x80, 0x100, 7))  # control bytes, lone non-ASCII
NEVER_OUTSIDE_STRINGS = b"!#%&'()*;<=>?@\\^`|~" + INVALID_EVERYWHERE


def _outside_string_positions(text: bytes):
    """Offsets of JSON structural characters (quotes included) in compact JSON ``text``."""
    pos, in_str, esc = [], False, False
    for i, c in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif c == 0x5C:
                esc = True
            elif c == 0x22:
                in_str = False
                pos.append(i)
            continue
        if c == 0x22:
            in_str = True
        if c in JSON_STRUCT:
            pos.append(i)
    return pos


def c_header_json_syntax(src, dst, r):
    """A structural character (or quote) of the header JSON, or a padding space, becomes a byte
    that cannot stand outside a JSON string: never valid JSON."""
    def mutate(data, r):
        b = bytearray(data)
        h, jlen = header_of(data)
        text = data[8:8 + jlen]
        if r.random() < 0.75:
            i = r.choice(_outside_string_positions(text))
        else:
            i = r.randrange(jlen, h)  # the space padding after the JSON
        c = r.choice(NEVER_OUTSIDE_STRINGS)
        old = b[8 + i]
        b[8 + i] = c
        return bytes(b), f"header byte {i} {bytes([old])!r} -> {bytes([c])!r}"
    name, orig, new, desc = _shard_case("header_json_syntax", src, dst, r, mutate)
    case = Case("header_json_syntax", f"{name}: {desc}", expect={2}, name_file=dst / name)
    assert header_verdict(orig, new) == "invalid", case.desc
    return case


def c_header_json_flip(src, dst, r):
    """1-3 random bytes of the header JSON text (strings, numbers, anything) overwritten."""
    def mutate(data, r):
        b = bytearray(data)
        h, jlen = header_of(data)
        what = []
        for _ in range(r.randint(1, 3)):
            i = r.randrange(jlen)
            c = r.randrange(256) if r.random() < 0.5 else r.choice(b"0123456789 \t\n\"\\abcdefFIUBOL[]{},:-.e")
            what.append(f"{i}:{bytes([b[8 + i]])!r}->{bytes([c])!r}")
            b[8 + i] = c
        return bytes(b), "header bytes " + " ".join(what)
    name, orig, new, desc = _shard_case("header_json_flip", src, dst, r, mutate)
    case = Case("header_json_flip", f"{name}: {desc}")
    _expect_from_header(case, orig, new, dst / name)
    return case


def _data_span(data):
    h, _ = header_of(data)
    return 8 + h, len(data)


def c_data_flip(src, dst, r):
    """Tensor data bytes only (the header untouched): the values change, nothing else."""
    def mutate(data, r):
        b = bytearray(data)
        lo, hi = _data_span(data)
        what = []
        for _ in range(r.randint(1, 4)):
            i = r.randrange(lo, hi)
            c = r.randrange(256) if r.random() < 0.5 else b[i] ^ (1 << r.randrange(8))
            what.append(f"{i}:{b[i]:#04x}->{c:#04x}")
            b[i] = c
        return bytes(b), "data bytes " + " ".join(what)
    candidates = [s for s in shards(src) if (lambda lo, hi: hi > lo)(*_data_span(s.read_bytes()))]
    target = r.choice(candidates)
    clone_rank(src, dst, skip={target.name})
    new, desc = mutate(target.read_bytes(), r)
    (dst / target.name).write_bytes(new)
    return Case("data_flip", f"{target.name}: {desc}", expect={0, 1})


def c_truncate(src, dst, r):
    """A shard cut at a random point (in the length, the header, or the data)."""
    def mutate(data, r):
        lo, hi = _data_span(data)
        where = r.choice(["length", "header", "data", "data", "last byte"])
        n = {"length": lambda: r.randrange(0, 8), "header": lambda: r.randrange(8, lo),
             "data": lambda: r.randrange(lo, hi) if hi > lo else r.randrange(8, lo),
             "last byte": lambda: len(data) - 1}[where]()
        return data[:n], f"cut to {n} of {len(data)} bytes ({where})"
    name, orig, new, desc = _shard_case("truncate", src, dst, r, mutate)
    return Case("truncate", f"{name}: {desc}", expect={2}, name_file=dst / name)


def c_append(src, dst, r):
    """Garbage appended to a shard: bytes no header entry describes (a warning)."""
    def mutate(data, r):
        n = r.choice([1, 7, 8, 100, r.randrange(1, 5000)])
        return data + bytes(r.randrange(256) for _ in range(n)), f"{n} bytes appended"
    name, orig, new, desc = _shard_case("append", src, dst, r, mutate)
    return Case("append", f"{name}: {desc}", expect={0, 3})


def c_replace_shard(src, dst, r):
    target = r.choice(shards(src))
    clone_rank(src, dst, skip={target.name})
    how = r.choice(["empty file", "directory", "deleted", "symlink to nowhere"])
    if how == "empty file":
        (dst / target.name).write_bytes(b"")
    elif how == "directory":
        (dst / target.name).mkdir()
        if r.random() < 0.5:
            (dst / target.name / "x").write_bytes(b"x")
    elif how == "symlink to nowhere":
        os.symlink(dst / "no-such-file", dst / target.name)
    return Case("replace_shard", f"{target.name}: {how}", expect={2}, name_file=dst / target.name)


def _index_lines(src):
    return (src / "index.jsonl").read_bytes().split(b"\n")[:-1]  # every line ends with \n


def _write_index(dst, lines, tail=b"\n"):
    (dst / "index.jsonl").write_bytes(b"\n".join(lines) + (tail if lines else b""))


def index_expectation(data: bytes):
    """(first line number of a terminated line that is not a JSON object, or None): mirrors
    sw-compare's reader (blank lines skipped, an unterminated last line is a torn record)."""
    parts = data.split(b"\n")
    for no, raw in enumerate(parts, start=1):
        terminated = no < len(parts)
        if not raw.strip(b" \t\r"):
            continue
        try:
            ok = isinstance(_strict_json(raw.decode("utf-8")), dict)
        except ValueError:
            ok = False
        if not ok and terminated:
            return no
    return None


def c_index_truncate(src, dst, r):
    clone_rank(src, dst, skip={"index.jsonl"})
    data = (src / "index.jsonl").read_bytes()
    n = r.randrange(0, len(data))
    (dst / "index.jsonl").write_bytes(data[:n])
    bad = index_expectation(data[:n])
    assert bad is None  # every whole line is intact; only the last one may be torn
    # the end record (the last line) lost or torn: INCOMPLETE; only its newline lost: it is whole
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    assert b'"kind":"end"' in data[last:], "SyntheticDump wrote no end record"
    return Case("index_truncate", f"index.jsonl cut to {n} of {len(data)} bytes",
                expect={0, 3} if n == len(data) - 1 else {3})


def c_index_flip(src, dst, r):
    """1-3 random bytes of index.jsonl overwritten: a line made invalid must be named (exit 2);
    a changed value may end any way but a crash."""
    clone_rank(src, dst, skip={"index.jsonl"})
    b = bytearray((src / "index.jsonl").read_bytes())
    what = []
    for _ in range(r.randint(1, 3)):
        i = r.randrange(len(b))
        c = r.randrange(256) if r.random() < 0.5 else r.choice(b"0123456789 \n\"\\{}[],:-.etfnx")
        what.append(f"{i}:{bytes([b[i]])!r}->{bytes([c])!r}")
        b[i] = c
    (dst / "index.jsonl").write_bytes(bytes(b))
    case = Case("index_flip", "index bytes " + " ".join(what))
    bad = index_expectation(bytes(b))
    if bad is not None:
        case.desc += f" [line {bad} invalid]"
        case.expect, case.name_file, case.max_line = {2}, dst / "index.jsonl", bad
    return case


def c_index_bad_json_line(src, dst, r):
    """One terminated line made invalid JSON: cut short, a structural character replaced, or
    garbage inserted. Exit 2, naming index.jsonl:<line>."""
    clone_rank(src, dst, skip={"index.jsonl"})
    lines = _index_lines(src)
    k = r.randrange(len(lines))
    ln = lines[k]
    how = r.choice(["cut", "struct", "insert"])
    if how == "cut":
        ln = ln[:r.randrange(1, len(ln))]
    elif how == "struct":
        i = r.choice(_outside_string_positions(ln))
        ln = ln[:i] + bytes([r.choice(NEVER_OUTSIDE_STRINGS)]) + ln[i + 1:]
    else:
        i = r.randrange(len(ln) + 1)
        ln = ln[:i] + bytes([r.choice(INVALID_EVERYWHERE)]) + ln[i:]
    lines[k] = ln
    _write_index(dst, lines)
    bad = index_expectation((dst / "index.jsonl").read_bytes())
    if bad is None:  # a cut that left a valid prefix, e.g. '{}' can't happen: records are objects
        raise AssertionError(f"line {k + 1} still parses after {how}: {ln!r}")
    return Case("index_bad_json_line", f"line {k + 1} {how}: {ln[:80]!r}", expect={2},
                name_file=dst / "index.jsonl", name_line=k + 1)


def c_index_lines(src, dst, r):
    """A random line deleted or duplicated (next to itself or elsewhere): the index still
    parses, and the end record's counts no longer match: INCOMPLETE."""
    clone_rank(src, dst, skip={"index.jsonl"})
    lines = _index_lines(src)
    k = r.randrange(len(lines))
    how = r.choice(["delete", "duplicate", "duplicate elsewhere"])
    meta = b'"kind":"meta"' in lines[k]
    if how == "delete":
        del lines[k]
    elif how == "duplicate":
        lines.insert(k, lines[k])
    else:
        lines.insert(r.randrange(len(lines) + 1), lines[k])
    _write_index(dst, lines)
    # a lost or repeated op, tensor or end record is INCOMPLETE (the end record counts them);
    # the meta record carries no data
    return Case("index_lines", f"{how} line {k + 1}" + (" (meta)" if meta else ""), expect={0, 3} if meta else {3})


CLASSES = {
    "header_len": c_header_len,
    "header_json_syntax": c_header_json_syntax,
    "header_json_flip": c_header_json_flip,
    "data_flip": c_data_flip,
    "truncate": c_truncate,
    "append": c_append,
    "replace_shard": c_replace_shard,
    "index_truncate": c_index_truncate,
    "index_flip": c_index_flip,
    "index_bad_json_line": c_index_bad_json_line,
    "index_lines": c_index_lines,
}
CASES_PER_CLASS = 28  # 11 classes x 28 = 308 corruptions


def _save_finding(kind, i, case, a, root, verdict):
    """With SW_FUZZ_FINDINGS=DIR: DIR/seed{base}-{kind}-{i}/ gets a/, the corrupted b/ and case.txt."""
    out = os.environ.get("SW_FUZZ_FINDINGS")
    if not out:
        return
    dst = Path(out) / f"seed{BASE_SEED}-{kind}-{i}"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(a, dst / "a")
    shutil.copytree(root, dst / "b", symlinks=True)
    (dst / "case.txt").write_text(f"{case}\nrc={verdict.rc}\n" + "\n".join(verdict.problems) + "\n")


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_corruption_never_crashes(kind, pair, tmp_path, seed, exe):
    a, b = pair
    r = random.Random(seed)
    failures, rcs, slowest = [], {}, 0.0
    for i in range(CASES_PER_CLASS):
        root = tmp_path / f"c{i}"
        case = CLASSES[kind](b / REL, root / REL, r)
        verdict = check_run(exe, a, root, expect=case.expect, name_file=case.name_file, name_line=case.name_line,
                            max_line=case.max_line)
        rcs[verdict.rc] = rcs.get(verdict.rc, 0) + 1
        slowest = max(slowest, verdict.seconds)
        if verdict.problems:
            failures.append(f"case {i}: {case.desc} (expect {sorted(case.expect) if case.expect else 'any'}): "
                            + "; ".join(verdict.problems))
            _save_finding(kind, i, case, a, root, verdict)
        else:
            shutil.rmtree(root)
    print(f"{kind} (seed {seed}): exit statuses {dict(sorted(rcs.items(), key=str))}, slowest run {slowest:.3f} s")
    assert not failures, (f"STRIDEWISE_SEED={BASE_SEED} (seed {seed}): {len(failures)} of {CASES_PER_CLASS} "
                          f"{kind} cases failed:\n" + "\n".join(failures))


def _edit_one(pair, tmp_path, name, edit):
    """A copy of B with file ``name`` of its rank directory replaced by ``edit(bytes)``; returns
    (A, the copy's root, the edited file)."""
    a, b = pair
    src = b / REL
    dst = tmp_path / "c" / REL
    clone_rank(src, dst, skip={name})
    (dst / name).write_bytes(edit((src / name).read_bytes()))
    return a, tmp_path / "c", dst / name


def test_invalid_utf8_in_a_shard_header_is_a_named_error(pair, tmp_path, exe):
    """A non-UTF-8 byte in the header JSON: nlohmann's parse error quotes the bytes it read
    (``last read: '"__m\\xb0'``), and that message must still end as a named error (exit 2), not as
    an 'internal error' from writing it into the JSON report."""
    def edit(data):
        b = bytearray(data)
        b[8 + 5] = 0xB0  # {"__m?tadata__": ...
        return bytes(b)
    a, root, shard = _edit_one(pair, tmp_path, "shard_00000.safetensors", edit)
    verdict = check_run(exe, a, root, expect={2}, name_file=shard)
    assert not verdict.problems, verdict.problems


def test_nul_in_the_header_padding_is_an_error(pair, tmp_path, exe):
    """A NUL byte in the space padding after the header JSON: not JSON (the safetensors library
    rejects the file: "trailing characters"); nlohmann's parser stops at a NUL as if the input
    ended there, so a reader that does not check for it accepts the file."""
    def edit(data):
        b = bytearray(data)
        _, jlen = header_of(data)
        b[8 + jlen + 3] = 0
        return bytes(b)
    a, root, shard = _edit_one(pair, tmp_path, "shard_00000.safetensors", edit)
    verdict = check_run(exe, a, root, expect={2}, name_file=shard)
    assert not verdict.problems, verdict.problems


def test_nul_joining_two_index_lines_is_invalid_json(pair, tmp_path, exe):
    """The newline after line 2 of index.jsonl turned into a NUL: line 2 now holds two records
    and a NUL, which is not JSON (exit 2, naming line 2); a parser that stops at the NUL reads
    the first record and silently drops the second."""
    def edit(data):
        i = data.index(b"\n", data.index(b"\n") + 1)
        return data[:i] + b"\0" + data[i + 1:]
    a, root, index = _edit_one(pair, tmp_path, "index.jsonl", edit)
    assert index_expectation(index.read_bytes()) == 2
    verdict = check_run(exe, a, root, expect={2}, name_file=index, name_line=2)
    assert not verdict.problems, verdict.problems


def test_header_length_moved_into_the_padding(pair, tmp_path, exe):
    """The 8-byte header length lowered to a value still past the JSON text: the header still
    parses (JSON + spaces), but the data section now starts inside the padding, so every tensor
    of the shard would be read from the wrong bytes. The index records each tensor's absolute
    offset; a reader that checks it against the header's says which shard is damaged (exit 2)."""
    a, b = pair
    src = b / REL
    target = shards(src)[0]
    data = bytearray(target.read_bytes())
    h, jlen = header_of(bytes(data))
    nh = (jlen + 8 + h) // 2 // 8 * 8
    data[:8] = struct.pack("<Q", nh)
    dst = tmp_path / "c" / REL
    clone_rank(src, dst, skip={target.name})
    (dst / target.name).write_bytes(bytes(data))
    assert header_verdict(target.read_bytes(), bytes(data)) == "shifted"
    verdict = check_run(exe, a, tmp_path / "c", expect={2}, name_file=dst / target.name)
    assert not verdict.problems, f"header length {h} -> {nh}: {verdict.problems}"


# ------------------------------------------------------------------------------------------
# the checker can fail: fake sw-compare binaries with planted faults

def test_error_line_pattern_takes_a_file_name_with_a_colon():
    m = ERROR_LINE.match("sw-compare: error: /r/c10/shard:00002.safetensors: cannot open: No such file")
    assert m and m["file"] == "/r/c10/shard:00002.safetensors" and m["line"] is None
    assert m["reason"] == "cannot open: No such file"
    m = ERROR_LINE.match("sw-compare: error: /r/index.jsonl:12: bad record")
    assert m and (m["file"], m["line"], m["reason"]) == ("/r/index.jsonl", "12", "bad record")
    assert not ERROR_LINE.match("sw-compare: error: no reason")


def _fake(tmp_path, name, body):
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


GOOD_JSON = '{"summary": {"exit_code": %d}}'


def test_checker_catches_planted_faults(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shard = b / REL / "shard_00000.safetensors"
    index = b / REL / "index.jsonl"
    err2 = f'echo "sw-compare: error: {shard}: safetensors header is not valid JSON" >&2; exit 2'
    fakes = {  # name: (script, check_run kwargs, the problem it must report)
        "segv": ("kill -SEGV $$", {}, "killed by signal 11"),
        "abort": ("kill -ABRT $$", {}, "killed by signal 6"),
        "exit 2 silently": ("exit 2", {}, "exit 2 without"),
        "error names no file": ('echo "sw-compare: error: something went wrong" >&2; exit 2', {},
                                "malformed error line"),
        "error names a file outside": ('echo "sw-compare: error: /etc/passwd: bad" >&2; exit 2', {},
                                       "names no file under A or B"),
        "error names another file": (err2, {"name_file": index}, f"no error line names {index}"),
        "error names another line": (f'echo "sw-compare: error: {index}:3: invalid JSON record: x" >&2; exit 2',
                                     {"name_file": index, "name_line": 4}, f"names {index}:4"),
        "error names a later line": (f'echo "sw-compare: error: {index}:9: invalid JSON record: x" >&2; exit 2',
                                     {"name_file": index, "max_line": 4}, "<line <= 4>"),
        "terminate": ("echo \"terminate called after throwing an instance of 'std::out_of_range'\" >&2; "
                      f"echo '{GOOD_JSON % 1}'; exit 1", {}, "terminate called"),
        "internal error": (f'echo "sw-compare: internal error: oops" >&2; echo \'{GOOD_JSON % 2}\'; exit 2', {},
                           "internal error"),
        "ubsan": (f'echo "src/engine.cpp:67:5: runtime error: load of misaligned address" >&2; '
                  f"echo '{GOOD_JSON % 0}'; exit 0", {}, "UBSan runtime error"),
        "asan": ('echo "==1==ERROR: AddressSanitizer: heap-buffer-overflow" >&2; exit 1', {}, "AddressSanitizer"),
        "exit 4": ("exit 4", {}, "not one of 0-3"),
        "broken json": ('echo \'{"summary": {"exit_code": 1}\'; exit 1', {}, "not valid JSON"),
        "no json": ("exit 0", {}, "not valid JSON"),
        "json disagrees": (f"echo '{GOOD_JSON % 0}'; exit 1", {}, "says exit_code 0"),
        "pass on structural damage": (f"echo '{GOOD_JSON % 0}'; exit 0", {"expect": {2}}, "expected [2]"),
        "error on data damage": (err2, {"expect": {0, 1}}, "expected [0, 1]"),
        "incomplete on a bad shard": (f"echo '{GOOD_JSON % 3}'; exit 3", {"expect": {2}}, "expected [2]"),
        "hang": ("exec sleep 30", {"timeout": 1}, "hung"),
    }
    missed = []
    for name, (script, kw, want) in fakes.items():
        v = check_run(_fake(tmp_path, name.replace(" ", "_"), script), a, b, **kw)
        if not any(want in p for p in v.problems):
            missed.append(f"{name}: wanted a problem with {want!r}, got {v.problems}")
    assert not missed, "\n".join(missed)
    # and the checker passes a well-behaved binary
    for script, kw in [(f"echo '{GOOD_JSON % 0}'; exit 0", {"expect": {0}}),
                       (f"echo '{GOOD_JSON % 1}'; exit 1", {"expect": {0, 1}}),
                       (f'echo "sw-compare: error: {index}:4: invalid JSON record: x" >&2; exit 2',
                        {"expect": {2}, "name_file": index, "name_line": 4, "max_line": 4}),
                       (err2, {"expect": {2}, "name_file": shard}),
                       (f"echo '{GOOD_JSON % 3}'; exit 3", {"expect": {0, 3}})]:
        v = check_run(_fake(tmp_path, "ok", script), a, b, **kw)
        assert not v.problems, (script, v.problems)


def test_classifiers(tmp_path, seed):
    """The expectations rest on header_verdict and index_expectation: check them on known input."""
    rank = write_dump(tmp_path / "d", seed)
    data = shards(rank)[0].read_bytes()
    h, jlen = header_of(data)
    b = bytearray(data)
    b[8 + jlen] = ord("\t")
    assert header_verdict(data, bytes(b)) == "same"
    b[8 + jlen] = ord("x")
    assert header_verdict(data, bytes(b)) == "invalid"
    assert header_verdict(data, struct.pack("<Q", jlen) + data[8:]) == "shifted"
    assert header_verdict(data, struct.pack("<Q", h + 1) + data[8:]) in ("invalid", "shifted")
    assert header_verdict(data, data[:7]) == "invalid"
    assert header_verdict(data, struct.pack("<Q", len(data)) + data[8:]) == "invalid"
    text = data[8:8 + jlen].replace(b'"pt"', b'"pu"')
    assert header_verdict(data, data[:8] + text + data[8 + jlen:]) == "changed"
    idx = (rank / "index.jsonl").read_bytes()
    assert index_expectation(idx) is None
    assert index_expectation(idx[:-5]) is None  # torn last line
    lines = idx.split(b"\n")
    assert index_expectation(b"\n".join(lines[:2] + [lines[2][:-1]] + lines[3:])) == 3
    assert index_expectation(b"\n".join(lines[:2] + [b"NaN"] + lines[3:])) == 3
    assert index_expectation(b"\n".join(lines[:2] + [b"  \t"] + lines[3:])) is None
