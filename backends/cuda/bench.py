"""Benchmark of the Hopper (sm_90a) path on an H200: our kernels against cuBLAS, cuDNN SDPA and flash SDPA.

    python -m tiles.backends.cuda.bench            # checks, then times, prints the table last
    python -m tiles.backends.cuda.bench --quick    # one size per kernel
    python -m tiles.backends.cuda.bench --json out.json

The kernels timed: the generated ones (tiles.kernels.gemm / attention through the cuda backend, as a user
calls them), under the library's default sm_90a schedule or, with --generated SCHEDULE (repeatable), under the
schedules named (default, warp_specialized (not persistent), warp_specialized_persistent, wgmma, mma_sync):

    python -m tiles.backends.cuda.bench --quick --generated default --generated wgmma

and the hand-instantiated ones in include/tiles_cuda/sm90/hand/ (device code in *.cuh, written only against the
sm90 headers; host launchers in *.cu), compiled with nvcc in a subprocess (a compiler crash cannot take this
process down) into a shared library with a C entry point per kernel, and called through ctypes on torch
tensors on the current stream.

Method: every kernel is checked first (fresh random inputs, outputs poisoned with NaN, float64 references on
small shapes, cuDNN's output at the benchmark shapes); times are triton.testing.do_bench medians over rotating
input sets; one run times ours and the baselines, so the ratios are comparable.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

INCLUDE = Path(__file__).parent / "include"
HAND = INCLUDE / "tiles_cuda" / "sm90" / "hand"
NVCC_FLAGS = ["-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17", f"-I{INCLUDE}", "-shared", "-Xcompiler",
              "-fPIC"]
H200_BF16_PEAK = 989.0  # TFLOP/s, dense, datasheet

GEMM_SIZES = (4096, 8192, 16384)
# (B, H, N, D) for each attention row of the issue, causal and not
ATTN_SHAPES = ((4, 32, 8192, 128), (16, 16, 4096, 64), (16, 16, 4096, 128))


# ---------------------------------------------------------------- build and load

def build(name: str, cache: Path | None = None, extra: list[str] | None = None) -> Path:
    """Compile hand/<name>.cu into a shared library with nvcc (a subprocess); cached by source and flags."""
    src = HAND / f"{name}.cu"
    flags = NVCC_FLAGS + (extra or [])
    headers = sorted(p for p in HAND.parent.rglob("*") if p.suffix in (".cuh", ".h"))
    key = hashlib.sha256()
    for p in [src, *headers]:
        key.update(p.read_bytes())
    key.update(" ".join(flags).encode())
    key.update(subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.encode())
    cache = cache or Path(os.environ.get("TILES_CACHE", Path(tempfile.gettempdir()) / "tiles-cache")) / "sm90"
    cache.mkdir(parents=True, exist_ok=True)
    out = cache / f"{name}-{key.hexdigest()[:16]}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        r = subprocess.run(["nvcc", *flags, "-o", str(tmp), str(src)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed on {src}:\n{r.stderr}")
        tmp.replace(out)
    return out


class Sm90Kernels:
    """The hand-instantiated kernels, callable on torch CUDA tensors (current stream)."""

    def __init__(self, cache: Path | None = None, defines: list[str] | None = None):
        import torch

        self.torch = torch
        extra = [f"-D{d}" for d in defines or []]
        self.gemm_lib = ctypes.CDLL(str(build("gemm", cache, extra)))
        self.attn_lib = ctypes.CDLL(str(build("attention", cache, extra)))
        vp, i = ctypes.c_void_p, ctypes.c_int
        self.gemm_lib.tiles_sm90_gemm.argtypes = [vp, vp, vp, i, i, i, i, i, vp]
        self.gemm_lib.tiles_sm90_gemm.restype = ctypes.c_char_p
        self.attn_lib.tiles_sm90_attn_fwd.argtypes = [vp, vp, vp, vp, vp, i, i, i, i, i, i, vp]
        self.attn_lib.tiles_sm90_attn_fwd.restype = ctypes.c_char_p
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count

    def _check(self, tensors, dtypes):
        torch = self.torch
        dev = torch.cuda.current_device()
        for name, t in tensors.items():
            if not t.is_cuda or t.device.index != dev:
                raise ValueError(f"{name}: must be a CUDA tensor on the current device (cuda:{dev})")
            if t.dtype != dtypes[name]:
                raise TypeError(f"{name}: dtype {t.dtype}, expected {dtypes[name]}")
            if not t.is_contiguous():
                raise ValueError(f"{name}: must be contiguous")

    def gemm(self, a, b, out=None, out_dtype=None):
        """out = a @ b; a: (M, K) bf16, b: (K, N) bf16; out bf16 (default) or f32."""
        torch = self.torch
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
            raise ValueError(f"gemm: shapes {tuple(a.shape)} @ {tuple(b.shape)} do not chain")
        M, K = a.shape
        N = b.shape[1]
        if out is None:
            out = torch.empty(M, N, device=a.device, dtype=out_dtype or torch.bfloat16)
        if tuple(out.shape) != (M, N) or out.dtype not in (torch.bfloat16, torch.float32):
            raise ValueError(f"gemm: out must be ({M}, {N}) bf16 or f32")
        self._check({"a": a, "b": b, "out": out}, {"a": torch.bfloat16, "b": torch.bfloat16, "out": out.dtype})
        err = self.gemm_lib.tiles_sm90_gemm(a.data_ptr(), b.data_ptr(), out.data_ptr(), M, N, K,
                                            int(out.dtype == torch.float32), self.sms,
                                            torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(err.decode())
        return out

    def attention(self, q, k, v, causal=False, out=None, lse=None):
        """(out, lse) of softmax(q k^T / sqrt(D)) v; q: (B, Hq, N, D), k, v: (B, Hkv, N, D) bf16."""
        torch = self.torch
        if q.dim() != 4 or k.shape != v.shape or k.dim() != 4:
            raise ValueError("attention: q, k, v must be (B, H, N, D), k and v alike")
        B, Hq, N, D = q.shape
        if k.shape[0] != B or k.shape[2:] != (N, D) or Hq % k.shape[1]:
            raise ValueError(f"attention: k/v {tuple(k.shape)} do not fit q {tuple(q.shape)}")
        out = torch.empty_like(q) if out is None else out
        lse = torch.empty(B, Hq, N, device=q.device, dtype=torch.float32) if lse is None else lse
        bf = torch.bfloat16
        self._check({"q": q, "k": k, "v": v, "out": out, "lse": lse},
                    {"q": bf, "k": bf, "v": bf, "out": bf, "lse": torch.float32})
        err = self.attn_lib.tiles_sm90_attn_fwd(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                                lse.data_ptr(), B, Hq, k.shape[1], N, D, int(causal),
                                                torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(err.decode())
        return out, lse


# The generated kernels' sm_90a schedules, as kernel options (backends/cuda/schedules.py).
GENERATED = {"default": {}, "mma_sync": dict(schedule="warp", wgmma=False), "wgmma": dict(schedule="warp"),
             "warp_specialized": dict(schedule="warp_specialized", persistent=False),
             "warp_specialized_persistent": dict(schedule="warp_specialized", persistent=True)}


class GeneratedKernels:
    """The generated GEMM and attention forward under one schedule, with Sm90Kernels' call signatures."""

    def __init__(self, schedule: str):
        import torch

        from tiles.backend import get

        self.torch, self.cuda, self.options = torch, get("cuda"), GENERATED[schedule]
        self.label = f"tiles generated {schedule}"

    def gemm(self, a, b, out=None, out_dtype=None):
        from tiles.kernels.gemm import gemm

        out = out if out is not None else self.torch.empty(a.shape[0], b.shape[1], device=a.device,
                                                            dtype=out_dtype or self.torch.bfloat16)
        self.cuda.launch(gemm, [out, a, b], **self.options)
        return out

    def attention(self, q, k, v, causal=False, out=None, lse=None):
        from tiles.kernels.attention import attention_fwd

        out = self.torch.empty_like(q) if out is None else out
        lse = self.torch.empty(q.shape[:3], device=q.device) if lse is None else lse
        self.cuda.launch(attention_fwd, [out, lse, q, k, v, 1 / math.sqrt(q.shape[-1])], D=q.shape[-1],
                         causal=causal, **self.options)
        return out, lse


