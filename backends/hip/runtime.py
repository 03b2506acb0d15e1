"""The "hip" backend: generated HIP compiled by hiprtc and launched through hip-python on an AMD GPU.

hip-python imports without ROCm, and its calls raise RuntimeError when libamdhip64.so is missing: that is
how `available()` tells there is no device. A kernel's code object comes from hiprtc in a child process
(toolchain.compile_hiprtc: a compiler crash is an exception here) and is cached on disk under
$TILES_CACHE/hip (default ~/.cache/tiles/hip), keyed by the source, the header library, the options and
hiprtc's version. Launches go on torch's current stream when a torch tensor is among the arguments (torch
for ROCm), else on the null stream, and return without waiting: the stream orders what follows, as on CUDA.
Nothing here has run on hardware (none was available): the argument packing, the stream choice and the
cache are unit-tested with fakes (tests/test_hip_runtime.py).
"""
from __future__ import annotations

import ctypes
import struct

import numpy as np

from tiles import backend, diskcache, ir
from tiles.backend import is_torch

from . import launch, toolchain


def _hip():
    try:
        from hip import hip, hiprtc  # noqa: F401
    except ImportError:
        return None, "hip-python is not installed (pip install 'tiles[hip]')"
    try:
        err, n = hip.hipGetDeviceCount()
    except RuntimeError as e:   # no libamdhip64.so: no ROCm runtime, no device
        return None, f"no ROCm runtime ({e})"
    if err != hip.hipError_t.hipSuccess or n == 0:
        return None, "no AMD GPU visible to HIP"
    return (hip, hiprtc), None


def _check(result):
    """hip-python answers (status, *values): the values (one, a tuple of several, or None); raises on a failure."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if getattr(err, "value", err) != 0:
        raise RuntimeError(f"HIP call failed: {err}")
    return values[0] if len(values) == 1 else (tuple(values) or None)


# ---- what a launch is made of (pure Python: tested without a device) ----------------------------------------

def pointer(a) -> int:
    if not callable(getattr(a, "data_ptr", None)):
        raise TypeError(f"a {type(a).__name__} is not a device array: the hip backend takes torch tensors on ROCm")
    return int(a.data_ptr())


class _ShapeOnly:
    """Shape, strides (bytes) and size of a torch tensor, as launch.dims_of reads a numpy array's."""

    def __init__(self, a):
        self.ndim, self.shape = a.dim(), tuple(a.shape)
        self.itemsize = a.element_size()
        self.strides = tuple(s * self.itemsize for s in a.stride())
        self.nbytes = a.numel() * self.itemsize


ARG_BYTES = {"data": 8, "dims": launch.GL_DIMS.itemsize, "scalar": 4}   # a pointer, the int32 gl_dims, an int/float


def kernarg_layout(g) -> list[tuple[int, int]]:
    """(offset, size) of each kernel argument in the buffer, each at its natural alignment (8 for pointers, 4 for
    ints, floats and the int32 dims struct): what the code object's metadata declares (`.args`; checked against
    clang's for every kernel in tests/test_hip_compile.py)."""
    out, end = [], 0
    for _, _, kind, _ in g.params:
        align = 8 if kind == "data" else 4
        offset = -(-end // align) * align
        out.append((offset, ARG_BYTES[kind]))
        end = offset + ARG_BYTES[kind]
    return out


def kernargs(g, args) -> bytes:
    """The kernel's argument buffer (kernarg_layout): for each global its pointer and then its gl_dims, then the
    scalars."""
    by_param = dict(zip(map(id, g.kernel.params), args))
    layout = kernarg_layout(g)
    buf = bytearray(layout[-1][0] + layout[-1][1] if layout else 0)
    for (ctype, _, kind, p), (offset, size) in zip(g.params, layout):
        a = by_param[id(p)]
        if kind == "data":
            blob = pointer(a).to_bytes(8, "little")
        elif kind == "dims":
            blob = launch.dims_of(p, _ShapeOnly(a)).tobytes()
        else:
            blob = (np.float32(a) if ctype == "float" else np.int32(a)).tobytes()
        buf[offset:offset + size] = blob
    return bytes(buf)


class HipLaunch:
    """A planned launch: the function, grid, block and LDS bytes, and the kernel arguments packed once (kernargs)
    into memory HIP reads when it enqueues; slots: (byte offset, argument position, None) of each array's
    address, which a prepared launch rewrites (tiles.backend.DevicePrepared)."""

    def __init__(self, function, grid: tuple, threads: int, lds_bytes: int, packed: bytes, slots):
        self.function, self.grid, self.threads, self.lds_bytes, self.slots = function, grid, threads, lds_bytes, slots
        self.raw = ctypes.create_string_buffer(packed, len(packed))
        self.size = ctypes.c_size_t(len(packed))
        # HIP_LAUNCH_PARAM_BUFFER_POINTER, the packed arguments, HIP_LAUNCH_PARAM_BUFFER_SIZE, its size, END
        self.extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(self.raw), 2, ctypes.addressof(self.size), 3)

    def set(self, offset: int, address: int) -> None:
        struct.pack_into("<Q", self.raw, offset, address)


