#!/usr/bin/env bash
# stridewise entry point (see README.md).
#   ./run.sh [demo args]   set up, install the package, run `stridewise demo` (from another dir)
#   ./run.sh test          set up, install the package (with the C++ tests), then ctest, pytest
#                          against the installed package, and the C++ consumer (examples/) built
#                          with find_package(stridewise) against it
#   ./run.sh build         set up and install the package
# Setup: Debian packages (.ci/apt-packages.txt, as root), a virtual environment (.venv; with
# --system-site-packages only when the base Python already has torch, so that torch is reused,
# not installed twice: the GPU image's CUDA torch cannot be installed from anywhere else), the
# pinned requirements.txt into it, then `pip install --no-build-isolation .` (scikit-build-core,
# CMake, compiled against that torch) with a persistent build directory.
# Environment: BUILD_DIR (default build), PYTHON (default python3: the base interpreter),
# SW_VENV (default .venv; "none" installs into $PYTHON's environment), CI=true (-Werror, and a
# failed install is fatal), SW_CMAKE_ARGS (extra cmake arguments, space separated), SW_CUDA
# (ON/OFF/AUTO: the CUDA kernels; default: skipped for demo/build where torch sees no GPU).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

BUILD_DIR=${BUILD_DIR:-build}
PYTHON=${PYTHON:-python3}
SW_VENV=${SW_VENV:-.venv}
CI=${CI:-false}
JOBS=$(nproc 2>/dev/null || echo 2)

note() { echo "run.sh: $*" >&2; }
soft_fail() {  # a failed install stops CI; elsewhere (e.g. an offline GPU host) it warns
  if [[ $CI == true ]]; then note "$*"; exit 1; fi
  note "warning: $* (continuing)"
}

