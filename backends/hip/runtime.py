"""The "hip" backend: generated HIP compiled by hiprtc and launched through hip-python on an AMD GPU.

hip-python imports without ROCm, and its calls raise RuntimeError when libamdhip64.so is missing: that is
how `available()` tells there is no device. Nothing here has run on hardware (none was available).
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from tiles import backend, ir

from . import launch
from .toolchain import SHARED_INCLUDE

INCLUDE = Path(__file__).parent / "include"


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
    err = result[0] if isinstance(result, tuple) else result
    if getattr(err, "value", 0) != 0:
        raise RuntimeError(f"HIP call failed: {err}")
    return result[1:] if isinstance(result, tuple) and len(result) > 2 else (result[1] if isinstance(result, tuple) else None)


class Hip(backend.Backend):
    name = "hip"
    kind = "device"
    device = "AMD GPU (hip-python)"
    target = "gfx942"

    def __init__(self):
        self._mods: dict = {}

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

    def _module(self, g):
        if g.source in self._mods:
            return self._mods[g.source]
        hip, hiprtc = _hip()[0]
        headers = sorted((INCLUDE / "tiles_hip").glob("*.hpp")) + [SHARED_INCLUDE / "tiles_cuda" / "philox.h"]
        names = [f"{h.parent.name}/{h.name}".encode() for h in headers]
        texts = [h.read_bytes() for h in headers]
        prog = _check(hiprtc.hiprtcCreateProgram(g.source.encode(), f"{g.name}.hip".encode(), len(headers),
                                                 texts, names))
        opts = [f"--offload-arch={self.target}".encode(), b"-O3", b"-std=c++17"]
        err, = hiprtc.hiprtcCompileProgram(prog, len(opts), opts)
        if err != hiprtc.hiprtcResult.HIPRTC_SUCCESS:
            _, size = hiprtc.hiprtcGetProgramLogSize(prog)
            log = bytearray(size)
            hiprtc.hiprtcGetProgramLog(prog, log)
            raise RuntimeError(f"hiprtc failed compiling {g.name}:\n{log.decode(errors='replace')}")
        _, size = hiprtc.hiprtcGetCodeSize(prog)
        code = bytearray(size)
        hiprtc.hiprtcGetCode(prog, code)
        module = _check(hip.hipModuleLoadData(code))
        fn = _check(hip.hipModuleGetFunction(module, g.name.encode()))
        self._mods[g.source] = fn
        return fn

    def run(self, k: ir.Kernel, args) -> None:
        hip = _hip()[0][0]
        g = launch.generated(k, self.target)
        env = launch.bind(g, args)
        grid = launch.grid(g, env)
        if not grid:
            return
        fn = self._module(g)
        by_param = dict(zip([id(p) for p in k.params], args))
        blobs = []
        for ctype, _, kind, p in g.params:
            a = by_param[id(p)]
            if kind == "data":
                ptr = getattr(a, "data_ptr", None)
                if ptr is None:
                    raise TypeError(f"argument {p.name}: the hip backend takes device arrays (torch on ROCm)")
                blobs.append(ctypes.c_void_p(a.data_ptr()).value.to_bytes(8, "little"))
            elif kind == "dims":
                blobs.append(launch.dims_of(p, _ShapeOnly(a)).tobytes())
            else:
                blobs.append((np.float32(a) if ctype == "float" else np.int32(a)).tobytes())
        buf = bytearray()
        for b in blobs:   # kernel arguments at their natural alignment
            buf += bytes(-len(buf) % min(8, len(b) if len(b) in (4, 8) else 4)) + b
        raw = (ctypes.c_char * len(buf)).from_buffer(buf)
        size = ctypes.c_size_t(len(buf))
        # HIP_LAUNCH_PARAM_BUFFER_POINTER, the packed arguments, HIP_LAUNCH_PARAM_BUFFER_SIZE, its size, END
        extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(raw), 2, ctypes.addressof(size), 3)
        _check(hip.hipModuleLaunchKernel(fn, *grid, g.threads, 1, 1, g.lds_bytes, None, None, extra))
        _check(hip.hipDeviceSynchronize())


class _ShapeOnly:
    """Shape, strides and size of a device array, for launch.dims_of."""

    def __init__(self, a):
        self.ndim, self.shape = a.dim(), tuple(a.shape)
        self.itemsize = a.element_size()
        self.strides = tuple(s * self.itemsize for s in a.stride())
        self.nbytes = a.numel() * self.itemsize