def address_slots(g) -> list[tuple[int, int, None]]:
    """(byte offset, argument position, None) of each array's address in the kernel argument buffer."""
    position = {id(p): i for i, p in enumerate(g.kernel.params)}
    return [(offset, position[id(p)], None) for (_, _, kind, p), (offset, _) in zip(g.params, kernarg_layout(g))
            if kind == "data"]


def torch_stream() -> int:
    """torch's current stream on its current device, a raw hipStream_t (torch for ROCm keeps the CUDA names)."""
    import torch
    return torch.cuda.current_stream().cuda_stream


def stream_for(args) -> int:
    """Where a launch goes: torch's current stream when a torch tensor is among the arguments, else 0 (the null
    stream)."""
    return torch_stream() if any(map(is_torch, args)) else 0


def cached_code_object(source: str, target: str, hiprtc_version: str):
    """The path of source's code object for target, compiled once per (source, headers, options, hiprtc)."""
    key = diskcache.key(source, toolchain.headers_digest(), toolchain.hiprtc_options(target), hiprtc_version)
    return diskcache.cached(diskcache.folder("hip") / f"{key}.hsaco",
                            lambda: toolchain.compile_hiprtc(source, target))


class Hip(backend.Backend):
    name = "hip"
    kind = "device"
    device = "AMD GPU (hip-python)"
    target = "gfx942"

    def __init__(self):
        self._mods: dict = {}
        self._stream = 0   # where the last launch went: what finished() waits behind

    def available(self):
        mods, why = _hip()
        if why is None:
            hip = mods[0]
            props = hip.hipDeviceProp_t()
            _check(hip.hipGetDeviceProperties(props, 0))
            arch = props.gcnArchName.decode().split(":")[0]
            if arch not in ("gfx942", "gfx950"):
                return f"device {arch} is not a supported CDNA target (gfx942, gfx950)"
            self.target = arch
        return why

    def _function(self, g):
        """The hipFunction_t of a generated kernel: its code object loaded once per process."""
        hip, hiprtc = _hip()[0]
        key = (g.source, _check(hip.hipGetDevice()))   # a module is loaded per device
        if key not in self._mods:
            _, major, minor = hiprtc.hiprtcVersion()
            code = cached_code_object(g.source, self.target, f"{major}.{minor}").read_bytes()
            module = _check(hip.hipModuleLoadData(code))
            self._mods[key] = _check(hip.hipModuleGetFunction(module, g.name.encode()))
        return self._mods[key]

    def run(self, k: ir.Kernel, args) -> None:
        self.issue(self._plan(k, args), stream_for(args))

    def _plan(self, k: ir.Kernel, args) -> HipLaunch:
        g = launch.generated(k, self.target)
        grid = launch.grid(g, launch.bind(g, args))
        return HipLaunch(self._function(g) if grid else None, grid, g.threads, g.lds_bytes, kernargs(g, args),
                         address_slots(g))

    # what tiles.backend.DevicePrepared asks of a device backend
    def current_device(self) -> int:
        return _check(_hip()[0][0].hipGetDevice())

    def plan_step(self, k: ir.Kernel, args, device: int) -> HipLaunch:
        backend.check_args(k, args)   # what Backend.launch checks before run
        return self._plan(k, args)

    def issue(self, step: HipLaunch, stream: int) -> None:
        """HIP copies the kernel arguments when it enqueues: the buffer may be rewritten after."""
        if not step.grid:
            return
        self._stream = stream
        _check(_hip()[0][0].hipModuleLaunchKernel(step.function, *step.grid, step.threads, 1, 1, step.lds_bytes,
                                                 stream or None, None, step.extra))

    def launch_stream(self, on_torch: bool, device: int) -> int:
        return torch_stream() if on_torch else 0

    def torch_stream(self, device) -> int:
        import torch
        return torch.cuda.current_stream(device).cuda_stream

    def finished(self, timeout_s: float) -> bool:
        """An event recorded behind the last launch on its stream, polled (hipEventQuery: hipErrorNotReady while
        work before it runs), as the CUDA backend does: a hung kernel is named instead of waited on forever."""
        hip = _hip()[0][0]
        event = _check(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming))

        def done() -> bool:
            err = hip.hipEventQuery(event)[0]
            if err not in (hip.hipError_t.hipSuccess, hip.hipError_t.hipErrorNotReady):
                raise RuntimeError(f"HIP call failed: {err}")
            return err == hip.hipError_t.hipSuccess
        try:
            _check(hip.hipEventRecord(event, self._stream or None))
            return backend.poll(done, timeout_s)
        finally:
            hip.hipEventDestroy(event)
