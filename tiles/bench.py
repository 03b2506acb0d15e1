"""What `tiles compare` and `tiles demo` run, and how they time it.

A workload is a shipped kernel with everything needed to run it as a user would: a shape language
(`4096x4096x4096`, `2x16/4x1024x128,causal`), fresh random inputs with poisoned outputs, the float64
reference, the FLOP count, and the vendor library that does the same job (the baseline of the speed ratio).

Timing: a few warm-up runs, then the median of many, each on the next of several input sets (rotating
inputs, so the caches start cold as they would in a model), measured with device events where there is a
device (CUDA and HIP through torch or cupy) and the host clock around a synchronize elsewhere.
"""
from __future__ import annotations

import math
import re
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import dtypes
from .testing import errors, poisoned, random_array, tolerance

# ---------------------------------------------------------------- timing

ROTATE_BYTES = 512 << 20   # input sets rotated through add up to this much (more than any L2 / Infinity Cache)
MAX_SETS = 16


def input_sets(bytes_per_set: int) -> int:
    """How many input sets to rotate through so that consecutive runs do not find their inputs in cache."""
    return max(1, min(MAX_SETS, math.ceil(ROTATE_BYTES / max(bytes_per_set, 1))))


class HostClock:
    """Wall time of each run between two synchronizations of the device (none on the CPU)."""
    name = "host clock"

    def __init__(self, sync: Callable[[], None] = lambda: None):
        self.sync = sync

    def times(self, step, indices) -> list[float]:
        out = []
        for i in indices:
            self.sync()
            t0 = time.perf_counter()
            step(i)
            self.sync()
            out.append(time.perf_counter() - t0)
        return out


class EventClock:
    """GPU time of each run between two events on the default stream (torch's or cupy's: both record on
    the legacy stream). Runs are queued back to back and read after one synchronize, so the host's launch
    overhead hides behind the previous run instead of showing as idle GPU time."""

    def __init__(self):
        try:
            import torch
            if not torch.cuda.is_available():
                raise ImportError("torch sees no GPU")
            self._new = lambda: torch.cuda.Event(enable_timing=True)
            self._ms = lambda a, b: a.elapsed_time(b)
            self.name = "torch events"
        except ImportError:
            import cupy
            self._new = cupy.cuda.Event
            self._ms = cupy.cuda.get_elapsed_time
            self.name = "cupy events"

    def times(self, step, indices) -> list[float]:
        pairs = []
        for i in indices:
            a, b = self._new(), self._new()
            a.record()
            step(i)
            b.record()
            pairs.append((a, b))
        pairs[-1][1].synchronize()
        return [self._ms(a, b) / 1e3 for a, b in pairs]


@dataclass
class Timing:
    median_s: float
    runs: int
    sets: int
    clock: str


def measure(step: Callable[[int], object], *, sets: int = 1, clock=None, warmup: int = 3,
            budget_s: float = 1.0, min_runs: int = 5, max_runs: int = 200) -> Timing:
    """Median time of step(i), i cycling over `sets` input sets, after warm-up; about budget_s of runs."""
    clock = clock or HostClock()
    first = clock.times(step, [i % sets for i in range(warmup + 1)])[-1]
    runs = max(min_runs, min(max_runs, int(budget_s / max(first, 1e-7))))
    samples = clock.times(step, [i % sets for i in range(runs)])
    return Timing(statistics.median(samples), runs, sets, clock.name)


# ---------------------------------------------------------------- workloads

@dataclass
class Output:
    name: str
    index: int        # position among the kernel's arguments
    tol_dtype: str    # the dtype whose tolerance applies
    row_axis: int     # the axis `reference(rows=...)` samples


REFERENCE_COST = 2e9   # above this (Workload.cost) the float64 reference on the host covers sampled rows only


