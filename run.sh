#!/usr/bin/env bash
# stridewise entry point (see README.md).
#   ./run.sh [demo args]   install what is missing, build, run `python3 -m stridewise demo`
#   ./run.sh test          install what is missing, build, run the C++ and Python tests
#   ./run.sh build         install what is missing, build
# Environment: BUILD_DIR (default build), PYTHON (default python3), CI=true (-Werror, and a
# failed install is fatal), SW_CMAKE_ARGS (extra cmake arguments, space separated).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

BUILD_DIR=${BUILD_DIR:-build}
PYTHON=${PYTHON:-python3}
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
  missing=$("$PYTHON" - requirements.txt <<'PY'
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
  "$PYTHON" -m pip install $missing || soft_fail "pip install failed"
}

build() {
  local args=(-S . -B "$BUILD_DIR" -DPython3_EXECUTABLE="$(command -v "$PYTHON")")
  if [[ ! -f $BUILD_DIR/CMakeCache.txt ]] && command -v ninja >/dev/null; then
    args+=(-G Ninja)
  fi
  [[ $CI == true ]] && args+=(-DSW_WERROR=ON)
  # shellcheck disable=SC2206
  [[ -n ${SW_CMAKE_ARGS:-} ]] && args+=(${SW_CMAKE_ARGS})
  cmake "${args[@]}"
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"

mode=${1:-demo}
case $mode in
  build | test) shift ;;
  demo) [[ $# -gt 0 ]] && shift ;;
  -*) mode=demo ;;  # ./run.sh --device cpu
  *) note "unknown command '$mode' (use: ./run.sh [demo args] | ./run.sh test | ./run.sh build)"; exit 2 ;;
esac

install_apt
install_python
build

case $mode in
  build) ;;
  demo) "$PYTHON" -m stridewise demo "$@" ;;
  test)  # both suites run; either failing fails the command
    status=0
    ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" || status=1
    "$PYTHON" -m pytest -q tests "$@" || status=1
    ((status == 0)) || note "tests FAILED (see above)"
    exit "$status"
    ;;
esac
