"""The sm_90a header library and its hand-instantiated kernels, checked offline (no GPU): they compile for
sm_90a (nvcc, and NVRTC for the device code) with no spills and no serialized wgmma, the SASS of every kernel
holds HGMMA (wgmma), UTMALDG (TMA) and USETMAXREG (register reallocation), and the C entry points reject bad
input before touching CUDA."""
import ctypes
import importlib.util
import re
from pathlib import Path

import pytest

from tiles.backends.cuda import bench, schedules, toolchain

SM90 = Path(bench.HAND).parent
needs_nvcc = pytest.mark.skipif(toolchain.available("nvcc") is not None, reason="nvcc not on PATH")
KERNEL_OPS = ("HGMMA.64x", "UTMALDG", "USETMAXREG", "SYNCS.PHASECHK")


def kernel_sections(sass):
    functions = re.split(r"\n\s*Function : ", sass)[1:]
    return {f.split("\n", 1)[0]: f for f in functions if "kernel" in f.split("\n", 1)[0]}


def test_generated_wgmma_wrappers_are_current():
    spec = importlib.util.spec_from_file_location("gen_wgmma", SM90 / "gen_wgmma.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (SM90 / "wgmma_ops.cuh").read_text() == gen.render(), "run gen_wgmma.py"
    # the header's wgmma_n (declared on every target, where the generated wrappers are sm_90a's only) agrees
    line = re.search(r"constexpr bool wgmma_n = (.*);", (SM90.parent / "mma_block.cuh").read_text()).group(1)
    assert tuple(int(n) for n in re.findall(r"N == (\d+)", line)) == schedules.WGMMA_N


@pytest.fixture(scope="module", params=[pytest.param(n, marks=needs_nvcc) for n in ("gemm", "attention")])
def compiled(request):
    src = (bench.HAND / f"{request.param}.cu").read_text()
    return toolchain.compile(src, "sm_90a", compiler="nvcc", extra=("-O3",), name=f"{request.param}.cu")


def test_resources(compiled):
    kernels = {k: r for k, r in compiled.resources.items() if "kernel" in k}
    assert len(kernels) >= 2, compiled.log
    for name, r in kernels.items():
        assert r.spills == 0 and r.stack_frame == 0, (name, r)
    # C7511: ptxas serialized the wgmma pipeline; C7508: it ignored setmaxnreg
    assert "C7511" not in compiled.log and "C7508" not in compiled.log, compiled.log


def test_sass_has_wgmma_tma_and_setmaxnreg(compiled):
    kernels = kernel_sections(compiled.sass())
    assert len(kernels) >= 2
    for name, f in kernels.items():
        for op in KERNEL_OPS:
            assert op in f, f"{op} missing from {name}"


NVRTC_SOURCE = """
#include "tiles_cuda/sm90/hand/gemm.cuh"
#include "tiles_cuda/sm90/hand/attention.cuh"
namespace g = tiles::sm90::hand_gemm;
namespace a = tiles::sm90::hand_attn;
using tiles::sm90::tensor_map;
template __global__ void g::gemm_kernel<256, g::DEFAULT_STAGES, g::DEFAULT_CLUSTER, tiles::sm90::bf16>(
    const __grid_constant__ tensor_map, const __grid_constant__ tensor_map, const __grid_constant__ tensor_map,
    tiles::sm90::bf16*, int, int, int);
template __global__ void a::attn_fwd_kernel<128, 176, false>(const __grid_constant__ tensor_map,
    const __grid_constant__ tensor_map, const __grid_constant__ tensor_map, const a::attn_args);
template __global__ void a::attn_fwd_kernel<64, 128, true>(const __grid_constant__ tensor_map,
    const __grid_constant__ tensor_map, const __grid_constant__ tensor_map, const a::attn_args);
"""


@pytest.mark.skipif(toolchain.available("nvrtc") is not None, reason="NVRTC not installed")
def test_device_code_compiles_with_nvrtc():
    # The runtime path compiles with NVRTC (in a child process: NVRTC 13.0 once crashed on a wgmma kernel).
    c = toolchain.compile(NVRTC_SOURCE, "sm_90a", compiler="nvrtc", name="sm90_nvrtc.cu")
    assert len(c.resources) == 3 and all(r.spills == 0 for r in c.resources.values()), c.log
    assert "C7511" not in c.log and "C7508" not in c.log, c.log
    for name, f in kernel_sections(c.sass()).items():
        for op in KERNEL_OPS:
            assert op in f, f"{op} missing from {name}"


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    cache = tmp_path_factory.mktemp("sm90")
    return {n: ctypes.CDLL(str(bench.build(n, cache))) for n in ("gemm", "attention")}


@needs_nvcc
def test_entry_points_reject_bad_input_before_launch(libs):
    vp, i = ctypes.c_void_p, ctypes.c_int
    gemm = libs["gemm"].tiles_sm90_gemm
    gemm.argtypes = [vp, vp, vp, i, i, i, i, i, vp]
    gemm.restype = ctypes.c_char_p
    attn = libs["attention"].tiles_sm90_attn_fwd
    attn.argtypes = [vp, vp, vp, vp, vp, i, i, i, i, i, i, vp]
    attn.restype = ctypes.c_char_p
    p = 1 << 20  # an aligned address; nothing is dereferenced before the checks fail
    assert b"multiples of 8" in gemm(p, p, p, 64, 64, 60, 0, 132, None)
    assert b"positive" in gemm(p, p, p, 0, 64, 64, 0, 132, None)
    assert b"16-byte aligned" in gemm(p + 2, p, p, 64, 64, 64, 0, 132, None)
    assert b"head dim" in attn(p, p, p, p, p, 1, 2, 2, 128, 96, 0, None)
    assert b"multiple of Hkv" in attn(p, p, p, p, p, 1, 3, 2, 128, 64, 0, None)
    assert b"16-byte aligned" in attn(p, p + 8, p, p, p, 1, 2, 2, 128, 64, 0, None)
