#!/usr/bin/env bash
# Phases of scripts/gpu_all.sh that are not in its default list (sourced by it; they run in its
# environment: ROOT, PY, LOG, SITE, CUDA_TESTS): third-party audits, the installed package, the
# swdev device, dump + compare, and benchab (this tree's benchmarks beside a base tree's).

phase_wheels() {  # FlagGems ([flaggems] of scripts/device_wheels.txt: scripts/fetch_wheels.sh
  # flaggems), installed into /tmp/site with every carried wheel before the first phase
  "$PY" -c 'import flag_gems, sqlalchemy; print("flag_gems", flag_gems.__version__, flag_gems.__file__)'
}

phase_auditfg() {  # a third-party backend, as a new user would: flag_gems over the whole family
  # (JIT-compiled Triton kernels), then every distinct finding's repro script alone, with
  # flag_gems and against native. The report is docs/audit_flaggems.md's source.
  local t0=$(date +%s) rc=0
  # standalone.py: the auditor without stridewise's native library (not built yet here)
  "$PY" python/stridewise/audit/standalone.py --device cuda \
    --backend "${FG_BACKEND:-flag_gems:enable}" --matrix "${AUDIT_MATRIX:-quick}" \
    --jobs "${FG_JOBS:-15}" --verify-repros ${FG_ARGS:-} \
    --json "$LOG/audit_fg.json" --repro-dir "$LOG/repro_fg" >"$LOG/audit_fg.txt" 2>&1 || rc=$?
  echo "auditfg: exit $rc in $(( $(date +%s) - t0 ))s"
  # the scripts of the findings' representatives (the ones --verify-repros ran)
  "$PY" - "$LOG/audit_fg.json" <<'PYEOF' | tar -czf "$LOG/fg_repros.tar.gz" -T - 2>/dev/null
import json, sys
rep = json.load(open(sys.argv[1]))
for f in rep.get("repro_check") or []:
    if f.get("script"):
        print(f["script"])
PYEOF
  tail -n 60 "$LOG/audit_fg.txt"
  ((rc <= 1))  # 1: findings (expected of a backend with bugs); 2+: the audit could not run
}

phase_auditfgall() {  # the same audit running every case, the native-run variants' too
  # (--run-native): its wall time is the issue-11 figure "without dropping cases"
  local t0=$(date +%s) rc=0
  "$PY" python/stridewise/audit/standalone.py --device cuda \
    --backend "${FG_BACKEND:-flag_gems:enable}" --matrix "${AUDIT_MATRIX:-quick}" \
    --jobs "${FG_JOBS:-15}" --run-native --no-repros ${FG_ARGS:-} \
    --json "$LOG/audit_fg_all.json" >"$LOG/audit_fg_all.txt" 2>&1 || rc=$?
  echo "auditfgall: exit $rc in $(( $(date +%s) - t0 ))s"
  grep -A16 "^Where the time went" "$LOG/audit_fg_all.txt"
  tail -n 3 "$LOG/audit_fg_all.txt"
  ((rc <= 1))
}

phase_auditdev() {  # swdev (tests/privateuse1) built against the image's torch, its tests and
  # the device audit's tests (CPU work: the device keeps its memory on the host), then the
  # whole family audited on it with --grad, bugs off (must pass) and on (the two bugs found)
  cmake -S . -B build-gpu -DSW_BUILD_TESTDEV=ON >/dev/null || return 1
  cmake --build build-gpu --target sw_testdev || return 1
  local rc=0 env
  "$PY" -m pytest -q -rfEs -p no:cacheprovider --timeout=600 -n 4 \
    tests/test_privateuse1_device.py tests/test_audit_device.py tests/test_audit_grad.py || rc=1
  env=$("$PY" - <<'PYEOF'
import importlib.util, shlex
s = importlib.util.spec_from_file_location("a", "tests/privateuse1/sw_testdev_autoload.py")
m = importlib.util.module_from_spec(s); s.loader.exec_module(m)
e = m.autoload_env("/tmp/swdev-dist")
print(" ".join(f"{k}={shlex.quote(e[k])}" for k in ("PYTHONPATH", "SW_TESTDEV_LIB")))
PYEOF
)
  env $env SW_TESTDEV_BUGS=none "$PY" -m stridewise audit --device swdev --matrix quick --grad \
    --jobs 8 --no-repros --json "$LOG/audit_swdev_off.json" | tail -n 4 || rc=1
  env $env "$PY" -m stridewise audit --device swdev --matrix quick --grad --jobs 8 --no-repros \
    --json "$LOG/audit_swdev.json" >"$LOG/audit_swdev.txt"
  sed -n '/^Findings/,/^Failures/p' "$LOG/audit_swdev.txt"
  tail -n 1 "$LOG/audit_swdev.txt"
  return $rc
}

