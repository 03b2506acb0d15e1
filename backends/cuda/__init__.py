"""The CUDA backend: ThunderKittens-style headers (include/tiles_cuda), codegen, schedules, offline toolchain,
and the cupy runtime. Importing it registers "cuda" (an NVIDIA GPU, its own target), "cuda:sm_80" (the sm_80 code on a
newer GPU, as PTX the driver compiles) and "cuda-emu:sm_80" (the generated sm_80 code executed on the CPU, emu.py);
nothing heavy is imported until it is used."""
from __future__ import annotations

import numpy as np

from tiles import ir, tune
from tiles.backend import Backend, poll, register

from .emu import TARGETS as EMU_TARGETS, CudaEmu


class CudaBackend(Backend):
    kind = "device"

    def __init__(self, target: str | None = None):
        """target None: the device's own (sm_90a on Hopper, sm_80 on Ampere); else that target's code, which
        must be older than the device's."""
        self.name = f"cuda:{target}" if target else "cuda"
        self._target, self._runtime = target, None

    @property
    def target(self) -> str | None:
        from .runtime import probe
        return self._target or probe()[0]

    @property
    def device(self) -> str:
        if self.available() is not None:
            return "no CUDA device"
        import cupy
        return cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()

    def available(self) -> str | None:
        from .runtime import probe
        native, why = probe()
        if why or self._target is None:
            return why
        if native == self._target:
            return f"this device runs {native} code as the 'cuda' backend"
        return None

    @property
    def runtime(self):
        if self._runtime is None:
            from .runtime import Runtime
            self._runtime = Runtime(self.target)
        return self._runtime

    def precompile(self, k: ir.Kernel) -> None:
        """Compile k's cubin into the disk cache, not loading it (tiles.tune compiles candidates in parallel)."""
        from .runtime import cached_cubin
        rt = self.runtime
        cached_cubin(rt.generate(k).source, rt.target, rt.driver, rt.ptx)

    def asarray(self, a: np.ndarray):
        from .runtime import DeviceArray
        return DeviceArray(a)

    def finished(self, timeout_s: float) -> bool:
        """An event recorded behind the queued work on cupy's current stream (where launches on device arrays go),
        polled: a hung kernel cannot be stopped from the host, but it can be named instead of waited on forever."""
        import cupy
        done = cupy.cuda.Event(disable_timing=True)
        done.record(cupy.cuda.get_current_stream())
        return poll(lambda: done.done, timeout_s)

    def numpy(self, a) -> np.ndarray:
        from .runtime import DeviceArray
        if isinstance(a, DeviceArray):
            return a.numpy()
        if callable(getattr(a, "cpu", None)):      # torch: numpy has no bf16/fp8, so go through the bits
            import ml_dtypes
            import torch
            t = a.detach().cpu()
            narrow = {torch.bfloat16: ml_dtypes.bfloat16, torch.float8_e4m3fn: ml_dtypes.float8_e4m3fn,
                      torch.float8_e5m2: ml_dtypes.float8_e5m2}
            if t.dtype in narrow:
                return t.view(torch.int16 if t.element_size() == 2 else torch.uint8).numpy().view(narrow[t.dtype])
            return t.numpy()
        import cupy
        return cupy.asnumpy(a)

    def launch(self, kfn, args, **overrides) -> ir.Kernel:
        if any(isinstance(a, np.ndarray) for a in args):
            # host arrays (a kernel's numpy wrapper): run on device copies, then write every array back
            return self.call(kfn, *args, **overrides)
        overrides = tune.resolve(kfn, self, args, overrides)
        main = None
        for f, a, kw in self.steps(kfn, args, overrides):
            k = self.runtime.launch(f, a, kw)
            main = main or (k if f is kfn else None)
        return main

    # what tiles.backend.DevicePrepared asks of a device backend
    def current_device(self) -> int:
        return self.runtime.cupy.cuda.runtime.getDevice()

    def plan_step(self, k: ir.Kernel, args, device: int):
        return self.runtime.plan_launch(k, args, device)

    def issue(self, step, stream: int) -> None:
        self.runtime.issue(step, stream)

    def launch_stream(self, on_torch: bool, device: int) -> int:
        from .runtime import torch_stream
        return torch_stream(device) if on_torch else self.runtime.cupy.cuda.get_current_stream().ptr

    def torch_stream(self, device) -> int:
        from .runtime import torch_stream
        return torch_stream(device.index)

    def tensor_map(self, spec, address: int) -> np.ndarray:
        return self.runtime.tensor_map(spec, address).view(np.uint8)


register(CudaBackend())
register(CudaBackend("sm_80"))
for _t in EMU_TARGETS:
    register(CudaEmu(_t))
