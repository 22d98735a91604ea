#!/usr/bin/env bash
# scripts/base_tree.sh REF: the source tree of commit REF in build-base/src (an ignored path, so
# the device tool carries it with `carry: ["build-base/src"]`), for gpu_all.sh's benchab phase:
# the old and the new build's benchmarks side by side in one device run.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?usage: scripts/base_tree.sh REF}
dst=build-base/src
rm -rf "$dst" && mkdir -p "$dst"
git archive "$ref" | tar -x -C "$dst" --exclude='*.png' --exclude='bench/results'
git rev-parse --short "$ref" >"$dst/.base_ref"
echo "base tree $(cat "$dst/.base_ref") in $dst ($(du -sh "$dst" | cut -f1))"