phase_dumpe2e() {  # issue 25: dump + sw-compare on CUDA: the dump/compare tests' CUDA cases (a
  # transformers BERT native vs routed, a perturbed weight, planted kernel bugs), then the BERT
  # throughput figures (bench/bench_dump_compare.py: dump MB/s, compare GB/s). sw-compare is
  # built on its own (tools/compare), so this phase follows buildlib as well as build.
  local rc=0 args=(-S tools/compare -B build-gpu/compare -G Ninja -DSW_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release)
  [ -x /usr/bin/g++ ] && args+=(-DCMAKE_CXX_COMPILER=/usr/bin/g++)
  cmake "${args[@]}" && cmake --build build-gpu/compare --target sw-compare || return 1
  export STRIDEWISE_COMPARE=$ROOT/build-gpu/compare/sw-compare
  "$PY" -m pytest -q -rfEs -p no:cacheprovider --timeout=600 --durations=10 -n 4 -k cuda \
    tests/test_compare_e2e_bert.py tests/test_dump_e2e.py tests/test_dump_reads.py tests/test_dump_capture.py || rc=1
  "$PY" bench/bench_dump_compare.py ${BENCH_DUMP_ARGS:-} --json "$LOG/bench_dump_compare.json" || rc=1
  "$PY" bench/bench_dump_compare.py --hidden 1024 --layers 8 --batch 8 --seq 256 --repeat 1 \
    --json "$LOG/bench_dump_compare_large.json" || rc=1
  return $rc
}

phase_pytestaudit() {  # the audit's own test files, CUDA cases only (the CPU ones run in CI)
  "$PY" -m pytest -q -rfEs -p no:cacheprovider --timeout=600 --durations=10 -n 4 -k cuda \
    tests/test_audit.py tests/test_audit_triage.py tests/test_audit_coverage.py \
    tests/test_audit_timing.py tests/test_audit_verify.py
}

phase_pytestgrad() {  # issue 39: the --grad tests whole on the GPU machine (their CPU cases
  # too: there torch has a device, whose autograd thread broke forked workers), the handle and
  # sequence tests (PYTEST_GRAD_ARGS: e.g. --deselect NODE for the stridewise tests where the
  # library was not built in this run)
  "$PY" -m pytest -q -rfEs -p no:cacheprovider --timeout=600 --durations=10 -n 4 \
    tests/test_audit_grad.py tests/test_audit_handles.py tests/test_audit_sequence.py \
    ${PYTEST_GRAD_ARGS:-}
}

phase_e2etrain() {  # issue 41: training steps native vs stridewise (bench/e2e_train.py), with the
  # per-op breakdown; E2E_TRAIN_ARGS (e.g. --cases moe_index --reps 20)
  "$PY" bench/e2e_train.py --breakdown ${E2E_TRAIN_ARGS:-} --json "$LOG/e2e_train.json" \
    --markdown "$LOG/e2e_train.md" --plot "$LOG/e2e_train.png"
}

phase_pytest() {  # the whole suite; the audit files in 4 processes (each audit has workers)
  local rc=0
  "$PY" -m pytest -q -rfEs -p no:cacheprovider --timeout=300 --durations=15 -n "${PYTEST_JOBS:-4}" \
    --ignore=tests/test_audit.py --ignore=tests/test_audit_triage.py ${PYTEST_ARGS:-tests} || rc=1
  [[ ${PYTEST_AUDIT:-1} == 0 ]] && return $rc  # the audit's own files skipped (device time)
  "$PY" -m pytest -q -rfEs -p no:cacheprovider --timeout=600 --durations=15 -n 4 \
    tests/test_audit.py tests/test_audit_triage.py || rc=1
  return $rc
}

