#!/usr/bin/env bash
# Runs scripts/gpu_all.sh on the device machine detached from the device tool's call (setsid),
# so one run can span several calls while the GPU never idles between them.
#
#   scripts/gpu_detached.sh start [phase ...]   start the runner (refuses if one is running)
#   scripts/gpu_detached.sh collect [SECONDS]   wait up to SECONDS (default 540) for it to end;
#                                               print the summary so far and the running
#                                               phase's tail; copy logs to $OUT
# collect exits 0 when the runner has finished (its exit code is in the summary's result
# line), 3 while it is still running.
#
# The runner works in a private copy of the tree (SW_RUN_DIR, default /tmp/swrun), because
# the device tool re-sends the tree on every call and a build reading it mid-copy fails on
# files that are briefly missing (seen on 2026-12-01: "stridewise/gather.h: No such file").
# start refreshes the copy with mtimes kept, so the copy's build-gpu stays incremental.
# Logs stay in the copy's build-gpu/logs between calls.
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
ROOT=${SW_RUN_DIR:-/tmp/swrun}
STATE=$ROOT/build-gpu/runner
mkdir -p "$ROOT"

running() { [[ -f $STATE/pid ]] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null; }

case ${1:-} in
  start)
    shift
    if running; then echo "runner already running (pid $(cat "$STATE/pid"))"; exit 2; fi
    # Files deleted from the tree stay in the copy; the build lists its sources, so a stale
    # file there is never compiled.
    tar -C "$SRC" --exclude=./build-gpu --exclude=./build --exclude=./out -cf - . |
      tar -C "$ROOT" -xf - || { echo "copy of the tree to $ROOT failed"; exit 2; }
    mkdir -p "$STATE" "$ROOT/build-gpu/logs"
    rm -f "$STATE/rc"
    # The runner packs into its own folder; collect copies that into each call's $OUT.
    OUT=$STATE/out setsid bash -c '"$1"/scripts/gpu_all.sh "${@:3}"; echo $? >"$2"' _ \
      "$ROOT" "$STATE/rc" "$@" </dev/null >"$STATE/runner.log" 2>&1 &
    echo $! >"$STATE/pid"
    sleep 2
    echo "runner started (pid $(cat "$STATE/pid")): scripts/gpu_all.sh $*"
    head -n 8 "$STATE/runner.log"
    ;;
  collect)
    limit=${2:-540}
    t0=$(date +%s)
    while running && (($(date +%s) - t0 < limit)); do sleep 5; done
    out=${OUT:-$SRC/out}
    mkdir -p "$out"
    cp -f "$STATE"/out/* "$out"/ 2>/dev/null
    echo "---- summary ($(date -u +%T))"
    cat "$ROOT/build-gpu/logs/summary.txt" 2>/dev/null
    if running; then
      # The runner packs its logs only when a phase ends: a call that ends mid-phase (or the
      # session's last one) brings the live logs too, the running phase's outputs included.
      tar -czf "$out/logs_live.tar.gz" --exclude='logs/repro*' -C "$ROOT/build-gpu" logs 2>/dev/null
      cur=$(ls -t "$ROOT"/build-gpu/logs/*.log 2>/dev/null | head -n 1)
      echo "---- still running; tail of $cur"
      tail -n 30 "$cur"
      exit 3
    fi
    echo "---- runner finished, exit code $(cat "$STATE/rc" 2>/dev/null || echo '?')"
    tail -n 40 "$STATE/runner.log"
    ;;
  *)
    echo "usage: $0 start [phase ...] | collect [SECONDS]" >&2
    exit 2
    ;;
esac