# ---------------------------------------------------------------- references and checks

def rel_err(x, ref) -> float:
    x, ref = x.double(), ref.double()
    if not bool(x.isfinite().all()):
        return math.inf
    return float((x - ref).norm() / ref.norm())


def attention_ref(q, k, v, causal):
    """float64 softmax(q k^T / sqrt(D)) v and the natural-log LSE, GQA by head index mapping."""
    import torch

    q, k, v = q.double(), k.double(), v.double()
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), -math.inf)
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def check_gemm(ker, M, N, K, out_dtype, seed):
    torch = ker.torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=g).bfloat16()
    out = torch.full((M, N), math.nan, device="cuda", dtype=out_dtype)
    ker.gemm(a, b, out)
    return rel_err(out, a.double() @ b.double())


def check_attention(ker, B, Hq, Hkv, N, D, causal, seed):
    torch = ker.torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(B, Hq, N, D, device="cuda", generator=g).bfloat16()
    k = torch.randn(B, Hkv, N, D, device="cuda", generator=g).bfloat16()
    v = torch.randn(B, Hkv, N, D, device="cuda", generator=g).bfloat16()
    out = torch.full_like(q, math.nan)
    lse = torch.full((B, Hq, N), math.nan, device="cuda")
    ker.attention(q, k, v, causal, out, lse)
    ref_o, ref_lse = attention_ref(q, k, v, causal)
    lse_err = float((lse.double() - ref_lse).abs().max()) if bool(lse.isfinite().all()) else math.inf
    return rel_err(out, ref_o), lse_err