class Workload:
    """A shipped kernel as `compare` runs it. Subclasses define the shape language and the math."""
    name: str
    fields: tuple[str, ...]
    flags: tuple[str, ...] = ()
    pattern: str
    default_shapes: tuple[str, ...]   # device-sized
    small_shapes: tuple[str, ...]     # fast on the reference and CPU emulators, not multiples of the tiles

    def parse(self, text: str) -> dict:
        m = re.fullmatch(self.pattern, text.replace(" ", ""))
        if not m:
            raise ValueError(f"{self.name}: bad shape {text!r}; expected {self.syntax}, e.g. {self.small_shapes[0]}")
        groups = m.groupdict()
        s = {k: int(v) for k, v in groups.items() if k in self.fields and v is not None}
        flags = [f for f in (groups.get("flags") or "").split(",") if f]
        s["dtype"] = "bf16"
        for f in flags:
            if f in ("bf16", "f16"):
                s["dtype"] = f
            elif f in self.flags:
                s[f] = True
            else:
                raise ValueError(f"{self.name}: unknown option {f!r} in {text!r}; options: "
                                 f"{', '.join(self.flags + ('bf16', 'f16'))}")
        self.check(s)
        return s

    def check(self, s: dict) -> None:
        bad = [k for k in self.fields if k in s and s[k] <= 0]
        if bad:
            raise ValueError(f"{self.name}: {', '.join(bad)} must be positive")

    def kernel(self, s: dict):
        """The @tiles.kernel that runs shape s."""
        raise NotImplementedError

    def inputs(self, s: dict, rng: np.random.Generator) -> list:
        """The kernel's arguments: outputs poisoned, inputs fresh standard-normal values of their dtype."""
        raise NotImplementedError

    def outputs(self, s: dict) -> list[Output]:
        raise NotImplementedError

    def reference(self, s: dict, args: list, rows=None) -> list[np.ndarray]:
        """float64 outputs; with `rows`, only those rows (along each output's row_axis)."""
        raise NotImplementedError

    def row_count(self, s: dict) -> int:
        raise NotImplementedError

    def consts(self, s: dict) -> dict:
        return {}

    def flops(self, s: dict) -> float | None:
        """FLOPs of one run: compute-bound workloads report TFLOP/s and % of the matrix peak."""
        return None

    def bytes(self, s: dict) -> float | None:
        """The least memory traffic of one run: memory-bound workloads report GB/s and % of bandwidth."""
        return None

    def cost(self, s: dict) -> float:
        """Rough scalar operations of one run (what CPU execution and the host reference pay)."""
        return self.flops(s) or 16 * self.bytes(s)   # the memory-bound kernels do ~10 ops per element

    def supports(self, target: str | None) -> str | None:
        """None if the kernel can run for this target (None: the reference), else why not."""
        return None

    def baseline(self, vendor: str):
        """The vendor library doing the same job, where torch reaches it here: a function
        (s, sets) -> (label, step(i), sync) over `sets` fresh device input sets; else None."""
        return None

    def sample_rows(self, s: dict, rng: np.random.Generator):
        """None (check every row) when the float64 reference is cheap, else sorted row indices that
        include the first and last row (the edge block), enough to keep it within REFERENCE_COST."""
        n = self.row_count(s)
        keep = int(REFERENCE_COST / (self.cost(s) / n))
        if keep >= n:
            return None
        return np.unique(np.concatenate([[0, n - 1], rng.choice(n, size=max(keep, 8), replace=False)]))

    def check_outputs(self, s: dict, args: list, rows=None) -> list[tuple[str, float, float, float]]:
        """(name, max |err|, relative error, tolerance) per output against the float64 reference."""
        out = []
        for o, ref in zip(self.outputs(s), self.reference(s, args, rows)):
            got = args[o.index] if rows is None else np.take(args[o.index], rows, axis=o.row_axis)
            max_abs, rel = errors(got, ref)
            out.append((o.name, max_abs, rel, tolerance(o.tol_dtype)))
        return out


