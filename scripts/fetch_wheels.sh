#!/usr/bin/env bash
# Downloads the wheels of scripts/device_wheels.txt into .whl/ for the device machine (Python
# 3.12, manylinux x86_64; the image installs nothing from the network).
#   scripts/fetch_wheels.sh            the [core] group
#   scripts/fetch_wheels.sh flaggems   [core] and [flaggems]
# Then carry `.whl` in the device tool's call; scripts/gpu_all.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .gitignore || echo "warning: .whl/ is not in .gitignore" >&2
want=(core "$@")
group="" reqs=()
while IFS= read -r line; do
  if [[ $line =~ ^#\ \[([a-z]+)\] ]]; then group=${BASH_REMATCH[1]}; continue; fi
  line=${line%%#*}
  line=${line//[[:space:]]/}
  [[ -z $line ]] && continue
  for g in "${want[@]}"; do [[ $g == "$group" ]] && reqs+=("$line"); done
done < scripts/device_wheels.txt
mkdir -p .whl
for r in "${reqs[@]}"; do
  # --no-deps: every dependency is listed on its own line; manylinux tags as the device README
  # gives them (pip matches each exactly)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 --platform any -d .whl "$r"
done
ls -l .whl
