#!/usr/bin/env bash
# One lent-GPU call (session 2026-12-02 b), under 8 minutes, from the repo root; OUT=... (default /tmp/tiles-session):
#   1. the sm_90a warp-specialization SASS test under -n 14 (a KeyError seen there once), log kept;
#   2. attention (issue 20): the deferred and turns options of the generated schedule against cuDNN;
#   3. GEMM at a decode shape (issue 18): ncu on the tuned split-K launch pair (gemm + sum_parts) at 1x4096x4096
#      and on the unsplit 64x64 tile, to see where the time against cuBLAS's 15 us goes.
set -uo pipefail
OUT=${OUT:-/tmp/tiles-session}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "== ws test"; timeout 150 python3 -m pytest -q -p no:cacheprovider -n 14 --backends cuda,cuda:sm_80 \
    tests/test_cuda_warp_specialized.py >"$OUT/ws.log" 2>&1; echo "rc=$?"; tail -4 "$OUT/ws.log"
echo "== attention"; timeout 170 python3 -m tiles compare attention --backends cuda --no-compile \
    --shapes 4x32x8192x128 16x16x4096x64 8x16x2048x128,causal --set deferred=False,True turns=False,True \
    --json "$OUT/attention.json" 2>&1 | grep -v "^\s*$" | tail -24
SECT="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats"
for cfg in "BM=64 BN=64 BK=64 stages=5 workers=1 SPLIT=4" "BM=64 BN=64 BK=64 stages=5 workers=1 SPLIT=1"; do
    echo "== ncu gemm 1x4096x4096 $cfg"
    timeout 120 ncu --clock-control none --kernel-name "regex:^tiles_kernel_(gemm|sum_parts)$" --launch-count 2 $SECT \
        python3 -m tiles compare gemm --backends cuda --no-compile --shapes 1x4096x4096 --set $cfg \
        >"$OUT/ncu_$(echo $cfg | tr -d ' =').txt" 2>&1
    grep -E "tiles_kernel|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Grid Size|Block Size|Waves Per SM|Warp Cycles Per Issued|Stall|Dynamic Shared" \
        "$OUT/ncu_$(echo $cfg | tr -d ' =').txt" | head -40
done
echo "== timing gemm 1x4096x4096 and 1x4096x14336"; timeout 90 python3 -m tiles compare gemm --backends cuda --no-compile \
    --shapes 1x4096x4096 1x4096x14336 --set "BM=64" "BN=64,128" "BK=64" "stages=5" "workers=1" "SPLIT=1,4,8" 2>&1 | grep -v "^\s*$" | tail -16
cd "$OUT" && tar czf ../session.tgz . && rm -rf ./* && mv ../session.tgz .