class Gemm(Workload):
    name = "gemm"
    fields = ("M", "N", "K")
    flags = ("bt",)
    syntax = "MxNxK[,bt][,bf16|f16]  (bt: B given as N x K)"
    pattern = r"(?P<M>\d+)x(?P<N>\d+)x(?P<K>\d+)(?:,(?P<flags>[\w,]+))?"
    default_shapes = ("4096x4096x4096", "8192x8192x8192")
    small_shapes = ("200x136x72", "96x80x40,bt")

    def kernel(self, s):
        from .kernels.gemm import gemm
        return gemm

    def inputs(self, s, rng):
        m, n, k, dt = s["M"], s["N"], s["K"], s["dtype"]
        b = random_array((n, k) if s.get("bt") else (k, n), dt, rng)
        return [poisoned((m, n), dt), random_array((m, k), dt, rng), b]

    def outputs(self, s):
        # the product is exact in f32; the one rounding that matters is the store to the output dtype
        return [Output("C", 0, s["dtype"], 0)]

    def reference(self, s, args, rows=None):
        a, b = (x.astype(np.float64) for x in (args[1] if rows is None else args[1][rows], args[2]))
        return [a @ (b.T if s.get("bt") else b)]

    def row_count(self, s):
        return s["M"]

    def consts(self, s):
        return {"trans_b": bool(s.get("bt"))}

    def flops(self, s):
        from .kernels.gemm import flops
        return flops(s["M"], s["N"], s["K"])

    def baseline(self, vendor):
        def setup(s, sets, framework):
            t, dev = framework
            dt = getattr(t, {"bf16": "bfloat16", "f16": "float16"}[s["dtype"]])
            ab = [(t.randn(s["M"], s["K"], dtype=dt, device=dev),
                   t.randn(s["N"], s["K"], dtype=dt, device=dev) if s.get("bt")
                   else t.randn(s["K"], s["N"], dtype=dt, device=dev)) for _ in range(sets)]
            label = {"nvidia": "cuBLAS", "amd": "hipBLASLt", "apple": "MPS"}[vendor] + " (torch.matmul)"
            if s.get("bt"):
                return label, lambda i: t.matmul(ab[i][0], ab[i][1].T)
            return label, lambda i: t.matmul(*ab[i])
        return _library(vendor, setup)


class Attention(Workload):
    name = "attention"
    fields = ("B", "H", "Hkv", "N", "D")
    flags = ("causal",)
    syntax = "BxH[/Hkv]xNxD[,causal][,bf16|f16]  (Hkv: key/value heads for GQA; D 64 or 128)"
    pattern = r"(?P<B>\d+)x(?P<H>\d+)(?:/(?P<Hkv>\d+))?x(?P<N>\d+)x(?P<D>\d+)(?:,(?P<flags>[\w,]+))?"
    default_shapes = ("16x16x4096x128", "16x16x4096x128,causal", "4x32/8x8192x128,causal")
    small_shapes = ("1x2x80x64,causal", "1x4/2x72x128")

    def kernel(self, s):
        from .kernels.attention import attention_fwd
        return attention_fwd

    def check(self, s):
        s.setdefault("Hkv", s.get("H"))
        super().check(s)
        if s["H"] % s["Hkv"]:
            raise ValueError(f"attention: H={s['H']} is not a multiple of Hkv={s['Hkv']}")
        if s["D"] not in (64, 128):
            raise ValueError(f"attention: head dim D={s['D']}; the kernel is configured for 64 and 128")

    def inputs(self, s, rng):
        b, h, hk, n, d, dt = s["B"], s["H"], s["Hkv"], s["N"], s["D"], s["dtype"]
        return [poisoned((b, h, n, d), dt), poisoned((b, h, n), "f32"), random_array((b, h, n, d), dt, rng),
                random_array((b, hk, n, d), dt, rng), random_array((b, hk, n, d), dt, rng), 1.0 / math.sqrt(d)]

    def outputs(self, s):
        # O: P is rounded to the input dtype before P @ V. LSE: f32 sums of exponentials.
        return [Output("O", 0, s["dtype"], 2), Output("LSE", 1, "f32", 2)]

    def reference(self, s, args, rows=None):
        from tiles.kernels.attention import reference
        rows = np.arange(s["N"]) if rows is None else np.asarray(rows)
        return list(reference(args[2][:, :, rows], args[3], args[4], causal=bool(s.get("causal")),
                              scale=float(np.float32(args[5])), rows=rows))

    def consts(self, s):
        return {"D": s["D"], "causal": bool(s.get("causal"))}

    def row_count(self, s):
        return s["N"]

    def flops(self, s):
        from .kernels.attention import flops
        return flops(s["B"], s["H"], s["N"], s["D"], bool(s.get("causal")))

    def baseline(self, vendor):
        def setup(s, sets, framework):
            t, dev = framework
            dt = getattr(t, {"bf16": "bfloat16", "f16": "float16"}[s["dtype"]])
            b, h, hk, n, d = s["B"], s["H"], s["Hkv"], s["N"], s["D"]
            qkv = [(t.randn(b, h, n, d, dtype=dt, device=dev), t.randn(b, hk, n, d, dtype=dt, device=dev),
                    t.randn(b, hk, n, d, dtype=dt, device=dev)) for _ in range(sets)]
            sdpa = t.nn.functional.scaled_dot_product_attention
            causal, gqa = bool(s.get("causal")), hk != h
            plain = {"nvidia": "torch SDPA", "amd": "torch SDPA (ROCm)", "apple": "torch SDPA (MPS)"}[vendor]
            if vendor == "nvidia":   # cuDNN's fused attention is the fastest NVIDIA ships; not every shape has it
                from torch.nn.attention import SDPBackend, sdpa_kernel

                def cudnn(i):
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        return sdpa(*qkv[i], is_causal=causal, enable_gqa=gqa)
                try:
                    cudnn(0)
                    return "cuDNN SDPA (torch)", cudnn
                except RuntimeError:
                    pass
            return plain, lambda i: sdpa(*qkv[i], is_causal=causal, enable_gqa=gqa)
        return _library(vendor, setup)


