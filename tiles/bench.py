"""What `tiles compare` and `tiles demo` run, and how they time it.

A workload is a shipped kernel with everything needed to run it as a user would: a shape language
(`4096x4096x4096`, `2x16/4x1024x128,causal`), fresh random inputs with poisoned outputs, the float64
reference, the FLOP count, and the vendor library that does the same job (the baseline of the speed ratio).

Timing: a few warm-up runs, then the median of many, each on the next of several input sets (rotating
inputs, so the caches start cold as they would in a model), measured with device events where there is a
device (CUDA and HIP through torch or cupy) and the host clock around a synchronize elsewhere.
"""
from __future__ import annotations

import logging
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
    the legacy stream). Runs are queued back to back and read after one synchronize. A launch from Python can
    take the host longer than a short kernel takes the GPU (tens to hundreds of microseconds through the
    argument checks), and an event pair around a run the host is still launching measures that wait too: so
    a spin kernel first holds the GPU for twice the host time the runs took to queue last time (the warm-up's
    median), and the runs then execute back to back behind it. Where a run was queued only after the spin and the
    runs before it could have been done (launches slower than the last batch's), it may have waited on the host:
    the batch runs again behind a spin sized from its own host time (twice at most; then its times stand, with a
    warning)."""

    HOST_GUESS_S = 300e-6   # host time per run before one was measured
    MAX_HOLD_S = 1.0
    CLOCK_HZ = 2e9          # spin cycles per second (the fastest clock; a slower one holds longer, harmlessly)

    def __init__(self):
        try:
            import torch
            if not torch.cuda.is_available():
                raise ImportError("torch sees no GPU")
            self._new = lambda: torch.cuda.Event(enable_timing=True)
            self._ms = lambda a, b: a.elapsed_time(b)
            self._spin = torch.cuda._sleep
            self.name = "torch events"
        except ImportError:
            import cupy
            self._new = cupy.cuda.Event
            self._ms = cupy.cuda.get_elapsed_time
            spin = cupy.RawKernel("extern \"C\" __global__ void tiles_hold(long long n) {"
                                  " const long long t0 = clock64(); while (clock64() - t0 < n) {} }", "tiles_hold")
            self._spin = lambda cycles: spin((1,), (1,), (np.int64(cycles),))
            self.name = "cupy events"
        self.host_s = self.HOST_GUESS_S

    def times(self, step, indices) -> list[float]:
        indices = list(indices)
        for attempt in range(3):
            hold = min(self.MAX_HOLD_S, 2.0 * len(indices) * self.host_s + 1e-3)
            start = time.perf_counter()
            self._spin(int(hold * self.CLOCK_HZ))
            pairs, host, queued = [], [], []
            for i in indices:
                t0 = time.perf_counter()
                a, b = self._new(), self._new()
                a.record()
                step(i)
                b.record()
                pairs.append((a, b))
                host.append(time.perf_counter() - t0)
                queued.append(time.perf_counter() - start)
            self.host_s = max(statistics.median(host), queued[-1] / len(indices))
            pairs[-1][1].synchronize()
            out = [self._ms(a, b) / 1e3 for a, b in pairs]
            # run k starts on the GPU, if it never idled, once the spin and the runs before it are done: queued
            # by then, it waited on nothing
            ahead = hold + np.cumsum([0.0] + out[:-1])
            late = sum(q > g for q, g in zip(queued, ahead))
            if not late:
                break
            if attempt == 2 or hold >= self.MAX_HOLD_S:
                logging.getLogger("tiles.bench").warning(
                    "device times may include host launch time: %d of %d runs were queued after the GPU could "
                    "have started them (%.1f ms to queue, a %.1f ms spin)", late, len(out), queued[-1] * 1e3,
                    hold * 1e3)
                break
        return out


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


COPY_BYTES = 1 << 30   # the device-to-device copy that measures the copy bandwidth: far beyond any cache


def copy_bandwidth(vendor: str, clock) -> tuple[str, Timing, float] | None:
    """(label, timing, bytes read + written) of a large device-to-device copy (torch copy_), the yardstick of
    the memory-bound kernels measured in the same run; None where torch reaches no GPU of that vendor."""
    lib = _library(vendor, lambda s, sets, fw: _copy_setup(fw))
    if lib is None:
        return None
    label, step, _ = lib({}, 1)
    return label, measure(step, clock=clock), 2.0 * COPY_BYTES


def _copy_setup(framework):
    t, dev = framework
    src = t.empty(COPY_BYTES, dtype=t.uint8, device=dev).random_()
    dst = t.empty_like(src)
    return f"device copy {COPY_BYTES >> 20} MiB (torch copy_)", lambda i: dst.copy_(src)


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

    def launches(self, s: dict, args: list) -> list[tuple]:
        """The launches of one run, in order, as (kernel, its arguments, its constants): one kernel over all
        of `args` unless a workload needs several (attention backward)."""
        return [(self.kernel(s), args, self.consts(s))]

    def runs(self, s: dict, args: list) -> list[tuple]:
        """launches(), with the main kernel's constants and options overridden by s["set"] (`tiles compare
        --set`): a configuration other than the kernel's own, timed and checked like it."""
        # the main kernel runs its configured default unless told otherwise: not the tune cache's winner, which
        # compare times in a row of its own (tiles.tune)
        main, extra = self.kernel(s), {"tune": False, **(s.get("set") or {})}
        return [(k, a, {**c, **extra} if k is main else c) for k, a, c in self.launches(s, args)]

    def main(self, s: dict, args: list) -> tuple:
        """The launch of `kernel(s)`: what `inspect` and the compile-only rows describe."""
        return next(x for x in self.runs(s, args) if x[0] is self.kernel(s))

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

    def baselines(self, vendor: str) -> list:
        """What the vendor ships for the same job, where torch reaches it here: functions
        (s, sets) -> (label, step(i), sync) over `sets` fresh device input sets, the first the one the issue
        compares against; [] where none runs here."""
        return []

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
    flags = ("bt", "acc")
    syntax = "MxNxK[,bt][,acc][,bf16|f16]  (bt: B given as N x K; acc: C (f32, from 0) += A @ B, which may split K)"
    pattern = r"(?P<M>\d+)x(?P<N>\d+)x(?P<K>\d+)(?:,(?P<flags>[\w,]+))?"
    default_shapes = ("4096x4096x4096", "8192x8192x8192")
    small_shapes = ("200x136x72", "96x80x40,bt")

    def kernel(self, s):
        from .kernels.gemm import gemm
        return gemm

    def inputs(self, s, rng):
        m, n, k, dt = s["M"], s["N"], s["K"], s["dtype"]
        b = random_array((n, k) if s.get("bt") else (k, n), dt, rng)
        # acc: C accumulates from 0 (an output left unwritten stays 0 and fails the check)
        c = np.zeros((m, n), np.float32) if s.get("acc") else poisoned((m, n), dt)
        return [c, random_array((m, k), dt, rng), b]

    def outputs(self, s):
        # the product is exact in f32; the one rounding that matters is the store to the output dtype
        return [Output("C", 0, "f32" if s.get("acc") else s["dtype"], 0)]

    def reference(self, s, args, rows=None):
        a, b = (x.astype(np.float64) for x in (args[1] if rows is None else args[1][rows], args[2]))
        return [a @ (b.T if s.get("bt") else b)]

    def row_count(self, s):
        return s["M"]

    def consts(self, s):
        return {"trans_b": bool(s.get("bt")), **({"accumulate": True} if s.get("acc") else {})}

    def flops(self, s):
        from .kernels.gemm import flops
        return flops(s["M"], s["N"], s["K"])

    def baselines(self, vendor):
        def setup(s, sets, framework):
            t, dev = framework
            dt = _torch_dtype(t, s)
            ab = [(t.randn(s["M"], s["K"], dtype=dt, device=dev),
                   t.randn(s["N"], s["K"], dtype=dt, device=dev) if s.get("bt")
                   else t.randn(s["K"], s["N"], dtype=dt, device=dev)) for _ in range(sets)]
            label = {"nvidia": "cuBLAS", "amd": "hipBLASLt", "apple": "MPS"}[vendor] + " (torch.matmul)"
            if s.get("bt"):
                return label, lambda i: t.matmul(ab[i][0], ab[i][1].T)
            return label, lambda i: t.matmul(*ab[i])
        return _libraries(vendor, setup)


class Attention(Workload):
    name = "attention"
    fields = ("B", "H", "Hkv", "N", "D")
    flags = ("causal",)
    syntax = "BxH[/Hkv]xNxD[,causal][,bf16|f16]  (Hkv: key/value heads for GQA; D 32, 64, 96, 128 or 256)"
    pattern = r"(?P<B>\d+)x(?P<H>\d+)(?:/(?P<Hkv>\d+))?x(?P<N>\d+)x(?P<D>\d+)(?:,(?P<flags>[\w,]+))?"
    default_shapes = ("16x16x4096x128", "16x16x4096x128,causal", "4x32/8x8192x128,causal")
    small_shapes = ("1x2x80x64,causal", "1x4/2x72x128")

    def kernel(self, s):
        from .kernels.attention import attention_fwd
        return attention_fwd

    def head_dims(self):
        from .kernels.attention import HEAD_DIMS
        return HEAD_DIMS

    def check(self, s):
        s.setdefault("Hkv", s.get("H"))
        super().check(s)
        if s["H"] % s["Hkv"]:
            raise ValueError(f"{self.name}: H={s['H']} is not a multiple of Hkv={s['Hkv']}")
        if s["D"] not in self.head_dims():
            raise ValueError(f"{self.name}: head dim D={s['D']}; the kernel is configured for "
                             f"{', '.join(map(str, self.head_dims()))}")

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

    def baselines(self, vendor):
        def qkv_sets(s, sets, t, dev):
            dt = _torch_dtype(t, s)
            b, h, hk, n, d = s["B"], s["H"], s["Hkv"], s["N"], s["D"]
            return [tuple(t.randn(b, x, n, d, dtype=dt, device=dev) for x in (h, hk, hk)) for _ in range(sets)]

        def setup(s, sets, framework):
            t, dev = framework
            qkv = qkv_sets(s, sets, t, dev)
            sdpa = t.nn.functional.scaled_dot_product_attention
            causal, gqa = bool(s.get("causal")), s["Hkv"] != s["H"]
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

        def flex(s, sets, framework):   # the strongest peer: attention generated by Triton (torch.compile)
            t, dev = framework
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            qkv, n, gqa = qkv_sets(s, sets, t, dev), s["N"], s["Hkv"] != s["H"]
            mask = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, n, n, device=dev) \
                if s.get("causal") else None
            fn = t.compile(flex_attention, dynamic=False)
            fn(*qkv[0], block_mask=mask, enable_gqa=gqa)   # compiled here, outside the timed region
            return "FlexAttention (torch.compile)", lambda i: fn(*qkv[i], block_mask=mask, enable_gqa=gqa)
        return _libraries(vendor, setup, *((flex,) if vendor in ("nvidia", "amd") else ()))


class BatchedGemm(Gemm):
    """The same kernel on (batch, M, K) x (batch, K, N) arrays: the grid's third dim walks the batch."""
    name = "bmm"
    fields = ("B", "M", "N", "K")
    flags = ("bt",)
    syntax = "BxMxNxK[,bt][,bf16|f16]  (a batch of B GEMMs; bt: each B given as N x K)"
    pattern = r"(?P<B>\d+)x(?P<M>\d+)x(?P<N>\d+)x(?P<K>\d+)(?:,(?P<flags>[\w,]+))?"
    default_shapes = ("64x1024x1024x512", "16x2048x2048x2048")
    small_shapes = ("3x70x40x50", "2x33x48x24,bt")

    def inputs(self, s, rng):
        bsz, m, n, k, dt = s["B"], s["M"], s["N"], s["K"], s["dtype"]
        b = random_array((bsz, n, k) if s.get("bt") else (bsz, k, n), dt, rng)
        return [poisoned((bsz, m, n), dt), random_array((bsz, m, k), dt, rng), b]

    def reference(self, s, args, rows=None):
        a, b = (x.astype(np.float64) for x in (args[1] if rows is None else args[1][:, rows], args[2]))
        return [a @ (b.transpose(0, 2, 1) if s.get("bt") else b)]

    def outputs(self, s):
        return [Output("C", 0, s["dtype"], 1)]

    def row_count(self, s):
        return s["M"]

    def flops(self, s):
        return s["B"] * super().flops(s)

    def baselines(self, vendor):
        def setup(s, sets, framework):
            t, dev = framework
            dt = _torch_dtype(t, s)
            bsz, m, n, k = s["B"], s["M"], s["N"], s["K"]
            ab = [(t.randn(bsz, m, k, dtype=dt, device=dev),
                   t.randn(bsz, n, k, dtype=dt, device=dev) if s.get("bt") else
                   t.randn(bsz, k, n, dtype=dt, device=dev)) for _ in range(sets)]
            label = {"nvidia": "cuBLAS", "amd": "hipBLASLt", "apple": "MPS"}[vendor] + " (torch.bmm)"
            if s.get("bt"):
                return label, lambda i: t.bmm(ab[i][0], ab[i][1].transpose(1, 2))
            return label, lambda i: t.bmm(*ab[i])
        return _libraries(vendor, setup)


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

    def baselines(self, vendor):
        if vendor != "nvidia":
            return []

        def setup(s, sets, framework):
            t, dev = framework
            one = t.tensor(1.0, device=dev)
            ab = [(t.randn(s["M"], s["K"], device=dev).to(t.float8_e4m3fn),
                   t.randn(s["N"], s["K"], device=dev).to(t.float8_e4m3fn)) for _ in range(sets)]
            return "cuBLASLt (torch._scaled_mm)", lambda i: t._scaled_mm(ab[i][0], ab[i][1].T, one, one,
                                                                          out_dtype=t.bfloat16)
        return _libraries(vendor, setup)


class RowWorkload(Workload):
    """Work over each of R rows of C elements, by a one-pass kernel that keeps a row on chip where it fits
    (`plan` gives its constants) and else a two-pass kernel over column blocks."""
    fields = ("R", "C")
    pattern = r"(?P<R>\d+)x(?P<C>\d+)(?:,(?P<flags>[\w,]+))?"
    small_shapes = ("100x300", "33x1000,f16", "20x96")

    def kernels(self):
        """(the planning function, the two-pass kernel, the one-pass kernel)."""
        raise NotImplementedError

    def plan(self, s):
        plan, _, _ = self.kernels()
        return plan(s["R"], s["C"])

    def kernel(self, s):
        _, two_pass, one_pass = self.kernels()
        return two_pass if self.plan(s) is None else one_pass

    def consts(self, s):
        return self.plan(s) or {}

    def row_count(self, s):
        return s["R"]


class Softmax(RowWorkload):
    name = "softmax"
    syntax = "RxC[,bf16|f16]  (softmax over each of R rows of C elements)"
    default_shapes = ("16384x4096", "4096x32768")

    def kernels(self):
        from .kernels import softmax
        return softmax.row_plan, softmax.softmax_fwd, softmax.softmax_rows

    def inputs(self, s, rng):
        return _row_views(self.plan(s), [poisoned((s["R"], s["C"]), s["dtype"]),
                                         random_array((s["R"], s["C"]), s["dtype"], rng, 3.0)])

    def outputs(self, s):
        return [Output("Y", 0, s["dtype"], 0)]

    def reference(self, s, args, rows=None):
        x = _rows_of(args[1], s["C"], rows)
        e = np.exp(x - x.max(-1, keepdims=True))
        return [_as_view(e / e.sum(-1, keepdims=True), args[0])]

    def bytes(self, s):
        from .kernels.softmax import bytes_moved
        return bytes_moved(s["R"], s["C"], 2)

    def baselines(self, vendor):
        def make(s, sets, t, dev):
            dt = _torch_dtype(t, s)
            return (lambda x: t.softmax(x, -1)), [(t.randn(s["R"], s["C"], dtype=dt, device=dev),)
                                                   for _ in range(sets)]
        return _eager_and_compiled(vendor, "softmax", make)


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
        from .kernels.rotary import PAIRS
        return s["N"] * s["D"] // (2 * PAIRS) if s.get("interleaved") else s["N"]   # rows of the views

    def consts(self, s):
        return {} if s.get("interleaved") else {"W": s["D"] // 2}

    def bytes(self, s):
        from .kernels.rotary import bytes_moved
        return bytes_moved(s["B"], s["H"], s["Hkv"], s["N"], s["D"])

    def baselines(self, vendor):
        def make(s, sets, t, dev):
            dt = _torch_dtype(t, s)
            b, h, hk, n, d = s["B"], s["H"], s["Hkv"], s["N"], s["D"]
            cos, sin = t.randn(n, d // 2, dtype=dt, device=dev), t.randn(n, d // 2, dtype=dt, device=dev)

            def rotate(x):
                if s.get("interleaved"):
                    a, b = x.unflatten(-1, (-1, 2)).unbind(-1)
                    return t.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)
                a, b = x.chunk(2, -1)
                return t.cat([a * cos - b * sin, b * cos + a * sin], -1)
            return (lambda q, k: (rotate(q), rotate(k))), [
                (t.randn(b, h, n, d, dtype=dt, device=dev), t.randn(b, hk, n, d, dtype=dt, device=dev))
                for _ in range(sets)]
        return _eager_and_compiled(vendor, "rotary on q and k", make)


class LayerNorm(RowWorkload):
    name = "layernorm"
    syntax = "RxC[,bf16|f16]  (H = residual + X, Y = layernorm(H) * W + B over each of R rows; no dropout)"
    default_shapes = ("16384x4096", "4096x16384")

    def kernels(self):
        from .kernels import layernorm
        return layernorm.launch_plan, layernorm.layernorm_fwd, layernorm.layernorm_rows

    def inputs(self, s, rng):
        r, c, dt, plan = s["R"], s["C"], s["dtype"], self.plan(s)
        rows = _row_views(plan, [poisoned((r, c), dt), poisoned((r, c), dt), random_array((r, c), dt, rng),
                                 random_array((r, c), dt, rng, 2.0)])
        wb = [random_array((c,), dt, rng), random_array((c,), dt, rng)]
        if plan is None:
            return rows + wb + [1e-5, 0.0, 0, 0]      # p, seed, offset: no dropout
        return rows + [x.reshape(-1, plan["K"]) for x in wb] + [1e-5]

    def outputs(self, s):
        return [Output("Y", 0, s["dtype"], 0), Output("H", 1, s["dtype"], 0)]

    def reference(self, s, args, rows=None):
        x, res = (_rows_of(a, s["C"], rows) for a in args[2:4])
        w, b = (a.reshape(-1).astype(np.float64) for a in args[4:6])
        dt = dtypes.of(s["dtype"])
        h = dt.round(res + x).astype(np.float64)   # H as stored
        mean = h.mean(-1, keepdims=True)
        y = (h - mean) / np.sqrt(((h - mean) ** 2).mean(-1, keepdims=True) + np.float32(args[6]))
        return [_as_view(y * w + b, args[0]), _as_view(h, args[1])]

    def bytes(self, s):
        from .kernels.layernorm import bytes_moved
        return bytes_moved(s["R"], s["C"], 2)

    def baselines(self, vendor):
        def make(s, sets, t, dev):
            dt = _torch_dtype(t, s)
            r, c = s["R"], s["C"]
            w, b = t.randn(c, dtype=dt, device=dev), t.randn(c, dtype=dt, device=dev)

            def fused(x, res):   # H and Y, as ours returns them
                h = x + res
                return h, t.nn.functional.layer_norm(h, (c,), w, b)
            return fused, [(t.randn(r, c, dtype=dt, device=dev), t.randn(r, c, dtype=dt, device=dev))
                           for _ in range(sets)]
        return _eager_and_compiled(vendor, "add + layer_norm", make)


class RMSNorm(RowWorkload):
    name = "rmsnorm"
    syntax = "RxC[,bf16|f16]  (Y = X / sqrt(mean(X^2) + eps) * W over each of R rows, and RSTD per row)"
    default_shapes = ("16384x4096", "4096x16384")

    def kernels(self):
        from .kernels import rmsnorm
        return rmsnorm.launch_plan, rmsnorm.rmsnorm_fwd, rmsnorm.rmsnorm_rows

    def inputs(self, s, rng):
        r, c, dt, plan = s["R"], s["C"], s["dtype"], self.plan(s)
        y, x = _row_views(plan, [poisoned((r, c), dt), random_array((r, c), dt, rng, 2.0)])
        w = random_array((c,), dt, rng)
        if plan is None:
            return [y, poisoned((r,), "f32"), x, w, 1e-6]
        return [y, poisoned((r, 1), "f32"), x, w.reshape(-1, plan["K"]), 1e-6]   # RSTD a column, as the kernel stores it

    def outputs(self, s):
        return [Output("Y", 0, s["dtype"], 0), Output("RSTD", 1, "f32", 0)]

    def reference(self, s, args, rows=None):
        x = _rows_of(args[2], s["C"], rows)
        rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + np.float32(args[4]))
        return [_as_view(x * rstd * args[3].reshape(-1).astype(np.float64), args[0]), _as_view(rstd, args[1])]

    def bytes(self, s):
        from .kernels.rmsnorm import bytes_moved
        return bytes_moved(s["R"], s["C"], 2)

    def baselines(self, vendor):
        def make(s, sets, t, dev):
            dt = _torch_dtype(t, s)
            w = t.randn(s["C"], dtype=dt, device=dev)
            return (lambda x: t.nn.functional.rms_norm(x, (s["C"],), w, 1e-6)), [
                (t.randn(s["R"], s["C"], dtype=dt, device=dev),) for _ in range(sets)]
        return _eager_and_compiled(vendor, "rms_norm", make)


class AttentionBwd(Attention):
    """dQ, dK, dV from Q, K, V, O, dO and the forward's log-sum-exp: three launches (kernels/attention_bwd.py).

    O and LSE are stand-ins with the forward's statistics, not its outputs (those would cost the host a whole
    forward pass at the benchmark shapes): LSE_i = log(keys row i sees) + scale^2 |q_i|^2 / 2, the log of the
    expected sum of exp(s_ij) over normal keys, so that each row of P sums to about 1; O random. The backward
    is a function of what it is handed, and the float64 reference computes that function (on sampled rows:
    dQ's query rows and dK's, dV's key rows need only the given LSE, no whole score matrix)."""
    name = "attention_bwd"
    syntax = "BxH[/Hkv]xNxD[,causal][,bf16|f16]  (backward of attention: dQ, dK, dV; Hkv: GQA; D 32 to 128)"
    default_shapes = ("4x32x8192x128", "4x32x8192x128,causal", "16x16/4x4096x64,causal")
    small_shapes = ("1x2x80x64,causal", "1x4/2x72x128")

    def kernel(self, s):
        from .kernels.attention_bwd import attention_bwd
        return attention_bwd

    def head_dims(self):
        from .kernels.attention_bwd import HEAD_DIMS
        return HEAD_DIMS

    def inputs(self, s, rng):
        b, h, hk, n, d, dt = s["B"], s["H"], s["Hkv"], s["N"], s["D"], s["dtype"]
        q = random_array((b, h, n, d), dt, rng)
        scale = 1.0 / math.sqrt(d)
        seen = np.arange(1, n + 1) if s.get("causal") else np.full(n, n)
        lse = np.log(seen) + 0.5 * scale ** 2 * np.square(q.astype(np.float64)).sum(-1)
        return [poisoned((b, h, n, d), dt), poisoned((b, hk, n, d), dt), poisoned((b, hk, n, d), dt),
                poisoned((b, h, n, d), "f32"), poisoned((b, h, n), "f32"),              # dQ accumulator, Delta
                q, random_array((b, hk, n, d), dt, rng), random_array((b, hk, n, d), dt, rng),
                random_array((b, h, n, d), dt, rng, 0.3), random_array((b, h, n, d), dt, rng),   # O, dO
                lse.astype(np.float32), scale, poisoned((b, h, n), "f32")]                      # LSE2 last

    def launches(self, s, args):
        from .kernels import attention_bwd as ab
        dq, dk, dv, acc, delta, q, k, v, o, do, lse, scale, lse2 = args
        d, causal = s["D"], bool(s.get("causal"))
        return [(ab.attention_bwd_pre, [delta, lse2, acc, o, do, lse, scale], {"D": d}),
                (ab.attention_bwd, [dk, dv, acc, q, k, v, do, lse2, delta, scale], {"D": d, "causal": causal}),
                (ab.attention_bwd_dq, [dq, acc], {"D": d})]

    def outputs(self, s):
        return [Output("dQ", 0, s["dtype"], 2), Output("dK", 1, s["dtype"], 2), Output("dV", 2, s["dtype"], 2)]

    def reference(self, s, args, rows=None):
        q, k, v, o, do = (a.astype(np.float64) for a in args[5:10])
        lse, scale = args[10].astype(np.float64), float(np.float32(args[11]))
        n, g = s["N"], s["H"] // s["Hkv"]
        rows = np.arange(n) if rows is None else np.asarray(rows)
        grouped = lambda x: x.reshape(x.shape[0], -1, g, *x.shape[2:])   # noqa: E731  query heads by kv head
        each = lambda x: x[:, :, None]                                    # noqa: E731  a kv head for its group
        t = lambda x: x.swapaxes(-1, -2)                                  # noqa: E731
        delta = grouped((do * o).sum(-1))                                 # (B, Hkv, G, N)
        # seen[r, i]: query row rows[r] sees key i / key row rows[r] is seen by query i
        sees = np.arange(n)[None, :] <= rows[:, None] if s.get("causal") else np.ones((len(rows), n), bool)
        seen = np.arange(n)[None, :] >= rows[:, None] if s.get("causal") else sees
        # query rows: P, dS (B, Hkv, G, rows, N); dQ = scale dS K
        p = np.where(sees, np.exp(grouped(q[:, :, rows]) @ t(each(k)) * scale - grouped(lse[:, :, rows])[..., None]),
                     0.0)
        ds = p * (grouped(do[:, :, rows]) @ t(each(v)) - delta[..., rows, None])
        dq = scale * ds @ each(k)
        # key rows: P^T, dS^T (B, Hkv, G, rows, N); dV = P^T dO, dK = scale dS^T Q, summed over the group
        p = np.where(seen, np.exp(each(k[:, :, rows]) @ t(grouped(q)) * scale - grouped(lse)[..., None, :]), 0.0)
        ds = p * (each(v[:, :, rows]) @ t(grouped(do)) - delta[..., None, :])
        return [dq.reshape(q.shape[0], q.shape[1], len(rows), q.shape[3]), scale * (ds @ grouped(q)).sum(2),
                (p @ grouped(do)).sum(2)]

    def flops(self, s):
        from .kernels.attention_bwd import flops
        return flops(s["B"], s["H"], s["N"], s["D"], bool(s.get("causal")))

    def baselines(self, vendor):
        """Only the backward is timed: each input set's forward runs once, outside the timed region."""
        def setup(backend):
            def run(s, sets, framework):
                t, dev = framework
                dt = _torch_dtype(t, s)
                b, h, hk, n, d = s["B"], s["H"], s["Hkv"], s["N"], s["D"]
                sdpa = t.nn.functional.scaled_dot_product_attention
                graphs = []
                for _ in range(sets):
                    qkv = [t.randn(b, x, n, d, dtype=dt, device=dev, requires_grad=True) for x in (h, hk, hk)]
                    if backend is None:
                        out = sdpa(*qkv, is_causal=bool(s.get("causal")), enable_gqa=hk != h)
                    else:
                        from torch.nn.attention import sdpa_kernel
                        with sdpa_kernel(getattr(t.nn.attention.SDPBackend, backend)):
                            out = sdpa(*qkv, is_causal=bool(s.get("causal")), enable_gqa=hk != h)
                    graphs.append((out, qkv, t.randn_like(out)))

                def step(i):
                    out, qkv, do = graphs[i]
                    return t.autograd.grad(out, qkv, do, retain_graph=True)
                step(0)   # a backend that cannot take the shape fails here, before timing
                label = {"CUDNN_ATTENTION": "cuDNN SDPA bwd", "FLASH_ATTENTION": "flash SDPA bwd"}.get(
                    backend, "torch SDPA bwd")
                return f"{label} (torch)", step
            return run
        if vendor == "nvidia":
            return _libraries(vendor, setup("CUDNN_ATTENTION"), setup("FLASH_ATTENTION"))
        return _libraries(vendor, setup(None))


def _row_views(plan: dict | None, arrays: list) -> list:
    """(R, C) arrays as the one-pass row kernels take them, (R, C/K, K), where a plan says so."""
    return arrays if plan is None else [a.reshape(a.shape[0], -1, plan["K"]) for a in arrays]


def _rows_of(a: np.ndarray, cols: int, rows=None) -> np.ndarray:
    """float64 (rows, C) of an (R, C) array or its (R, C/K, K) view, all rows or the sampled ones."""
    return (a if rows is None else a[rows]).reshape(-1, cols).astype(np.float64)


def _as_view(x: np.ndarray, like: np.ndarray) -> np.ndarray:
    """(rows, C) reference values laid out as the output `like` is (2-D, or the (R, C/K, K) view)."""
    return x.reshape((x.shape[0],) + like.shape[1:])


def _eager_and_compiled(vendor: str, what: str, make) -> list:
    """The same torch function eager and under torch.compile; make(s, sets, torch, device) -> (fn, argument
    tuples per input set). The compile happens at setup, outside the timed region."""
    def setup(compiled):
        def run(s, sets, framework):
            t, dev = framework
            fn, argsets = make(s, sets, t, dev)
            if compiled:
                fn = t.compile(fn, dynamic=False)
                fn(*argsets[0])
            return f"torch{'.compile' if compiled else ' eager'} ({what})", lambda i: fn(*argsets[i])
        return run
    return _libraries(vendor, setup(False), setup(True))


def _torch_dtype(torch, s: dict):
    """The torch dtype of a shape's 16-bit dtype."""
    return getattr(torch, {"bf16": "bfloat16", "f16": "float16"}[s["dtype"]])


def _libraries(vendor: str, *setups) -> list:
    return [x for x in (_library(vendor, f) for f in setups) if x is not None]


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


WORKLOADS: dict[str, Workload] = {w.name: w for w in (Gemm(), BatchedGemm(), GemmFp8(), Attention(), AttentionBwd(),
                                                       Softmax(), Rotary(), LayerNorm(), RMSNorm())}


def workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise KeyError(f"unknown kernel {name!r}; known: {', '.join(WORKLOADS)}")
    return WORKLOADS[name]