GEMM_CHECKS = [(128, 256, 64), (256, 512, 1024), (300, 264, 200), (1000, 776, 520), (2048, 2048, 2048)]
ATTN_CHECKS = [(1, 2, 2, 128, 64), (2, 4, 4, 512, 128), (1, 8, 2, 384, 64), (1, 2, 1, 1000, 128), (1, 1, 1, 200, 64)]
TOL_BF16 = 1e-2  # relative Frobenius error of a bf16 output against the float64 reference
TOL_F32 = 2e-3   # f32 output: bf16 operands, f32 accumulation
TOL_LSE = 2e-2   # max abs error of the log-sum-exp (f32, from a bf16-rounded softmax path)


def run_checks(ker, log) -> bool:
    torch = ker.torch
    ok = True
    for i, (M, N, K) in enumerate(GEMM_CHECKS):
        for dt, tol in ((torch.bfloat16, TOL_BF16), (torch.float32, TOL_F32)):
            e = check_gemm(ker, M, N, K, dt, seed=100 + i)
            ok &= e < tol
            log(f"check gemm {M}x{N}x{K} -> {str(dt)[6:]}: rel err {e:.2e} {'ok' if e < tol else 'FAIL'}")
    for i, (B, Hq, Hkv, N, D) in enumerate(ATTN_CHECKS):
        for causal in (False, True):
            eo, el = check_attention(ker, B, Hq, Hkv, N, D, causal, seed=200 + i)
            good = eo < TOL_BF16 and el < TOL_LSE
            ok &= good
            log(f"check attention B{B} Hq{Hq} Hkv{Hkv} N{N} D{D} causal={causal}: "
                f"O rel err {eo:.2e}, LSE max err {el:.2e} {'ok' if good else 'FAIL'}")
    return ok


# ---------------------------------------------------------------- timing

def median_ms(fn):
    from triton.testing import do_bench

    return do_bench(fn, warmup=100, rep=500, return_mode="median")