phase_install() {  # as a user installs it: a wheel built by pip (scikit-build-core) against the
  # image's CUDA torch, installed into a venv that reuses that torch (--system-site-packages:
  # nothing can be installed here); then `stridewise info` from another directory, and the C++
  # consumer (examples/) built with find_package(stridewise) against the installed package
  local venv=$ROOT/build-gpu-venv whl=$ROOT/build-gpu-wheel/dist t0
  rm -rf "$venv" "$whl"
  # The image's python3 is itself a venv: a nested --system-site-packages venv would see the
  # base interpreter's packages, not its torch; a .pth adds them (as run.sh does). --without-pip:
  # pip comes from the image's site-packages through that .pth.
  "$PY" -m venv --without-pip --system-site-packages "$venv" || return 1
  "$PY" -c "import site; print('\n'.join(site.getsitepackages()))" \
    >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/_sw_base_site.pth"
  env -u PYTHONPATH "$venv/bin/python" -c 'import torch, sys; print("venv", sys.prefix, "torch", torch.__version__)' || return 1
  # What the image lacks, carried as wheels in .whl/ (README: jsonschema and its dependencies)
  env -u PYTHONPATH "$venv/bin/python" -m pip install --no-index --find-links "$ROOT/.whl" \
    jsonschema==4.26.0 || return 1
  local cm="-DCMAKE_CUDA_FLAGS=--split-compile=0"
  [ -x /usr/bin/g++ ] && cm+=" -DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++"
  t0=$(date +%s)
  env -u PYTHONPATH CMAKE_ARGS="$cm" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$venv/bin/python" -m pip \
    wheel --no-build-isolation --no-deps -C build-dir="$ROOT/build-gpu-wheel" -w "$whl" . || return 1
  echo "wheel built in $(($(date +%s) - t0)) s: $(ls -l "$whl"/*.whl)"
  t0=$(date +%s)
  env -u PYTHONPATH "$venv/bin/python" -m pip install --no-deps "$whl"/*.whl || return 1
  echo "wheel installed in $(($(date +%s) - t0)) s"
  (cd /tmp && env -u PYTHONPATH "$venv/bin/stridewise" info) || return 1
  local prefix
  prefix=$(cd /tmp && env -u PYTHONPATH "$venv/bin/python" -c 'import stridewise; print(stridewise.cmake_prefix_path)')
  cmake -S examples -B build-gpu-wheel/examples -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DPython3_EXECUTABLE="$venv/bin/python" -DCMAKE_CXX_COMPILER=/usr/bin/g++ || return 1
  cmake --build build-gpu-wheel/examples || return 1
  build-gpu-wheel/examples/cpp_gather
}

phase_pytestinstalled() {  # tests against the installed package (phase install), CUDA included
  cd /tmp && env -u PYTHONPATH -u STRIDEWISE_COMPARE STRIDEWISE_TEST_INSTALLED=1 PATH="$ROOT/build-gpu-venv/bin:$PATH" \
    "$ROOT/build-gpu-venv/bin/python" -m pytest -q -rfEs -p no:cacheprovider --timeout=600 \
    --durations=10 --rootdir "$ROOT" ${PYTEST_INSTALLED_ARGS:-$ROOT/tests/test_custom_op.py \
    $ROOT/tests/test_packaging.py}
}

phase_benchinstalled() {  # the gather benchmark on the installed package; writes its plot
  cd /tmp && env -u PYTHONPATH OUT="$LOG" "$ROOT/build-gpu-venv/bin/python" \
    "$ROOT/bench/bench_gather.py" ${BENCH_ARGS:-}
}

phase_benchab() {  # benchab: the gather, scatter, index and adv benchmarks of a base tree (BASE_SRC,
  # default build-base/src: scripts/base_tree.sh REF writes it, carried as an ignored path) and
  # of this tree, built alike, run one after the other per benchmark in this one run; then
  # bench/drift.py base -> this per benchmark (every case listed; moved = beyond the run's noise).
  local base=${BASE_SRC:-$ROOT/build-base/src} b rc=0
  [[ -f $base/CMakeLists.txt ]] || { echo "no base tree at $base (scripts/base_tree.sh REF)"; return 2; }
  (cd "$base" && PYTHONPATH=$base/python:$SITE phase_buildlib) || { echo "base build failed"; return 1; }
  [[ -f python/stridewise/_lib/libstridewise_torch.so ]] || phase_buildlib || return 1
  for b in gather scatter index adv; do
    local args=${BENCHAB_ARGS:-}
    PYTHONPATH=$base/python:$SITE OUT=$LOG/benchab_base "$PY" "bench/bench_$b.py" $args || rc=1
    OUT=$LOG/benchab_new "$PY" "bench/bench_$b.py" $args || rc=1
    echo "=== bench_$b: base ($(cat "$base/.base_ref" 2>/dev/null)) -> this tree"
    "$PY" bench/drift.py "$LOG/benchab_base/bench_$b.json" "$LOG/benchab_new/bench_$b.json" \
      --md "$LOG/drift_ab_$b.md" | tail -n 4 | sed "s|^verdict|verdict bench_$b|"
  done
  return $rc
}

phase_benchadvvar() {  # bench_adv with each k-index path forced (STRIDEWISE_INDEX_K_CUDA_PATH):
  # INDEX_K_PATHS (default sorted: every floating add that may meet duplicates sorts, the
  # atomics' alternative measured beside the rule's choice), BENCHADVVAR_ARGS
  local v rc=0
  for v in ${INDEX_K_PATHS:-sorted}; do
    echo "=== k-index path forced: $v"
    STRIDEWISE_INDEX_K_CUDA_PATH=$v OUT=$LOG/benchadvvar_$v "$PY" bench/bench_adv.py --quick \
      --flaggems off ${BENCHADVVAR_ARGS:---cases put_acc16,acc_s --dtypes float32} | tail -n 12 || rc=1
  done
  return $rc
}