class GemmFp8(Gemm):
    name = "gemm_fp8"
    flags = ()
    syntax = "MxNxK  (e4m3 A (M, K) and B (N, K), per-tensor scales, bf16 out)"
    pattern = r"(?P<M>\d+)x(?P<N>\d+)x(?P<K>\d+)"
    default_shapes = ("4096x4096x4096", "8192x8192x8192")
    small_shapes = ("136x200x136",)

    def kernel(self, s):
        from .kernels.gemm_fp8 import gemm_fp8
        return gemm_fp8

    def parse(self, text):
        s = super().parse(text)
        s["dtype"] = "fp8"   # the device table's fp8 peak; inputs are e4m3
        return s

    def supports(self, target):
        from .kernels.gemm_fp8 import supports_fp8
        return None if supports_fp8(target) else f"{target} has no fp8 e4m3"

    def inputs(self, s, rng):
        m, n, k = s["M"], s["N"], s["K"]
        # e4m3 keeps 3 mantissa bits: values spread over a few binades, scales bring them back
        return [poisoned((m, n), "bf16"), random_array((m, k), "fp8e4m3", rng, 8.0),
                random_array((n, k), "fp8e4m3", rng, 8.0), 1 / 8, 1 / 16]

    def outputs(self, s):
        return [Output("C", 0, "bf16", 0)]

    def reference(self, s, args, rows=None):
        a = args[1] if rows is None else args[1][rows]
        return [(a.astype(np.float64) @ args[2].astype(np.float64).T) * (np.float32(args[3]) * np.float32(args[4]))]

    def consts(self, s):
        return {}

    def baseline(self, vendor):
        if vendor != "nvidia":
            return None

        def setup(s, sets, framework):
            t, dev = framework
            one = t.tensor(1.0, device=dev)
            ab = [(t.randn(s["M"], s["K"], device=dev).to(t.float8_e4m3fn),
                   t.randn(s["N"], s["K"], device=dev).to(t.float8_e4m3fn)) for _ in range(sets)]
            return "cuBLASLt (torch._scaled_mm)", lambda i: t._scaled_mm(ab[i][0], ab[i][1].T, one, one,
                                                                          out_dtype=t.bfloat16)
        return _library(vendor, setup)


