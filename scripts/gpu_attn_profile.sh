#!/usr/bin/env bash
# Attention forward on the H200, generated sm_90a kernel against the hand one (issue 20), from the repo root:
#   OUT=/tmp/attn bash scripts/gpu_attn_profile.sh
# 1. install, compile both kernels once outside ncu (the cubin and the nvcc-built library are cached on disk);
# 2. ncu on one launch each of PROFILES (default generated D128, hand D128, generated D64, hand D64) at B4 H32 N8192
#    (non-causal), e.g. PROFILES="gen:64 gen-turns:64 hand:64";
# 3. timing: generated, hand (also without its consumer turns, and at BKV 128), cuDNN SDPA, FlexAttention at the same shapes (and causal, if time is left);
# 4. $OUT/summary.txt: the ncu sections side by side, raw pipe / stall metrics, warp samples by SASS opcode and
#    the hottest instructions; then the timing table.
# Files under $OUT (7): ncu_{gen,hand}{128,64}.ncu-rep, summary.txt, timing.json, log.txt. About 4-5 minutes;
# BUDGET=N (seconds, default 340) cuts the optional steps short.
set -uo pipefail
OUT=${OUT:-/tmp/tiles-attn}; mkdir -p "$OUT"
BUDGET=${BUDGET:-340}
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
LOG=$OUT/log.txt; : >"$LOG"
PY="python3 scripts/gpu_attn_profile.py"
step() {  # step NAME SECONDS COMMAND...: run with a time limit (cut to what BUDGET leaves), log, print the tail
    local name=$1 limit=$2; shift 2
    local left=$((BUDGET - SECONDS))
    if [ "$left" -lt 15 ]; then echo "== $name: skipped, ${left} s of BUDGET left" | tee -a "$LOG"; return 1; fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name ($(date -u +%H:%M:%S) UTC, limit ${limit} s): $*" >>"$LOG"
    timeout "$limit" "$@" >>"$LOG" 2>&1; local rc=$?
    echo "== $name: rc=$rc at ${SECONDS} s" | tee -a "$LOG"
    return $rc
}

python3 -m pip install -q --no-deps --no-build-isolation -e . >>"$LOG" 2>&1 || { tail -20 "$LOG"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee -a "$LOG"
ncu --version | tail -1 | tee -a "$LOG"

# PROFILES: kernel:D pairs (kernel: gen, gen-turns, gen-persistent, hand, hand-noturns), one ncu report each
PROFILES=${PROFILES:-gen:128 hand:128 gen:64 hand:64}
step "build hand" 150 $PY build &   # nvcc, every variant the timing takes, in parallel with the NVRTC compiles
for kd in $PROFILES; do   # each generated variant compiled (NVRTC, cached on disk) before ncu runs it
    case ${kd%%:*} in hand*) continue ;; esac; step "warm ${kd}" 90 $PY launch "${kd%%:*}" "1x2x256x${kd##*:}" --warm &
done
wait
step "warm hand" 60 $PY launch hand 1x2x256x64 --warm

SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats
  --section SourceCounters"
REPS=""
for kd in $PROFILES; do
    k=${kd%%:*}; d=${kd##*:}
    name=$(case $k in hand*) echo attn_fwd_kernel ;; *) echo attention_fwd ;; esac)
    # the generated kernel is extern "C" tiles_kernel_attention_fwd; the hand one attn_fwd_kernel<D, BKV, CAUSAL>
    step "ncu $k D$d" 75 ncu --clock-control none --kernel-name "regex:$name" --launch-count 1 \
        --import-source no $SECTIONS -f -o "$OUT/ncu_$k$d" $PY launch $k 4x32x8192x$d
    REPS="$REPS $OUT/ncu_$k$d.ncu-rep"
done
{
    echo "# attention forward, generated vs hand, $(date -u) on $(nvidia-smi --query-gpu=name --format=csv,noheader)"
    timeout 90 $PY compare $REPS --sass-csv "$OUT" 2>&1
} >"$OUT/summary.txt"
# a timing cut short by its limit keeps the rows it printed (one per kernel, as it goes)
timings() {  # timings NAME: the rows of step NAME from the log
    echo; echo "# $1 (do_bench medians, one process; x = the other kernel's time / this one's)"
    sed -n "/== $1 (/,/== $1: rc/p" "$LOG" | grep -v "^== "
}
TIMES=${TIMES:-4x32x8192x128 4x32x8192x64}
step "timing" 150 $PY time $TIMES --json "$OUT/timing.json"
timings timing >>"$OUT/summary.txt"
if step "timing causal" 100 $PY time $TIMES --causal --json "$OUT/timing_causal.json"; then
    timings "timing causal" >>"$OUT/summary.txt"
fi
head -c 20000 "$OUT/summary.txt"
echo "== done at ${SECONDS} s; files: $(ls "$OUT" | tr '\n' ' ')"
