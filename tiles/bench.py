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

from .testing import poisoned, random_array, tolerance

# ---------------------------------------------------------------- timing

ROTATE_BYTES = 512 << 20   # input sets rotated through add up to this much (more than any L2 / Infinity Cache)
MAX_SETS = 16


def input_sets(bytes_per_set: int) -> int:
    """How many input sets to rotate through so that consecutive runs do not find their inputs in cache."""
    return max(1, min(MAX_SETS, math.ceil(ROTATE_BYTES / max(bytes_per_set, 1))))


class HostClock:
    """Wall time between two synchronizations of the device (or none, on the CPU)."""
    name = "host clock"

    def __init__(self, sync: Callable[[], None] = lambda: None):
        self.sync = sync

    def start(self):
        self.sync()
        self.t0 = time.perf_counter()

    def stop(self) -> float:
        self.sync()
        return time.perf_counter() - self.t0


class EventClock:
    """GPU time between two events on the default stream (torch or cupy: both record on the legacy stream)."""

    def __init__(self):
        try:
            import torch
            if not torch.cuda.is_available():
                raise ImportError("torch has no GPU")
            self._new = lambda: torch.cuda.Event(enable_timing=True)
            self._ms = lambda a, b: a.elapsed_time(b)
            self.name = "torch events"
        except ImportError:
            import cupy
            self._new = cupy.cuda.Event
            self._ms = cupy.cuda.get_elapsed_time
            self.name = "cupy events"

    def start(self):
        self.a, self.b = self._new(), self._new()
        self.a.record()

    def stop(self) -> float:
        self.b.record()
        self.b.synchronize()
        return self._ms(self.a, self.b) / 1e3


@dataclass
class Timing:
    median_s: float
    runs: int
    sets: int
    clock: str


def measure(step: Callable[[int], object], *, sets: int = 1, clock=None, warmup: int = 3,
            budget_s: float = 1.0, min_runs: int = 5, max_runs: int = 200, progress=None) -> Timing:
    """Median time of step(i), i cycling over `sets` input sets, after warm-up; about budget_s of runs."""
    clock = clock or HostClock()
    for i in range(warmup):
        step(i % sets)
    clock.start()
    step(warmup % sets)
    first = clock.stop()
    runs = max(min_runs, min(max_runs, int(budget_s / max(first, 1e-7))))
    samples = []
    for i in range(runs):
        clock.start()
        step(i % sets)
        samples.append(clock.stop())
        if progress is not None:
            progress(1)
    return Timing(statistics.median(samples), runs, sets, clock.name)


# ---------------------------------------------------------------- workloads

@dataclass
class Output:
    name: str
    index: int        # position among the kernel's arguments
    tol_dtype: str    # the dtype whose tolerance applies


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

    def inputs(self, s: dict, rng: np.random.Generator) -> list:
        raise NotImplementedError

    def outputs(self, s: dict) -> list[Output]:
        raise NotImplementedError

    def reference(self, s: dict, args: list) -> list[np.ndarray]:
        raise NotImplementedError

    def consts(self, s: dict) -> dict:
        return {}

    def flops(self, s: dict) -> float:
        raise NotImplementedError

    def baseline(self, vendor: str):
        """The vendor library doing the same job, where torch reaches it here: a function
        (s, sets) -> (label, step(i), sync) over `sets` fresh device input sets; else None."""
        return None

    def check_outputs(self, s: dict, args: list) -> list[tuple[str, float, float, float]]:
        """(name, max |err|, relative error, tolerance) per output against the float64 reference."""
        from .testing import errors
        out = []
        for o, ref in zip(self.outputs(s), self.reference(s, args)):
            max_abs, rel = errors(args[o.index], ref)
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

    @property
    def kernel(self):
        from .kernels.gemm import gemm
        return gemm

    def inputs(self, s, rng):
        m, n, k, dt = s["M"], s["N"], s["K"], s["dtype"]
        b = random_array((n, k) if s.get("bt") else (k, n), dt, rng)
        return [poisoned((m, n), dt), random_array((m, k), dt, rng), b]

    def outputs(self, s):
        # the product is exact in f32; the one rounding that matters is the store to the output dtype
        return [Output("C", 0, s["dtype"])]

    def reference(self, s, args):
        a, b = (x.astype(np.float64) for x in args[1:])
        return [a @ (b.T if s.get("bt") else b)]

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

    @property
    def kernel(self):
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
        return [Output("O", 0, s["dtype"]), Output("LSE", 1, "f32")]

    def reference(self, s, args):
        q, k, v = (x.astype(np.float64) for x in args[2:5])
        rep = s["H"] // s["Hkv"]
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
        sc = np.einsum("bhid,bhjd->bhij", q, k) * np.float32(args[5])
        if s.get("causal"):
            n = sc.shape[-1]
            sc = np.where(np.tril(np.ones((n, n), bool)), sc, -np.inf)
        mx = sc.max(-1, keepdims=True)
        p = np.exp(sc - mx)
        den = p.sum(-1, keepdims=True)
        return [np.einsum("bhij,bhjd->bhid", p / den, v), (np.log(den) + mx)[..., 0]]

    def consts(self, s):
        return {"D": s["D"], "causal": bool(s.get("causal"))}

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


WORKLOADS: dict[str, Workload] = {w.name: w for w in (Gemm(), Attention())}


def workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise KeyError(f"unknown kernel {name!r}; known: {', '.join(WORKLOADS)}")
    return WORKLOADS[name]
