"""The "metal" backend: generated MSL on an Apple GPU through PyObjC (pyobjc-framework-Metal).

Written from Apple's Metal API documentation and not run here (no Apple machine is available to this project);
docs/backends/metal.md says what is verified where. PyObjC is imported on first use, only on macOS.

One launch: the MSL (with the tiles_metal headers inlined, since newLibraryWithSource has no include path) is
compiled once per kernel with the language version it needs and fast math off (the tests compare against a
float64 reference), a compute pipeline is made and checked against the kernel's threads and threadgroup memory,
the arrays are copied into shared-storage buffers, the grid is dispatched, the command buffer is waited on, and
its error (if any) is raised as a Python exception before the results are copied back.
"""
from __future__ import annotations

import sys
import weakref

import numpy as np

from tiles import interp, ir
from tiles.backend import Backend

from . import toolchain
from .emulator import generated


class MetalError(RuntimeError):
    """Metal refused a kernel (compile, pipeline) or a command buffer failed."""


def _metal():
    import Metal  # pyobjc-framework-Metal
    return Metal


class MetalDevice(Backend):
    name = "metal"
    target = "apple"
    kind = "device"

    def __init__(self):
        self._device = self._queue = None
        self._pipelines: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    @property
    def device(self) -> str:
        return str(self._device.name()) if self._device is not None else "Apple GPU (Metal)"

    def available(self):
        if sys.platform != "darwin":
            return f"Metal needs macOS (this is {sys.platform})"
        try:
            Metal = _metal()
        except ImportError:
            return "pyobjc-framework-Metal is not installed (pip install 'tiles[metal]')"
        if self._device is None:
            self._device = Metal.MTLCreateSystemDefaultDevice()
            if self._device is None:
                return "MTLCreateSystemDefaultDevice() found no Metal device"
            self._queue = self._device.newCommandQueue()
        return None

    def _pipeline(self, k: ir.Kernel):
        if k in self._pipelines:
            return self._pipelines[k]
        Metal, dev, mk = _metal(), self._device, generated(k)
        opts = Metal.MTLCompileOptions.alloc().init()
        opts.setLanguageVersion_(Metal.MTLLanguageVersion3_1 if mk.language == "3.1" else Metal.MTLLanguageVersion3_0)
        opts.setFastMathEnabled_(False)
        lib, err = dev.newLibraryWithSource_options_error_(toolchain.amalgamate(mk.source), opts, None)
        if lib is None:
            raise MetalError(f"{mk.name}: the Metal compiler failed:\n{err.localizedDescription()}")
        fn = lib.newFunctionWithName_(mk.name)
        pso, err = dev.newComputePipelineStateWithFunction_error_(fn, None)
        if pso is None:
            raise MetalError(f"{mk.name}: no compute pipeline: {err.localizedDescription()}")
        if pso.maxTotalThreadsPerThreadgroup() < mk.threads:
            raise MetalError(f"{mk.name}: needs {mk.threads} threads per threadgroup, the pipeline allows "
                             f"{pso.maxTotalThreadsPerThreadgroup()} (registers); lower `workers`")
        if pso.threadExecutionWidth() != 32:
            raise MetalError(f"{mk.name}: simdgroups of {pso.threadExecutionWidth()} lanes; the kernel needs 32")
        if dev.maxThreadgroupMemoryLength() < mk.smem_bytes:
            raise MetalError(f"{mk.name}: needs {mk.smem_bytes} bytes of threadgroup memory, the device has "
                             f"{dev.maxThreadgroupMemoryLength()}")
        self._pipelines[k] = pso
        return pso

    def run(self, k: ir.Kernel, args) -> None:
        Metal, dev = _metal(), self._device
        mk = generated(k)
        pso = self._pipeline(k)
        env = interp.bind(k, args)
        host = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in args]
        arrays, ints, floats = mk.pack(host, env)
        shared = Metal.MTLResourceStorageModeShared
        bufs = [dev.newBufferWithBytes_length_options_(a.tobytes(), max(a.nbytes, 1), shared) for a in arrays]
        cb = self._queue.commandBuffer()
        enc = cb.computeCommandEncoder()
        enc.setComputePipelineState_(pso)
        for i, b in enumerate(bufs):
            enc.setBuffer_offset_atIndex_(b, 0, i)
        enc.setBytes_length_atIndex_(ints.tobytes(), ints.nbytes, len(bufs))
        if mk.float_args:
            enc.setBytes_length_atIndex_(floats.tobytes(), floats.nbytes, len(bufs) + 1)
        enc.setThreadgroupMemoryLength_atIndex_(-(-mk.smem_bytes // 16) * 16, 0)  # a multiple of 16 bytes
        grid = mk.grid(env)
        enc.dispatchThreadgroups_threadsPerThreadgroup_(Metal.MTLSizeMake(*grid), Metal.MTLSizeMake(mk.threads, 1, 1))
        enc.endEncoding()
        cb.commit()
        cb.waitUntilCompleted()
        if cb.status() == Metal.MTLCommandBufferStatusError:
            raise MetalError(f"{mk.name}: the command buffer failed: {cb.error().localizedDescription()}")
        for a, b in zip(arrays, bufs):
            out = np.frombuffer(b.contents().as_buffer(a.nbytes), dtype=a.dtype).reshape(a.shape)
            a[...] = out
        for a, h in zip(args, host):
            if isinstance(a, np.ndarray) and h is not a:
                a[...] = h