install_apt() {
  [[ -f .ci/apt-packages.txt ]] && command -v dpkg-query >/dev/null || return 0
  local missing=() pkg
  while read -r pkg; do
    pkg=${pkg%%#*}
    pkg=${pkg//[[:space:]]/}
    [[ -z $pkg ]] && continue
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done < .ci/apt-packages.txt
  ((${#missing[@]})) || return 0
  if [[ $(id -u) -ne 0 ]]; then
    note "missing Debian packages (install them as root): ${missing[*]}"
    return 0
  fi
  note "installing Debian packages: ${missing[*]}"
  { apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } ||
    soft_fail "apt-get install ${missing[*]} failed"
}

# Installs the requirements.txt lines whose distribution is not installed at all. A torch
# that is already importable is kept whatever its version (the GPU host runs its own CUDA
# build); so is any other installed package.
install_python() {
  local missing
  missing=$("$PY" - requirements.txt <<'PY'
import re, sys
from importlib import metadata
for line in open(sys.argv[1]):
    req = line.split("#")[0].strip()
    if not req:
        continue
    name = re.split(r"[<>=!~\[;\s]", req, maxsplit=1)[0]
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        print(req)
PY
)
  [[ -z $missing ]] && return 0
  note "installing Python packages: $(echo $missing)"
  # shellcheck disable=SC2086
  "$PY" -m pip install $missing || soft_fail "pip install failed"
}

# The environment the package is installed into: $PY after this.
setup_venv() {
  if [[ $SW_VENV == none ]]; then
    PY=$(command -v "$PYTHON")
    return 0
  fi
  if [[ ! -x $SW_VENV/bin/python ]]; then
    local flags=()
    if "$PYTHON" -c "import torch" >/dev/null 2>&1; then
      flags+=(--system-site-packages)
      note "creating $SW_VENV with --system-site-packages (reuses $PYTHON's torch)"
    else
      note "creating $SW_VENV"
    fi
    "$PYTHON" -m venv "${flags[@]}" "$SW_VENV"
    link_base_site "$SW_VENV"
  fi
  PY=$(cd "$SW_VENV" && pwd)/bin/python
}

# When $PYTHON is itself a virtual environment (the GPU image's is), --system-site-packages
# exposes the interpreter's base installation, not that environment: a .pth file adds its
# site-packages after the new environment's own, so its torch is reused, never shadowing ours.
link_base_site() {
  local venv=$1
  "$venv/bin/python" -c "import torch" >/dev/null 2>&1 && return 0
  "$PYTHON" -c "import torch" >/dev/null 2>&1 || return 0
  local site
  site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
  "$PYTHON" -c "import site; print('\n'.join(site.getsitepackages()))" >"$site/_sw_base_site.pth"
  note "$PYTHON is a virtual environment: its site-packages added to $venv ($site/_sw_base_site.pth)"
}

# The CUDA kernels for this install: the main job (demo, build) on a machine whose torch sees
# no GPU skips them (nvcc on two cores spends about 4 minutes on code the demo cannot run);
# ./run.sh test (CI) always compiles what nvcc can, as does SW_CUDA=ON; SW_CUDA=OFF skips.
cuda_flag() {
  local mode=$1
  if [[ -n ${SW_CUDA:-} ]]; then echo "-DSW_CUDA=$SW_CUDA"; return; fi
  # explicit either way: the kept build directory's cache would otherwise keep the last choice
  if [[ $mode != test ]] &&
    ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    note "no GPU visible to torch: the CUDA kernels are not compiled for the demo (./run.sh test and CI compile them; SW_CUDA=ON forces)"
    echo "-DSW_CUDA=OFF"
  else
    echo "-DSW_CUDA=AUTO"
  fi
}

# Builds and installs the package into $PY's environment; the build directory is kept, so a
# second install recompiles only what changed. Tests are compiled for ./run.sh test.
install_package() {
  local tests=$1 mode=$2 t0=$SECONDS
  SW_BUILD_TESTS=$tests SW_WERROR=$([[ $CI == true ]] && echo ON || echo OFF) \
    CMAKE_ARGS="${SW_CMAKE_ARGS:-} $(cuda_flag "$mode")" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
    "$PY" -m pip install --no-build-isolation --no-deps --force-reinstall \
    -C build-dir="$BUILD_DIR" -C build.verbose=false .
  note "installed stridewise into $("$PY" -c 'import sys; print(sys.prefix)') in $((SECONDS - t0)) s"
}

# The C++ consumer: examples/ as its own CMake project, find_package(stridewise) against the
# installed package, built and run.
consumer() {
  local prefix gen=()
  prefix=$("$PY" -c "import stridewise; print(stridewise.cmake_prefix_path)")
  [[ ! -f $BUILD_DIR/examples/CMakeCache.txt ]] && command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S examples -B "$BUILD_DIR/examples" "${gen[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
    -DPython3_EXECUTABLE="$PY"
  cmake --build "$BUILD_DIR/examples" -j "$JOBS"
  "$BUILD_DIR/examples/cpp_gather"
}

mode=${1:-demo}
case $mode in
  build | test) shift ;;
  demo) [[ $# -gt 0 ]] && shift ;;
  -*) mode=demo ;;  # ./run.sh --device cpu
  *) note "unknown command '$mode' (use: ./run.sh [demo args] | ./run.sh test | ./run.sh build)"; exit 2 ;;
esac

install_apt
setup_venv
install_python
install_package "$([[ $mode == test ]] && echo ON || echo OFF)" "$mode"
SW_BIN=$(dirname "$PY")

case $mode in
  build) ;;
  demo)  # from another directory: the installed package, not the source tree
    (cd "${TMPDIR:-/tmp}" && "$SW_BIN/stridewise" demo "$@") ;;
  test)  # every suite runs; any failing fails the command
    status=0
    ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" || status=1
    # pytest-xdist (requirements.txt) spreads the files over the cores: CI has 2 and a 30-minute
    # budget. SW_PYTEST_JOBS=0 runs them in one process.
    xdist=()
    if [[ ${SW_PYTEST_JOBS:-$JOBS} != 0 ]] && "$PY" -c "import xdist" 2>/dev/null; then
      xdist=(-n "${SW_PYTEST_JOBS:-$JOBS}")
    fi
    STRIDEWISE_TEST_INSTALLED=1 PATH="$SW_BIN:$PATH" "$PY" -m pytest -q "${xdist[@]}" tests "$@" || status=1
    consumer || { note "C++ consumer (examples/) FAILED"; status=1; }
    ((status == 0)) || note "tests FAILED (see above)"
    exit "$status"
    ;;
esac
