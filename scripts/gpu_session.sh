#!/usr/bin/env bash
# One lent-GPU call for the 2026-12-02 session's merged work (issues 18, 19, 20), in under 7 minutes:
#   1. the GPU property tests of what changed on CUDA (attention rewrites and rings, split K into any C,
#      the batched GEMM's TMA store, softmax/rmsnorm sources);
#   2. attention: the new default (rewrites, rings) against main's code (rewrites=False rings=False) and cuDNN;
#   3. the split-K / batched GEMM tune at the skinny shapes (scripts/gpu_tune.sh, shortened);
#   4. the tiles model's step times under CUDA graphs and its profile (.ci/gpu_torch.py --profile).
set -uo pipefail
OUT=${OUT:-/tmp/tiles-session}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || exit 1
echo "== tests"; timeout 110 python3 -m pytest -q -p no:cacheprovider -n 14 --backends cuda,cuda:sm_80 \
    tests/test_kernels.py tests/test_kernel_attention_bwd.py tests/test_kernel_softmax.py tests/test_kernel_rmsnorm.py \
    tests/test_cuda_warp_specialized.py tests/test_cuda_rewrites.py 2>&1 | tail -6
echo "== attention"; timeout 130 python3 -m tiles compare attention --backends cuda --no-compile \
    --shapes 4x32x8192x128 16x16x4096x64 8x16x2048x128,causal --set rewrites=True,False rings=True,False \
    --json "$OUT/attention.json" 2>&1 | grep -v "^\s*$" | tail -22
echo "== tune"; OUT=$OUT/tune BUDGET=95 TUNE_S=55 TOP=2 CHECK="split_k_into or batched" ACC_SHAPES= \
    SHAPES="1x4096x14336 16x4096x14336 1x4096x4096 512x4096x4096" bash scripts/gpu_tune.sh 2>&1 | tail -16
echo "== torch"; timeout 90 python3 .ci/gpu_torch.py --profile --out "$OUT/torch" 2>&1 | tail -2
cd "$OUT" && tar czf ../session.tgz . && rm -rf ./* && mv ../session.tgz .   # one file back (the call returns 8 at most)
