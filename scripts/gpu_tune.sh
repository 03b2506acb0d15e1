#!/usr/bin/env bash
# Issue 18 on an H200, from the repo root, in under 8 minutes (BUDGET=470 s by default, install included):
#   0. the GEMM property tests on the GPU (split K with atomic_add or into a bf16 C, batched, accumulate)
#   0b. the batched GEMM of issue 18 (64 x 1024x1024x512, against torch.bmm)
#   1. tiles tune gemm over the issue's grid, M in {1,16,64,128,512,2048,4096,16384} x (N,K) in
#      {(4096,4096),(14336,4096),(4096,14336),(28672,8192)}: each shape's survivors of the static pruning, the
#      static model's best 5 and the configured default, timed as `tiles compare` times (--top 5)
#   2. the split-K GEMM (C f32 += A @ B, ",acc") at the decode sizes M in {1,16}
#   4. scripts/tune_summary.py: cuBLAS timed at every shape, tuned and default against it, and how often the
#      static model's first choice is within 10% of the timed winner -> $OUT/summary.md, $OUT/summary.json
#   5. tiles compare bmm and gemm (default row, tuned row, cuBLAS) at four shapes, with what time is left
# Outputs under $OUT: tune_gemm.json, tune_gemm_acc.json, tune_bmm.json, compare_gemm.json, compare_bmm.json, summary.md/json, logs/*.log.
# A shorter run: SHAPES="..." and ACC_SHAPES="..." (empty: none) replace the grids, TOP the timed candidates per
# shape, TUNE_S the seconds of step 1, CHECK the pytest -k filter of step 0, e.g. (under 3 minutes):
#   BUDGET=175 TUNE_S=80 TOP=3 CHECK="split_k_into or batched" ACC_SHAPES= SHAPES="1x4096x14336 ..." bash scripts/gpu_tune.sh
set -uo pipefail
OUT=${OUT:-/tmp/tiles-tune}; LOGS=$OUT/logs; mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1
export TILES_CACHE=${TILES_CACHE:-/tmp/tiles-tune-cache}   # compile and tune caches: fresh, off $OUT (cubins)
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$LOGS/install.log" 2>&1 || { cat "$LOGS/install.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader

BUDGET=${BUDGET:-470}
step() {  # step NAME SECONDS COMMAND...: at most SECONDS and what is left of BUDGET; keeps the log
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS left=$((BUDGET - SECONDS))
    if [ "$left" -lt 20 ]; then echo "== $name: skipped, ${left} s of BUDGET left"; return; fi
    [ "$limit" -gt "$left" ] && limit=$left
    timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1; local rc=$?
    echo "== $name: rc=$rc in $((SECONDS - t0)) s"; tail -n "${TAIL:-4}" "$LOGS/$name.log"
}

GRID=()   # small M first: a step cut by its time limit loses the largest (slowest to make inputs for) shapes
for m in 1 16 64 128 512 2048 4096 16384; do
    for nk in 4096x4096 14336x4096 4096x14336 28672x8192; do GRID+=("${m}x${nk}"); done
done
ACC=()
for nk in 4096x4096 14336x4096 4096x14336 28672x8192; do for m in 1 16; do ACC+=("${m}x${nk},acc"); done; done
[ -n "${SHAPES+x}" ] && read -ra GRID <<<"$SHAPES"
[ -n "${ACC_SHAPES+x}" ] && read -ra ACC <<<"$ACC_SHAPES"
TOP=${TOP:-5}

step check 50 python3 -m pytest -q -p no:cacheprovider -n 4 --backends cuda tests/test_kernels.py -k "${CHECK:-gemm}"
step tune-bmm 30 python3 -m tiles tune bmm --backend cuda --top "$TOP" --shapes 64x1024x1024x512 --json "$OUT/tune_bmm.json"
[ ${#GRID[@]} -gt 0 ] && step tune "${TUNE_S:-230}" python3 -m tiles tune gemm --backend cuda --top "$TOP" --shapes "${GRID[@]}" --json "$OUT/tune_gemm.json"
[ ${#ACC[@]} -gt 0 ] && step tune-acc 50 python3 -m tiles tune gemm --backend cuda --top "$TOP" --shapes "${ACC[@]}" --json "$OUT/tune_gemm_acc.json"
step summary 40 python3 scripts/tune_summary.py "$OUT"
step compare-bmm 25 python3 -m tiles compare bmm --backends cuda --no-compile --json "$OUT/compare_bmm.json" \
    --shapes 64x1024x1024x512
step compare 50 python3 -m tiles compare gemm --backends cuda --no-compile --json "$OUT/compare_gemm.json" \
    --shapes 16x4096x4096 2048x4096x4096 4096x28672x8192
cp "$TILES_CACHE/tune/"*.json "$OUT/" 2>/dev/null   # the tune cache itself (gemm.json)
cat "$OUT/summary.md" 2>/dev/null