class Softmax(Workload):
    name = "softmax"
    fields = ("R", "C")
    syntax = "RxC[,bf16|f16]  (softmax over each of R rows of C elements)"
    pattern = r"(?P<R>\d+)x(?P<C>\d+)(?:,(?P<flags>[\w,]+))?"
    default_shapes = ("16384x4096", "4096x32768")
    small_shapes = ("100x300", "33x1000,f16")

    def kernel(self, s):
        from .kernels.softmax import softmax_fwd
        return softmax_fwd

    def inputs(self, s, rng):
        return [poisoned((s["R"], s["C"]), s["dtype"]), random_array((s["R"], s["C"]), s["dtype"], rng, 3.0)]

    def outputs(self, s):
        return [Output("Y", 0, s["dtype"], 0)]

    def reference(self, s, args, rows=None):
        x = (args[1] if rows is None else args[1][rows]).astype(np.float64)
        e = np.exp(x - x.max(-1, keepdims=True))
        return [e / e.sum(-1, keepdims=True)]

    def row_count(self, s):
        return s["R"]

    def bytes(self, s):
        from .kernels.softmax import bytes_moved
        return bytes_moved(s["R"], s["C"], 2)

    def baseline(self, vendor):
        def setup(s, sets, framework):
            t, dev = framework
            dt = getattr(t, {"bf16": "bfloat16", "f16": "float16"}[s["dtype"]])
            xs = [t.randn(s["R"], s["C"], dtype=dt, device=dev) for _ in range(sets)]
            return "torch.softmax", lambda i: t.softmax(xs[i], -1)
        return _library(vendor, setup)


