#!/usr/bin/env bash
# The long differential fuzz run of issue 31: one process per executing target (they finish
# independently: cpu is ~20x cheaper per graph than vulkan), each stopping at COUNT graphs or
# after MINUTES, at nice 19. Reports: benchmarks/results/fuzz_long_<target>_<cpu model>.md and
# .json (rewritten after every pack); shrunk findings under fuzz-out/cases/<target>/.
#   COUNT=10000 MINUTES=45 TARGETS="cpu webgpu" scripts/fuzz_long.sh
set -u
COUNT=${COUNT:-10000}
MINUTES=${MINUTES:-45}
SEED=${SEED:-20261207}
PY=${PYTHON:-python}
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | xargs | tr 'A-Z ' 'a-z_' | tr -cd 'a-z0-9_')
targets=${TARGETS:-$($PY -c 'from rlx_core.testing.fuzz import executing_targets as e; print(*e())')}
mkdir -p fuzz-out benchmarks/results
for t in $targets; do
  pack=40
  [ "$t" = cpu ] && pack=100  # one C build per pack: larger packs are cheaper per graph there
  nice -n 19 "$PY" -m rlx_core.testing.fuzz --targets "$t" --count "$COUNT" --minutes "$MINUTES" \
    --seed "$SEED" --pack "$pack" --report "benchmarks/results/fuzz_long_${t}_${cpu}.md" \
    --max-findings 4 --cases-dir "fuzz-out/cases/$t" > "fuzz-out/$t.log" 2>&1 &
done
wait
