#!/usr/bin/env bash
# The one device-machine script: build with the machine's CUDA torch, run the C++ and Python
# tests on CUDA, run the CUDA tests under compute-sanitizer memcheck (caching allocator off),
# run the benchmarks and the audit. Each phase's full log goes under $OUT (as one tarball plus
# a summary, because the device tool returns at most 8 files).
#
#   scripts/gpu_all.sh [phase ...]     phases: build ctest pytest sanitize bench audit demo diag triage
#   (no phase = all)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
LOG=$ROOT/build-gpu/logs
mkdir -p "$OUT" "$LOG"
export PYTHONPATH=$ROOT/python PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PHASES=${*:-build ctest pytest sanitize bench audit demo}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"

note() { echo "$*" | tee -a "$SUMMARY"; }
run_phase() {  # run_phase NAME CMD...: log to $LOG/NAME.log, record rc and duration
  local name=$1; shift
  local t0=$(date +%s)
  echo "=== $name: $*" >"$LOG/$name.log"
  ( "$@" ) >>"$LOG/$name.log" 2>&1
  local rc=$?
  note "$(printf '%-10s rc=%-3s %4ss' "$name" "$rc" $(( $(date +%s) - t0 )))"
  tail -n 25 "$LOG/$name.log"
  # Refresh the tarball after every phase: a command cut off by its time limit still returns
  # the logs of the phases that finished.
  cp -f "$OUT"/bench_gather.* "$LOG"/ 2>/dev/null
  tar -czf "$OUT/logs.tar.gz" -C "$ROOT/build-gpu" logs
  return $rc
}

note "date: $(date -u +%FT%TZ)"
note "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
note "torch: $(python3 -c 'import torch;print(torch.__version__, "cuda", torch.version.cuda)')"
note "nvcc: $(nvcc --version | tail -n 2 | head -n 1)"

for phase in $PHASES; do
  case $phase in
    build)
      # No GoogleTest package there: build the copy carried in .gtest (see README, "GPU").
      # -Werror stays a CI (gcc 12) gate: the device image's gcc 13 raises false positives
      # (-Warray-bounds) inside torch's own headers.
      gtest_arg=()
      [ -d .gtest/googletest ] && gtest_arg=(-DSW_GTEST_SRC=$ROOT/.gtest -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON)
      # The image's default g++ (/opt/gcc) links its own static libstdc++ into shared objects;
      # that private copy's iostreams crash inside a process whose libstdc++ is the system one
      # (seen 2026-11-29: SIGSEGV in std::codecvt from libstridewise_torch.so). Use the system
      # compiler when there is one, and check that libstdc++ is linked dynamically.
      cxx_arg=()
      [ -x /usr/bin/g++ ] && cxx_arg=(-DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++)
      run_phase build bash -c "cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DSW_CUDA=ON -DSW_TORCH=ON ${gtest_arg[*]} ${cxx_arg[*]} && cmake --build build-gpu -j 16 && \
        ldd python/stridewise/_lib/libstridewise_torch.so | grep -E 'stdc|gomp|cudart' && \
        ! nm -C --defined-only python/stridewise/_lib/libstridewise_torch.so | grep -q 'std::codecvt<char16_t'" ;;
    ctest)
      run_phase ctest ctest --test-dir build-gpu --output-on-failure ;;
    pytest)
      run_phase pytest python3 -m pytest -q -rs -p no:cacheprovider ${PYTEST_ARGS:-tests} ;;
    sanitize)
      # The caching allocator hides out-of-bounds accesses inside its pools: turn it off.
      # The death/guard tests fault on purpose (in a child process) and are run without it.
      run_phase sanitize bash -c "
        export PYTORCH_NO_CUDA_MEMORY_CACHING=1
        compute-sanitizer --tool memcheck --error-exitcode 99 build-gpu/core/tests/cuda/stridewise_cuda_tests \
          --gtest_filter=-*DeathTest*:*Guard*:*SixtyFourBit* || exit \$?
        compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest -q -p no:cacheprovider \
          tests/test_gather_layouts.py -k 'cuda and (seed or random_strides or edges or optional)' || exit \$?
        compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest -q -p no:cacheprovider \
          tests/test_gather_cuda_errors.py || exit \$?
        compute-sanitizer --tool memcheck --error-exitcode 99 python3 -m pytest -q -p no:cacheprovider \
          tests/test_gather_out.py tests/test_gather_errors.py tests/test_gather_backward.py \
          tests/test_gather_routing.py tests/test_e2e_models.py -k cuda"
      ;;
    bench)
      run_phase bench python3 bench/bench_gather.py ${BENCH_ARGS:-} ;;
    audit)
      # Sync check mode: the audit asks every call to raise on a bad index; in the default
      # deferred mode stridewise raises at the next call instead (reported as bad-error).
      run_phase audit bash -c "STRIDEWISE_CUDA_CHECK=sync python3 -m stridewise audit --device cuda --backend stridewise --ops gather \
          --guard --json $LOG/audit_cuda_sw.json; \
        python3 -m stridewise audit --device cuda --matrix ${AUDIT_MATRIX:-quick} --json $LOG/audit_cuda_aten.json" ;;
    demo)
      run_phase demo python3 -m stridewise demo --device cuda ;;
    triage)
      run_phase triage python3 scripts/triage_aten_cuda.py ;;
    diag)
      run_phase diag bash -c "python3 scripts/diag_bad_index.py || \
        cuda-gdb -batch -ex run -ex bt --args python3 scripts/diag_bad_index.py" ;;
    *) note "unknown phase $phase" ;;
  esac
done

cp -f "$LOG"/bench*.md "$OUT"/ 2>/dev/null || true
tar -czf "$OUT/logs.tar.gz" -C "$ROOT/build-gpu" logs
cat "$SUMMARY"
