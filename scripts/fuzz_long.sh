#!/usr/bin/env bash
# The long differential fuzz run of issue 31, as shards that accumulate across sessions: one
# process per target, each covering case indices START .. START+COUNT-1 of SEED and resuming
# its own state (the report's .json twin) when it was stopped before, for MINUTES this session.
# Shard reports: benchmarks/results/fuzz_shards/fuzz_<target>_<cpu>_s<SEED>_<START>.md (+ .json,
# rewritten after every pack); shrunk findings under fuzz-out/cases/<target>/. Then merge:
#   python -m rlx_core.testing.shards --report 'benchmarks/results/fuzz_long_{target}_<cpu>.md' \
#     benchmarks/results/fuzz_shards/fuzz_<target>_<cpu>_*.json
#   TARGETS="opengl directx" MINUTES=90 FAST=1 scripts/fuzz_long.sh
# FAST=1 adds --driver-fast-compile (Mesa's gallivm and PoCL without LLVM's optimisation passes).
# SERIAL=1 runs the targets one after another (one process at a time: on a shared machine the
# long run then takes one core's idle time, not one per target); a target may carry its own
# minutes (TARGETS="opengl:30 vulkan:8"), and UNTIL=HH:MM (UTC) stops starting targets then
# and cuts the last one's minutes to end by it (a time 12 h or more past is tomorrow's).
set -u
COUNT=${COUNT:-10000}
START=${START:-0}
MINUTES=${MINUTES:-45}
SEED=${SEED:-20261220}
NICE=${NICE:-10}
PY=${PYTHON:-python}
cpu=$("$PY" -c 'from benchmarks.common import cpu_slug; from rlx_core.targets.cpu.identity import cpu_model; print(cpu_slug(cpu_model()))')
targets=${TARGETS:-$("$PY" -c 'from rlx_core.testing.fuzz import executing_targets as e; print(*e())')}
fast=()
[ "${FAST:-0}" = 1 ] && fast=(--driver-fast-compile)
mkdir -p fuzz-out benchmarks/results/fuzz_shards
run_one() {  # target minutes
  local t=$1 pack=40
  [ "$t" = cpu ] && pack=100  # one C build per pack: larger packs are cheaper per graph there
  # clang's Hexagon back end costs more than linearly in the size of one program (80 cases:
  # 0.39 CPU s per graph, 40: 0.21, 10: 0.17-0.25; docs/reliability.md)
  [ "$t" = hexagon ] && pack=10
  nice -n "$NICE" "$PY" -m rlx_core.testing.fuzz --targets "$t" --count "$COUNT" --start "$START" \
    --minutes "$2" --seed "$SEED" --pack "$pack" --resume "${fast[@]}" \
    --report "benchmarks/results/fuzz_shards/fuzz_${t}_${cpu}_s${SEED}_${START}.md" \
    --max-findings 4 --cases-dir "fuzz-out/cases/$t" >> "fuzz-out/$t.log" 2>&1
}
for spec in $targets; do
  t=${spec%%:*}
  m=$MINUTES
  [ "$spec" != "$t" ] && m=${spec#*:}
  if [ "${SERIAL:-0}" = 1 ]; then
    if [ -n "${UNTIL:-}" ]; then  # minutes left until UNTIL (UTC, today)
      left=$(( ($(date -u -d "$UNTIL" +%s) - $(date -u +%s)) / 60 ))
      [ "$left" -lt -720 ] && left=$(( left + 1440 ))  # UNTIL is after midnight: tomorrow's
      [ "$left" -lt 2 ] && break
      [ "$left" -lt "$m" ] && m=$left
    fi
    echo "[fuzz_long] $(date -u +%H:%M) $t for $m min" >> fuzz-out/fuzz_long.log
    run_one "$t" "$m"
  else
    run_one "$t" "$m" &
  fi
done
wait