class Rotary(Workload):
    name = "rotary"
    fields = ("B", "H", "Hkv", "N", "D")
    flags = ("interleaved",)
    syntax = "BxH[/Hkv]xNxD[,interleaved][,bf16|f16]  (q and k rotated in one launch; default half-split)"
    pattern = Attention.pattern
    default_shapes = ("16x32/8x4096x128", "16x32/8x4096x128,interleaved")
    small_shapes = ("1x2/1x40x64", "2x2x24x32,interleaved")

    def kernel(self, s):
        from .kernels import rotary
        return rotary.rotary_interleaved if s.get("interleaved") else rotary.rotary_half

    def parse(self, text):
        s = super().parse(text)
        s.setdefault("Hkv", s["H"])
        unit = 16 if s.get("interleaved") else 32
        if s["D"] % unit:
            raise ValueError(f"rotary: head dim D={s['D']} must be a multiple of {unit} for this convention")
        return s

    def inputs(self, s, rng):
        from .kernels import rotary
        b, h, hk, n, d, dt = s["B"], s["H"], s["Hkv"], s["N"], s["D"], s["dtype"]
        q, k = random_array((b, h, n, d), dt, rng), random_array((b, hk, n, d), dt, rng)
        cos, sin = (dtypes.of(dt).round(x).astype(dtypes.of(dt).np) for x in rotary.tables(n, d))
        outs = [poisoned(q.shape, dt), poisoned(k.shape, dt)]
        if not s.get("interleaved"):
            return outs + [q, k, cos, sin]
        rows = n * d // (2 * rotary.PAIRS)
        views = [x.reshape(x.shape[0], x.shape[1], rows, 2 * rotary.PAIRS) for x in outs + [q, k]]
        return views + [x.reshape(rows, rotary.PAIRS) for x in (cos, sin)] + list(rotary._constants(q.dtype))

    def outputs(self, s):
        return [Output("QO", 0, s["dtype"], 2), Output("KO", 1, s["dtype"], 2)]

    def reference(self, s, args, rows=None):
        n, d = s["N"], s["D"]
        cos, sin = (x.reshape(n, d // 2).astype(np.float64) for x in args[4:6])
        out = []
        for x in args[2:4]:
            x = x.reshape(x.shape[0], x.shape[1], n, d).astype(np.float64)
            if s.get("interleaved"):
                a, b = x[..., 0::2], x[..., 1::2]
                y = np.stack([a * cos - b * sin, b * cos + a * sin], -1).reshape(x.shape)
            else:
                a, b = x[..., : d // 2], x[..., d // 2:]
                y = np.concatenate([a * cos - b * sin, b * cos + a * sin], -1)
            y = y.reshape(x.shape[:2] + args[2].shape[2:])    # the layout the kernel writes
            out.append(y if rows is None else np.take(y, rows, axis=2))
        return out

    def row_count(self, s):
        return s["N"] * s["D"] // 16 if s.get("interleaved") else s["N"]

    def consts(self, s):
        return {} if s.get("interleaved") else {"W": s["D"] // 2}

    def bytes(self, s):
        from .kernels.rotary import bytes_moved
        return bytes_moved(s["B"], s["H"], s["Hkv"], s["N"], s["D"])


class LayerNorm(Workload):
    name = "layernorm"
    fields = ("R", "C")
    syntax = "RxC[,bf16|f16]  (H = residual + X, Y = layernorm(H) * W + B over each of R rows; no dropout)"
    pattern = Softmax.pattern
    default_shapes = ("16384x4096", "4096x16384")
    small_shapes = ("100x300", "33x1000,f16")

    def kernel(self, s):
        from .kernels.layernorm import layernorm_fwd
        return layernorm_fwd

    def inputs(self, s, rng):
        r, c, dt = s["R"], s["C"], s["dtype"]
        return [poisoned((r, c), dt), poisoned((r, c), dt), random_array((r, c), dt, rng),
                random_array((r, c), dt, rng, 2.0), random_array((c,), dt, rng), random_array((c,), dt, rng),
                1e-5, 0.0, 0, 0]

    def outputs(self, s):
        return [Output("Y", 0, s["dtype"], 0), Output("H", 1, s["dtype"], 0)]

    def reference(self, s, args, rows=None):
        x, res = (a if rows is None else a[rows] for a in args[2:4])
        dt = dtypes.of(s["dtype"])
        h = dt.round(res.astype(np.float64) + x.astype(np.float64)).astype(np.float64)  # H as stored
        mean = h.mean(-1, keepdims=True)
        y = (h - mean) / np.sqrt(((h - mean) ** 2).mean(-1, keepdims=True) + np.float32(args[6]))
        return [y * args[4].astype(np.float64) + args[5].astype(np.float64), h]

    def row_count(self, s):
        return s["R"]

    def bytes(self, s):
        from .kernels.layernorm import bytes_moved
        return bytes_moved(s["R"], s["C"], 2)

    def baseline(self, vendor):
        def setup(s, sets, framework):
            t, dev = framework
            dt = getattr(t, {"bf16": "bfloat16", "f16": "float16"}[s["dtype"]])
            r, c = s["R"], s["C"]
            xs = [[t.randn(r, c, dtype=dt, device=dev) for _ in range(2)] for _ in range(sets)]
            w, b = t.randn(c, dtype=dt, device=dev), t.randn(c, dtype=dt, device=dev)
            return "torch add + layer_norm", lambda i: t.nn.functional.layer_norm(xs[i][0] + xs[i][1], (c,), w, b)
        return _library(vendor, setup)


def _library(vendor: str, setup):
    """setup bound to torch on this machine's GPU of that vendor, or None where torch cannot reach one.
    (MLX on Apple is not wired in: torch's MPS is the Apple baseline.)"""
    try:
        import torch
    except ImportError:
        return None
    if vendor == "apple" and torch.backends.mps.is_available():
        dev, sync = "mps", torch.mps.synchronize
    elif vendor in ("nvidia", "amd") and torch.cuda.is_available() and (vendor == "amd") == bool(torch.version.hip):
        dev, sync = "cuda", torch.cuda.synchronize
    else:
        return None
    return lambda s, sets: (*setup(s, sets, (torch, dev)), sync)


WORKLOADS: dict[str, Workload] = {w.name: w for w in (Gemm(), GemmFp8(), Attention(), Softmax(), Rotary(), LayerNorm())}


def workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise KeyError(f"unknown kernel {name!r}; known: {', '.join(WORKLOADS)}")
    return WORKLOADS[name]