def bench_gemm(kers, n, log):
    torch = kers[0].torch
    sets = max(2, math.ceil(200e6 / (4 * n * n)))  # > 3x the 60 MB L2 over the rotation
    ins = [(torch.randn(n, n, device="cuda").bfloat16(), torch.randn(n, n, device="cuda").bfloat16())
           for _ in range(sets)]
    outs = [torch.empty(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    flops = 2.0 * n ** 3
    i = {"i": 0}

    def cublas():
        i["i"] += 1
        torch.matmul(*ins[i["i"] % sets], out=outs[i["i"] % 2])

    t_cublas = median_ms(cublas)
    rows = []
    for k in kers:
        # sanity at the benchmark size: ours against cuBLAS
        e = rel_err(k.gemm(*ins[0], outs[0]), torch.matmul(*ins[0]))

        def ours(k=k):
            i["i"] += 1
            k.gemm(*ins[i["i"] % sets], outs[i["i"] % 2])

        t = median_ms(ours)
        rows.append(dict(work=f"GEMM bf16 {n}^3", kernel=label(k), ms=t, tflops=flops / t / 1e9,
                         check=f"vs cuBLAS {e:.1e}", ratio=t_cublas / t))
    rows.append(dict(work=f"GEMM bf16 {n}^3", kernel="cuBLAS torch.matmul", ms=t_cublas,
                     tflops=flops / t_cublas / 1e9))
    return rows


def label(ker) -> str:
    return getattr(ker, "label", "tiles sm90 (hand)")


def bench_attention(kers, B, H, N, D, causal, log):
    torch = kers[0].torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    per = 3 * B * H * N * D * 2
    sets = max(2, math.ceil(200e6 / per))
    ins = [tuple(torch.randn(B, H, N, D, device="cuda").bfloat16() for _ in range(3)) for _ in range(sets)]
    out = torch.empty(B, H, N, D, device="cuda", dtype=torch.bfloat16)
    lse = torch.empty(B, H, N, device="cuda")
    flops = 4.0 * B * H * N * N * D / (2 if causal else 1)
    i = {"i": 0}

    def sdpa(backend):
        def fn():
            i["i"] += 1
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(*ins[i["i"] % sets], is_causal=causal)
        return fn

    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        o_cudnn = F.scaled_dot_product_attention(*ins[0], is_causal=causal)
    name = f"attn fwd B{B} H{H} N{N} D{D}{' causal' if causal else ''}"
    rows = []
    for k in kers:
        e = rel_err(k.attention(*ins[0], causal)[0], o_cudnn)

        def ours(k=k):
            i["i"] += 1
            k.attention(*ins[i["i"] % sets], causal, out, lse)

        t = median_ms(ours)
        rows.append(dict(work=name, kernel=label(k), ms=t, tflops=flops / t / 1e9, check=f"vs cuDNN {e:.1e}"))
    for base, backend in (("cuDNN SDPA", SDPBackend.CUDNN_ATTENTION), ("flash SDPA", SDPBackend.FLASH_ATTENTION)):
        try:
            tb = median_ms(sdpa(backend))
        except RuntimeError as err:  # a backend may refuse a shape
            log(f"{base} refused {name}: {err}")
            continue
        for r in rows[:len(kers)]:
            r[f"ratio_{base.split()[0]}"] = tb / r["ms"]
        rows.append(dict(work=name, kernel=base, ms=tb, tflops=flops / tb / 1e9))
    return rows


def environment():
    import torch

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    return dict(device=torch.cuda.get_device_name(0), nvidia_smi=smi, torch=torch.__version__,
                cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                nvcc=subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.split("\n")[-2])


def table(rows) -> str:
    lines = [f"{'work':<38} {'kernel':<20} {'ms':>8} {'TFLOP/s':>8} {'%peak':>6}  ratio / check"]
    for r in rows:
        extra = []
        for k, v in r.items():
            if k.startswith("ratio"):
                extra.append(f"{k.replace('ratio_', 'x')}={v:.3f}" if k != "ratio" else f"x={v:.3f}")
        if "check" in r:
            extra.append(r["check"])
        lines.append(f"{r['work']:<38} {r['kernel']:<20} {r['ms']:8.3f} {r['tflops']:8.1f} "
                     f"{100 * r['tflops'] / H200_BF16_PEAK:5.1f}%  {' '.join(extra)}")
    return "\n".join(lines)


def markdown(rows) -> str:
    out = ["| work | kernel | ms | TFLOP/s | % of 989 | speedup (baseline time / ours) | check |", "|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        ratios = ", ".join(f"{'cuBLAS' if k == 'ratio' else k[6:]} {v:.3f}x" for k, v in r.items() if k.startswith("ratio"))
        out.append(f"| {r['work']} | {r['kernel']} | {r['ms']:.3f} | {r['tflops']:.1f} | "
                   f"{100 * r['tflops'] / H200_BF16_PEAK:.1f}% | {ratios} | {r.get('check', '')} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one GEMM size and two attention rows")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--only", choices=("gemm", "attention"))
    ap.add_argument("--json", type=Path, help="write environment and rows here")
    ap.add_argument("--md", type=Path, help="write the rows as a markdown table here")
    ap.add_argument("-D", dest="defines", action="append", default=[],
                    help="a tuning knob for the kernels, e.g. -D TILES_ATTN_BKV=176")
    ap.add_argument("--generated", action="append", choices=list(GENERATED), metavar="SCHEDULE",
                    help=f"time the generated kernels under this sm_90a schedule ({', '.join(GENERATED)}; "
                         f"repeatable; default: the library's default)")
    args = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark", file=sys.stderr)
        return 2
    log = lambda s: print(s, flush=True)  # noqa: E731
    env = environment()
    log(json.dumps(env))
    ker = Sm90Kernels(defines=args.defines)
    log(f"defines: {args.defines}")
    ok = True if args.no_check else run_checks(ker, log)
    kers = [ker] + [GeneratedKernels(s) for s in args.generated or ["default"]]
    rows = []
    if args.only in (None, "gemm"):
        for n in GEMM_SIZES[:2] if args.quick else GEMM_SIZES:
            rows += bench_gemm(kers, n, log)
            log(table(rows[-len(kers) - 1:]))
    if args.only in (None, "attention"):
        shapes = ATTN_SHAPES[:1] if args.quick else ATTN_SHAPES
        for B, H, N, D in shapes:
            for causal in (False, True):
                rows += bench_attention(kers, B, H, N, D, causal, log)
                log(table(rows[-len(kers) - 2:]))
    if args.json:
        args.json.write_text(json.dumps(dict(env=env, checks_ok=ok, rows=rows), indent=1))
    if args.md:
        args.md.write_text(markdown(rows) + "\n")
    print("\n" + table(rows))
    print("checks:", "all ok" if ok else "FAILED (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
