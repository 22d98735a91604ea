#!/usr/bin/env python3
"""Reads compute-sanitizer logs (memcheck or racecheck; several target processes each) and says
whose kernels the reported errors are in.

    scripts/sanitizer_summary.py LOG [LOG ...]

Each error block starts with a ``========= <what>`` line (``Invalid __global__ read of size 4
bytes``, ``Error: Race reported between ...``, ``Program hit cudaError...``) followed by
``=========     at <function>+0x..`` frames. A device error is *ours* when a device frame is in
stridewise (a symbol under ``stridewise::``, or a source under core/src/), *ATen's* when it is
in ``at::`` (the known one is named, see python/stridewise/audit/known.py), and *other*
otherwise (a test's planted kernel, a Triton kernel); an error a CUDA API call returned is a
*CUDA API error* (its frames are the host's). Prints one line per kernel with its count, and
the processes' SUMMARY lines. Exit status: 1 when any error is in our kernels or no log holds a
SUMMARY line at all (the tool never finished), else 0; errors elsewhere are reported, not
failed on (the tests that ran those kernels fail on their own if the error reached them).
"""
from __future__ import annotations

import re
import sys
from collections import Counter

PREFIX = "========="
SUMMARY = re.compile(r"(ERROR|RACECHECK|LEAK|INITCHECK|SYNCCHECK) SUMMARY")
NOT_ERRORS = re.compile(r"^(COMPUTE-SANITIZER|Target application returned|Saved host backtrace|"
                        r"Host Frame|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|$)")
# A frame naming the function: "at <function>+0x.. in file:line" (memcheck) or
# "... in file:line:<function>" (racecheck).
FRAME = re.compile(r"^at (?:0x[0-9a-f]+: )?(.*?)(?:\+0x[0-9a-f]+)?(?: in \S+)?$|"
                   r" in [^\s:]+:\d+:(.*?)(?: \[\d+ hazards?\])?$")
# ATen's CUDA kernels that emulate 1- and 2-byte atomics with a 4-byte compare-and-swap on the
# aligned word around the element (the known issue aten-cuda-narrow-atomic-cas).
KNOWN_ATEN = re.compile(r"at::native::.*_scatter_gather_elementwise_kernel")


def kernel_name(frame: str) -> str:
    """The function name without its template arguments and parameters (short enough to read)."""
    depth, out = 0, []
    for ch in frame:
        if ch in "<(":
            depth += 1
            if depth == 1:
                out.append("<...>" if ch == "<" else "(...)")
            continue
        if ch in ">)":
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out).replace("void ", "", 1).strip()


def whose(head: str, block: str) -> str:
    """Device errors by their device frames (the kernel); an error a CUDA API call returned
    ("Program hit ...") is its own class: its frames are the host's, and a test may provoke one
    on purpose (or meet an out-of-memory, as too many processes under memcheck at once did)."""
    if head.startswith("Program hit"):
        return "CUDA API error"
    device = "\n".join(ln for ln in block.splitlines() if "Host Frame" not in ln)
    if "stridewise::" in device or "/core/src/" in device:
        return "ours"
    if KNOWN_ATEN.search(device):
        return "ATen (known: aten-cuda-narrow-atomic-cas)"
    if "at::" in device or "c10::" in device:
        return "ATen"
    return "other"


def parse(text: str):
    """([(header, first frame's function or '', the block's text)], [summary lines])."""
    blocks, summaries = [], []
    cur = None
    for line in text.splitlines():
        if not line.startswith(PREFIX):
            continue
        body = line[len(PREFIX):]
        if body.startswith("  "):  # a continuation line of the current block
            if cur is not None:
                cur[2].append(body.strip())
            continue
        body = body.strip()
        if SUMMARY.match(body):
            summaries.append(body)
        cur = None if NOT_ERRORS.match(body) else [body, "", []]
        if cur is not None:
            blocks.append(cur)
    out = []
    for head, _, lines in blocks:
        fn = ""
        for ln in [head] + lines:
            m = FRAME.search(ln)
            if m:
                fn = m.group(1) or m.group(2) or ""
                break
        out.append((head, fn, "\n".join([head] + lines)))
    return out, summaries


def main(paths) -> int:
    errors, summaries = [], []
    for p in paths:
        e, s = parse(open(p, errors="replace").read())
        errors += e
        summaries += [f"{p}: {x}" for x in s]
    by = Counter()
    for head, fn, block in errors:
        what = re.sub(r" (of size \d+ bytes|at 0x[0-9a-f]+.*)$", "", head)[:60]
        by[(whose(head, block), kernel_name(fn) if fn else "(no kernel frame)", what)] += 1
    ours = sum(n for (k, _, _), n in by.items() if k == "ours")
    print(f"sanitizer errors: {len(errors)} ({ours} in stridewise kernels)")
    for (kind, name, what), n in sorted(by.items(), key=lambda x: (x[0][0] != "ours", -x[1])):
        print(f"  {n:6d}  {kind:42s} {what:44s} {name[:160]}")
    print(f"processes that finished: {len(summaries)}")
    for s in sorted(set(x.split(": ", 1)[1] for x in summaries)):
        print(f"  {sum(1 for x in summaries if x.endswith(s)):5d} x {s}")
    if not summaries:
        print("no sanitizer SUMMARY line in the logs: the tool did not finish")
        return 1
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
