"""``stridewise audit --grad``: the backward of every differentiable case, judged against native.

- a planted backward-only bug (tests/grad_planted_backend.py: gather's backward overwrites
  instead of accumulating) passes the forward audit and is found by --grad: harm class
  backward, diagnosis "indices repeat", the backward op that ran named, a repro script that
  replays the backward (and that native passes)
- a backward that reads the upstream gradient as contiguous memory is diagnosed by the upstream
  gradient's layout
- native ATen and stridewise (CPU) have no backward finding over a quick matrix of the family
- the comparison itself: bitwise where an element gets at most one term, the float64 rule
  where it sums several, missing gradients and errors in backward (tampered answers)

CI time is short: every audit here is sized down (--variants func, --limit), one worker.
Seeds: STRIDEWISE_SEED when set, else random per run (printed on failure).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
import torch

from conftest import PYDIR, ROOT, require_swdev  # noqa: E402  (the installed package or python/)
from stridewise import schemas  # noqa: E402
from stridewise.audit import cli, gen, grad, oracle, worker  # noqa: E402
from stridewise.audit.caseid import make_case  # noqa: E402
from stridewise.audit.specs import SPECS  # noqa: E402

SEED = int(os.environ.get("STRIDEWISE_SEED") or random.SystemRandom().randrange(1, 10**6)) % 10**6
PLANTED = ROOT / "tests" / "grad_planted_backend.py"
PKG_ROOT = ROOT / "tests" / "privateuse1"  # sw_testdev, the PrivateUse1 test device
# the family's differentiable ops (their func variants) that the quick matrices below cover
FAMILY = ("gather,scatter,scatter_add,scatter_reduce,index_select,index_add,index_copy,index,"
          "index_put,take,put,embedding")


def audit(tmp_path, *args):
    """The CLI in-process, one worker, func variants: (exit status, JSON report, repro dir)."""
    out = tmp_path / f"a{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    argv = [*map(str, args), "--variants", "func", "--matrix", "quick", "--jobs", "1",
            "--json", str(out / "r.json"), "--repro-dir", str(out / "repro"), "--no-progress",
            "--seed", str(SEED), "-q"]
    rc = cli.main(argv)
    assert (out / "r.json").exists(), f"STRIDEWISE_SEED={SEED}: no report (exit {rc}) for {argv}"
    rep = json.loads((out / "r.json").read_text())
    schemas.validate(rep, schemas.AUDIT_REPORT, str(out / "r.json"))
    return rc, rep, out / "repro"


def why(rep) -> str:
    fails = [f"{f['status']}/{f['reason']} {f['id']}: {f['detail'][:300]}" for f in rep["failures"]][:8]
    diag = {op: [d["text"] for d in v["diagnosis"]] for op, v in rep["ops"].items() if v["diagnosis"]}
    return (f"STRIDEWISE_SEED={SEED} argv={rep.get('argv')} summary={rep['summary']} "
            f"backward={rep.get('backward', {}).get('counts')} diagnosis={diag}\n" + "\n".join(fails))


def backward_group(rep, op):
    gs = [g for g in rep["ops"][op]["harm"] if g["class"] == "backward"]
    return gs[0] if gs else None


# --------------------------------------------------------------------------------------------
# the planted backward-only bugs


def test_planted_backward_overwrite_is_found_only_with_grad(tmp_path):
    backend = f"{PLANTED}:enable(overwrite)"
    rc, rep, _ = audit(tmp_path, "--ops", "gather", "--limit", "60", "--backend", backend)
    assert rc == 0 and rep["summary"]["failed"] == 0, why(rep)  # the forward is native's
    assert "backward" not in rep
    # --known: the planted backend runs ATen's CPU kernels underneath, with their known bugs
    rc, rep, repro = audit(tmp_path, "--ops", "gather", "--limit", "60", "--backend", backend, "--grad",
                           "--known")
    assert rc == 1 and rep["summary"]["exit_status"] == 1, why(rep)
    g = backward_group(rep, "gather")
    assert g is not None and g["cases"] == rep["summary"]["failed"], why(rep)
    assert {f["reason"] for f in rep["failures"]} == {"backward-values"}, why(rep)
    assert "aten::scatter_.src" in g["backward_ops"], why(rep)  # the backward op that ran
    d = rep["ops"]["gather"]["diagnosis"][0]  # the headline: one cause for every failure
    assert set(d["predicate"].split("&")) & {"grad.repeats", "kind=dup"}, why(rep)
    assert "indices repeat" in d["text"] and d["explained"] == d["failing"], why(rep)
    assert g["why"].startswith("fails in backward") and "indices repeat" in g["why"], g
    assert rep["backward"]["counts"].get("wrong") == g["cases"], why(rep)
    f = rep["failures"][0]
    assert f["grad"]["status"] == "wrong" and "aten::scatter_.src" in f["grad"]["ops"], f
    # the repro script replays the backward: it reproduces with the backend, native passes it
    env = dict(os.environ, PYTHONPATH=f"{PYDIR}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    script = f["repro"]
    r = subprocess.run([sys.executable, script, "cpu"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 1 and "FAIL (reproduced) (backward)" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([sys.executable, script, "cpu", "--native"], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0 and "gradients match" in r.stdout, r.stdout + r.stderr


def test_backward_only_kernel_is_audited_without_run_native(tmp_path, capsys):
    """A backend that registers only aten::embedding_dense_backward (every forward variant
    native's): --grad runs its embedding cases (not skipped as native) and finds the dropped
    duplicate gradients; the coverage table names the backward kernels and who runs them."""
    backend = f"{PLANTED}:enable(dense_dup)"
    rc, rep, _ = audit(tmp_path, "--ops", "embedding", "--limit", "80", "--no-repros", "--backend", backend)
    assert rc == 0 and rep["summary"]["failed"] == 0, why(rep)  # forward only: nothing of it runs
    assert rep["coverage"]["embedding"]["func"]["ran_by"] == "native", rep["coverage"]
    logs = tmp_path / "logs"
    rc, rep, _ = audit(tmp_path, "--ops", "embedding", "--limit", "80", "--no-repros", "--grad",
                       "--backend", backend, "--log-dir", str(logs))
    # a case native's forward rejects has no backward: its forward is native's, never run (on
    # CUDA each would cost a worker, ATen's device assert)
    ran = {ln.split("] ", 1)[1] for f in logs.glob("*.log") for ln in f.read_text().splitlines()
           if ln.startswith("[case] ")}
    rejected = [c for c, st in rep["cases"] if any(f"/{k}/" in c for k in ("oob", "oobneg", "oobbig"))]
    assert ran and rejected and not set(rejected) & ran, (sorted(set(rejected) & ran)[:3], len(ran))
    cov = rep["coverage"]["embedding"]["func"]
    assert cov["ran_by"] == "backward", cov
    assert cov["backward"]["backend"] == ["aten::embedding_dense_backward"], cov
    assert "aten::embedding_backward" in cov["backward"]["overloads"], cov  # composite: named too
    assert rc == 1 and {f["reason"] for f in rep["failures"]} == {"backward-values"}, why(rep)
    d = rep["ops"]["embedding"]["diagnosis"][0]
    assert "repeated indices are not all summed" in d["text"], why(rep)
    assert all(f.get("ran_by") == "backward" for f in rep["failures"]), rep["failures"][:2]
    # the text report's coverage line names the backward kernel and who runs it
    capsys.readouterr()
    cli.main(["--ops", "embedding", "--limit", "80", "--no-repros", "--grad", "--backend", backend,
              "--variants", "func", "--matrix", "quick", "--jobs", "1", "--no-progress", "--seed", str(SEED)])
    text = capsys.readouterr().out
    line = next((ln for ln in text.splitlines() if ln.strip().startswith("embedding  func:")), "")
    assert "backward: aten::embedding_dense_backward [backend]" in line, text[-3000:]
    # the same kernel, right: every backward passes, and those passes are the backend's
    rc, rep, _ = audit(tmp_path, "--ops", "embedding", "--limit", "80", "--no-repros", "--grad",
                       "--backend", f"{PLANTED}:enable(dense_ok)")
    assert rc == 0 and rep["summary"]["failed"] == 0, why(rep)
    passed = [c for c in rep["cases"] if c[1] == "pass"]
    assert len(passed) == rep["backward"]["counts"].get("pass", -1) > 0, why(rep)


def test_upstream_gradient_read_as_contiguous_is_diagnosed_by_its_layout(tmp_path):
    rc, rep, _ = audit(tmp_path, "--ops", "gather", "--limit", "60", "--no-repros", "--grad", "--known",
                       "--backend", f"{PLANTED}:enable(upstream_contig)")
    assert rc == 1 and backward_group(rep, "gather") is not None, why(rep)
    d = rep["ops"]["gather"]["diagnosis"][0]
    assert "grad_out.strided" in d["predicate"].split("&"), why(rep)
    assert rep["summary"]["failed"] == backward_group(rep, "gather")["cases"], why(rep)
    assert "upstream gradient is read as contiguous memory" in d["text"], why(rep)
    bad = {c[3] for c in rep["backward"]["cases"] if c[1] == "wrong"}
    assert bad and "contiguous" not in bad, why(rep)


# --------------------------------------------------------------------------------------------
# no backward finding where there is none


def test_native_aten_has_no_backward_finding(tmp_path):
    rc, rep, _ = audit(tmp_path, "--ops", FAMILY, "--limit", "40", "--no-repros", "--grad")
    assert rc == 0 and rep["summary"]["failed"] == 0, why(rep)
    c = rep["backward"]["counts"]  # known: ATen's own bugs (known.py), e.g. its CPU scatter fast path
    assert c.get("pass", 0) >= 100 and set(c) <= {"pass", "skip", "known"}, why(rep)


def test_stridewise_has_no_backward_finding(tmp_path, sw):
    rc, rep, _ = audit(tmp_path, "--ops", FAMILY, "--limit", "40", "--no-repros", "--grad",
                       "--backend", "stridewise")
    assert rc == 0 and rep["summary"]["failed"] == 0, why(rep)
    c = rep["backward"]["counts"]
    assert c.get("pass", 0) >= 100 and set(c) <= {"pass", "skip"}, why(rep)
    ran = {q for case in rep["backward"]["cases"] for q in case[4]}
    assert "aten::scatter_add" in ran, ran  # gather's backward (run by stridewise's kernel)


def _audit_jobs(tmp_path, jobs, *args):
    """:func:`audit` with ``jobs`` workers (its own --jobs 1 comes first: the last one counts)."""
    out = tmp_path / f"j{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    argv = [*map(str, args), "--variants", "func", "--matrix", "quick", "--json", str(out / "r.json"),
            "--no-repros", "--no-progress", "--seed", str(SEED), "-q", "--jobs", str(jobs)]
    rc = cli.main(argv)
    rep = json.loads((out / "r.json").read_text())
    schemas.validate(rep, schemas.AUDIT_REPORT, str(out / "r.json"))
    return rc, rep


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA: the device's autograd thread")
@pytest.mark.parametrize("jobs", [1, 3])
def test_grad_on_cuda_with_one_worker_and_several(tmp_path, jobs):
    """--grad on CUDA (tests/test_audit_grad.py on the H200, 2026-12-04: every backward case a
    bad-error "Unable to handle autograd's threading in combination with fork-based
    multiprocessing"): native ATen passes, with one worker and with several, after this process
    ran a backward; the planted backward-only kernel is found on the device too."""
    x = torch.randn(3, requires_grad=True)
    (x * 2).sum().backward()  # what an earlier test or the oracle did in this process
    rc, rep = _audit_jobs(tmp_path, jobs, "--device", "cuda", "--ops", FAMILY, "--limit", "30", "--grad")
    fails = [f["detail"] for f in rep["failures"]]
    assert not any("autograd's threading" in d for d in fails), fails[:3]
    assert rc == 0 and rep["summary"]["failed"] == 0, why(rep)
    c = rep["backward"]["counts"]
    assert c.get("pass", 0) >= 100 and set(c) <= {"pass", "skip", "known"}, why(rep)
    rc, rep = _audit_jobs(tmp_path, jobs, "--device", "cuda", "--ops", "embedding", "--limit", "80", "--grad",
                          "--backend", f"{PLANTED}:enable(dense_dup)")
    assert rep["coverage"]["embedding"]["func"]["ran_by"] == "backward", rep["coverage"]
    # (the failures list holds device asserts too: the planted kernel's index_put_ on CUDA)
    reasons = {f["reason"] for f in rep["failures"] if f["status"] != "device-assert"}
    assert rc == 1 and reasons == {"backward-values"}, why(rep)
    assert "repeated indices are not all summed" in rep["ops"]["embedding"]["diagnosis"][0]["text"], why(rep)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA")
def test_stridewise_has_no_backward_finding_on_cuda(tmp_path, sw):
    # deferred check mode: a bad index is raised by the next call, so the audit flushes after
    # each (docs/audit.md, "Errors reported after the call"; without it: missing errors, then
    # spurious ones, on the H100 2026-12-07)
    rc, rep = _audit_jobs(tmp_path, 3, "--device", "cuda", "--ops", FAMILY, "--limit", "40", "--grad",
                          "--backend", "stridewise", "--flush", "stridewise:check_errors(True)")
    assert rc == 0 and rep["summary"]["failed"] == 0, why(rep)
    c = rep["backward"]["counts"]
    assert c.get("pass", 0) >= 100 and set(c) <= {"pass", "skip"}, why(rep)


def test_grad_workers_are_never_forked_after_a_backward_where_torch_has_a_device(tmp_path):
    """On a GPU machine a process's first backward, even on the CPU, starts CUDA's autograd
    thread, and a worker forked after it fails every backward (tests/test_audit_grad.py on the
    H200, 2026-12-04: every case a bad-error, "Unable to handle autograd's threading ..."). The
    swdev test device plays CUDA here: loaded, its autograd thread starts the same way. The
    script checks that the hazard is real in this process (forced fork: bad-errors), then that
    the default start method avoids it (every backward passes)."""
    lib = require_swdev()
    script = tmp_path / "fork_after_backward.py"
    script.write_text(f"""
import json, sys
import torch
import sw_testdev  # noqa: F401  (registers swdev: an autograd device thread at the first backward)
from stridewise.audit import cli, slots

def audit(*extra):
    out = {str(tmp_path)!r} + "/r%d.json" % len(extra)
    cli.main([*extra, "--ops", "gather,index_select", "--grad", "--variants", "func", "--matrix",
              "quick", "--limit", "6", "--jobs", "1", "--json", out, "--no-repros",
              "--no-progress", "-q", "--seed", "{SEED}"])
    rep = json.load(open(out))
    return rep["backward"]["counts"], [f["detail"] for f in rep["failures"]]

if __name__ == "__main__":
    slots._accelerator_initialized = lambda: False  # as CUDA before its first use
    x = torch.randn(3, requires_grad=True)
    (x * 2).sum().backward()  # an earlier test's backward, or the oracle's
    print("FORK", json.dumps(audit("--start-method", "fork")))
    print("AUTO", json.dumps(audit()))
""")
    env = dict(os.environ, SW_TESTDEV_LIB=str(lib), PYTHONPATH=os.pathsep.join(
        [str(PKG_ROOT), str(PYDIR)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=env, cwd=str(tmp_path))
    got = {ln[:4]: json.loads(ln[5:]) for ln in r.stdout.splitlines() if ln[:4] in ("FORK", "AUTO")}
    assert r.returncode == 0 and set(got) == {"FORK", "AUTO"}, r.stdout[-2000:] + r.stderr[-3000:]
    (fork_counts, fork_fails), (auto_counts, _) = got["FORK"], got["AUTO"]
    assert fork_counts.get("bad-error") and "autograd's threading" in fork_fails[0], got["FORK"]
    # the same seed and cases: every backward that failed forked passes (how many the seed draws
    # varies, so the count is the forked run's, not a number)
    ran = fork_counts.get("bad-error", 0) + fork_counts.get("pass", 0)
    assert auto_counts.get("pass", 0) == ran > 0 and set(auto_counts) <= {"pass", "skip"}, got


# --------------------------------------------------------------------------------------------
# the comparison, on tampered answers


def _native_answer(case):
    """(GradRef, the worker's answer for native CPU) of ``case``."""
    spec = SPECS[case.op]
    built = gen.build(spec, case)
    tol = oracle.Tolerance()
    ref = oracle.reference(spec, built, tol)
    gr = grad.reference(spec, built, ref.expected, tol)
    ans = grad.run(spec, case, built, dict(built.tensors), torch.device("cpu"), None,
                   worker.synchronize, worker.classify_error)
    return gr, ans, tol


def _case_with_terms():
    """A gather case whose self gradient has elements of one term and of several."""
    for s in range(SEED, SEED + 200):
        c = make_case("gather", "func", {}, 2, "float32", "i64", "rand", {}, s)
        gr, ans, tol = _native_answer(c)
        ex = gr.exact["self"]
        if bool((ex & (gr.grads["self"] != 0)).any()) and bool((~ex).any()):
            return c, gr, ans, tol
    pytest.fail(f"STRIDEWISE_SEED={SEED}: no gather case with one-term and many-term elements")


def _tampered(ans, at, value):
    g = gen.unpack(ans["grads"]["self"]).clone()
    g[at] = value
    return dict(ans, grads=dict(ans["grads"], self=gen.pack(g)))


def test_every_backward_check_fires_on_a_tampered_answer():
    case, gr, ans, tol = _case_with_terms()
    assert grad.judge(gr, ans, tol).status == "pass"
    exp = gr.grads["self"]
    one = tuple((gr.exact["self"] & (exp != 0)).nonzero()[0].tolist())  # one term: bitwise
    many = tuple((~gr.exact["self"]).nonzero()[0].tolist())  # several terms: the float64 rule
    ulp = lambda v: torch.nextafter(v, torch.tensor(float("inf")))  # noqa: E731
    v = grad.judge(gr, _tampered(ans, one, ulp(exp[one])), tol)
    assert v.status == "wrong" and v.reason == "backward-values" and "bitwise" in v.detail, (case.id, v)
    # one ulp on an element that sums several terms is within the rule ...
    assert grad.judge(gr, _tampered(ans, many, ulp(exp[many])), tol).status == "pass", case.id
    # ... ten times its tolerance is not
    bad = float(gr.ref64["self"][many]) + 10 * float(gr.tol["self"][many])
    v = grad.judge(gr, _tampered(ans, many, bad), tol)
    assert v.status == "wrong" and "accumulation" in v.detail, (case.id, v)
    v = grad.judge(gr, dict(ans, grads={"self": None}), tol)
    assert v.reason == "backward-missing", v
    v = grad.judge(gr, {"ops": ["aten::scatter_add"], "exc_type": "RuntimeError", "exc_msg": "boom"}, tol)
    assert v.status == "bad-error" and v.reason == "backward-error" and "aten::scatter_add" in v.detail, v
    v = grad.judge(gr, dict(ans, no_graph=True), tol)
    assert v.reason == "backward-missing", v


def test_upstream_gradient_layouts_are_deterministic_and_all_met():
    seen = set()
    for s in range(60):
        c = make_case("gather", "func", {}, 2, "float32", "i64", "rand", {}, s)
        g = grad.upstream(c, [3, 4], torch.float32)
        assert torch.equal(g, grad.upstream(c, [3, 4], torch.float32))
        lay = grad.upstream_layout(c, [3, 4])
        assert (lay == "contiguous") == g.is_contiguous(), lay
        assert (lay == "expand") == (0 in g.stride()), lay
        seen.add(lay)
    assert seen == {"contiguous", "transpose", "expand"}, seen
    c = make_case("gather", "func", {}, 1, "float32", "i64", "rand", {}, 0)
    assert grad.upstream_layout(c, []) == "contiguous"  # rank 0 carries no layout
