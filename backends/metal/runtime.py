"""The "metal" backend: generated MSL on an Apple GPU through PyObjC (pyobjc-framework-Metal).

Written from Apple's Metal API documentation and not run here (no Apple machine is available to this project);
docs/backends/metal.md says what is verified where. PyObjC is imported on first use, only on macOS.

One launch: the MSL (with the tiles_metal headers inlined, since newLibraryWithSource has no include path) is
compiled once per kernel with the language version it needs and fast math off (the tests compare against a
float64 reference), a compute pipeline is made and checked against the kernel's threads and threadgroup memory,
the arrays are copied into shared-storage buffers, the grid is dispatched, the command buffer's status is polled
until it ends (a launch that never does raises LaunchHung after backend.HUNG_S), and
its error (if any) is raised as a Python exception before the results are copied back.

Torch's mps tensors take another path, with no host copies: the kernel is generated with its threadgroup memory
declared inside it (codegen's static_arena: torch sets no threadgroup memory length), compiled by
torch.mps.compile_shader, and dispatched by torch on its own command buffer, the tensors bound as buffers in
place and the constants passed by value (`launch_mps`). That path needs no PyObjC, and nothing on it waits for
the GPU. It too is unrun: no Apple machine; tests/test_metal_runtime.py checks what it hands torch, with a fake.

On first use the PyObjC path runs lanemap.py's check kernel. If this device lays out float and half simdgroup
matrices as tiles/targets.py says, kernels without bfloat are compiled with TILES_METAL_LANE_MAP, so that
position-dependent ops work in registers instead of passing through threadgroup memory; otherwise (with a
warning) they keep the scratch path, which does not depend on the layout.
"""
from __future__ import annotations

import sys
import warnings
import weakref

import numpy as np

from tiles import backend, interp, ir
from tiles.backend import Backend, is_torch

from . import codegen, lanemap, toolchain
from .emulator import generated


class MetalError(RuntimeError):
    """Metal refused a kernel (compile, pipeline) or a command buffer failed."""


def _metal():
    import Metal  # pyobjc-framework-Metal
    return Metal


def _wait(cb, name: str) -> None:
    """The command buffer's end, its status polled rather than waitUntilCompleted: a kernel that never ends is
    named (LaunchHung) after backend.HUNG_S instead of waited on forever, as on CUDA and HIP."""
    Metal = _metal()
    ended = (Metal.MTLCommandBufferStatusCompleted, Metal.MTLCommandBufferStatusError)
    if not backend.poll(lambda: cb.status() in ended, backend.HUNG_S, step_s=1e-4):
        raise backend.LaunchHung(f"{name} did not finish within {backend.HUNG_S:.0f} s on metal: the launch hangs; "
                                 f"leave the configuration out (a search: tune_where) and report it")


def _torch_mps() -> bool:
    """Whether torch (if the caller imported it: never imported here) has an MPS device."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.backends.mps.is_available()


# ---- torch's mps tensors: torch.mps.compile_shader, no host copies --------------------------------------------

_static: "weakref.WeakKeyDictionary[ir.Kernel, codegen.MetalKernel]" = weakref.WeakKeyDictionary()
_libraries: dict = {}   # source -> torch's compiled shader library


def mps_dispatch(mk: codegen.MetalKernel, args, env: dict) -> tuple[list, dict]:
    """(positional arguments, keyword arguments) of torch's kernel call for a launch of mk: the tensors bound as
    buffers 0.., then the int constants (as int32) and the float ones by value; dispatchThreads of the grid's
    threadgroups times the threads of one."""
    arrays, ints, floats = mk.pack(args, env)
    call = [*arrays, [int(v) for v in ints]] + ([[float(v) for v in floats]] if mk.float_args else [])
    gx, gy, gz = mk.grid(env)
    return call, dict(threads=(gx * mk.threads, gy, gz), group_size=(mk.threads, 1, 1),
                      arg_casts={len(arrays): "int32"})


def launch_mps(k: ir.Kernel, args, compile_shader=None) -> None:
    """Launch k on torch mps tensors through torch.mps.compile_shader (the library compiled once per source)."""
    if k not in _static:
        _static[k] = codegen.generate(k, static_arena=True)
    mk = _static[k]
    env = interp.bind(k, args)
    if 0 in mk.grid(env):
        return
    if mk.source not in _libraries:
        if compile_shader is None:
            import torch
            compile_shader = torch.mps.compile_shader
        _libraries[mk.source] = compile_shader(toolchain.amalgamate(mk.source))
    fn = getattr(_libraries[mk.source], mk.name)
    if fn.max_threads_per_threadgroup < mk.threads:
        raise MetalError(f"{mk.name}: needs {mk.threads} threads per threadgroup, the pipeline allows "
                         f"{fn.max_threads_per_threadgroup} (register pressure); lower `workers`")
    if fn.thread_execution_width != 32:
        raise MetalError(f"{mk.name}: simdgroups of {fn.thread_execution_width} lanes; the kernel needs 32")
    call, kw = mps_dispatch(mk, args, env)
    fn(*call, **kw)


class MetalDevice(Backend):
    name = "metal"
    target = "apple"
    kind = "device"

    def __init__(self):
        self._device = self._queue = None
        self._pipelines: dict = {}   # (source, name, macros) -> MTLComputePipelineState
        self._lane_map: bool | None = None  # whether lanemap.check passed on this device

    @property
    def device(self) -> str:
        return str(self._device.name()) if self._device is not None else "Apple GPU (Metal)"

    def available(self):
        """None where PyObjC reaches an Apple GPU (what host arrays need)."""
        if sys.platform != "darwin":
            return f"Metal needs macOS (this is {sys.platform})"
        return self._objc_device()

    def available_for(self, args):
        """torch's mps tensors need torch's MPS device, not PyObjC."""
        if any(map(is_torch, args)):
            if sys.platform != "darwin":
                return f"Metal needs macOS (this is {sys.platform})"
            return None if _torch_mps() else "torch has no MPS device here"
        return self.available()

    def _objc_device(self):
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

    def lane_map_checked(self) -> bool:
        """Whether this device's simdgroup_matrix layout is targets.py's (checked once, on first use)."""
        if self._lane_map is None:
            why = lanemap.check(self)
            self._lane_map = why is None
            if why:
                warnings.warn(f"{self.device}: {why}; position-dependent ops stay in threadgroup memory")
        return self._lane_map

    def _pipeline(self, source: str, name: str, language: str, threads: int, smem_bytes: int, macros=()):
        key = (source, name, tuple(macros))
        if key in self._pipelines:
            return self._pipelines[key]
        Metal, dev = _metal(), self._device
        opts = Metal.MTLCompileOptions.alloc().init()
        opts.setLanguageVersion_(Metal.MTLLanguageVersion3_1 if language == "3.1" else Metal.MTLLanguageVersion3_0)
        opts.setFastMathEnabled_(False)
        if macros:
            opts.setPreprocessorMacros_({m: "1" for m in macros})
        lib, err = dev.newLibraryWithSource_options_error_(toolchain.amalgamate(source), opts, None)
        if lib is None:
            raise MetalError(f"{name}: the Metal compiler failed:\n{err.localizedDescription()}")
        fn = lib.newFunctionWithName_(name)
        if fn is None:
            raise MetalError(f"{name}: no kernel of that name in the compiled library")
        pso, err = dev.newComputePipelineStateWithFunction_error_(fn, None)
        if pso is None:
            raise MetalError(f"{name}: no compute pipeline: {err.localizedDescription()}")
        if pso.maxTotalThreadsPerThreadgroup() < threads:
            raise MetalError(f"{name}: needs {threads} threads per threadgroup, the pipeline allows "
                             f"{pso.maxTotalThreadsPerThreadgroup()} (register pressure); lower `workers`")
        if pso.threadExecutionWidth() != 32:
            raise MetalError(f"{name}: simdgroups of {pso.threadExecutionWidth()} lanes; the kernel needs 32")
        if dev.maxThreadgroupMemoryLength() < smem_bytes:
            raise MetalError(f"{name}: needs {smem_bytes} bytes of threadgroup memory, the device has "
                             f"{dev.maxThreadgroupMemoryLength()}")
        self._pipelines[key] = pso
        return pso

    def _dispatch(self, pso, name: str, arrays: list, constants: list, grid, threads: int, smem_bytes: int):
        """Buffers 0.. are the arrays (copied in and back), then the small constant arrays by value."""
        Metal, dev = _metal(), self._device
        bufs = [dev.newBufferWithBytes_length_options_(a.tobytes(), max(a.nbytes, 1),
                                                       Metal.MTLResourceStorageModeShared) for a in arrays]
        cb = self._queue.commandBuffer()
        enc = cb.computeCommandEncoder()
        enc.setComputePipelineState_(pso)
        for i, b in enumerate(bufs):
            enc.setBuffer_offset_atIndex_(b, 0, i)
        for i, c in enumerate(constants):
            enc.setBytes_length_atIndex_(c.tobytes(), c.nbytes, len(bufs) + i)
        if smem_bytes:
            enc.setThreadgroupMemoryLength_atIndex_(-(-smem_bytes // 16) * 16, 0)  # a multiple of 16 bytes
        enc.dispatchThreadgroups_threadsPerThreadgroup_(Metal.MTLSizeMake(*grid), Metal.MTLSizeMake(threads, 1, 1))
        enc.endEncoding()
        cb.commit()
        _wait(cb, name)
        if cb.status() == Metal.MTLCommandBufferStatusError:
            raise MetalError(f"{name}: the command buffer failed: {cb.error().localizedDescription()}")
        for a, b in zip(arrays, bufs):
            a[...] = np.frombuffer(b.contents().as_buffer(a.nbytes), dtype=a.dtype).reshape(a.shape)

    def torch_stream(self, device) -> int:
        """torch's MPS work goes on one queue: the kept temporaries of launches on mps tensors need one each."""
        return 0

    def run(self, k: ir.Kernel, args) -> None:
        if any(map(is_torch, args)):
            return launch_mps(k, args)
        mk = generated(k)
        # the check covers float and half matrices; a kernel with bfloat (Metal 3.1) keeps the scratch path
        macros = ("TILES_METAL_LANE_MAP",) if mk.language == "3.0" and self.lane_map_checked() else ()
        pso = self._pipeline(mk.source, mk.name, mk.language, mk.threads, mk.smem_bytes, macros)
        env = interp.bind(k, args)
        host = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in args]
        arrays, ints, floats = mk.pack(host, env)
        constants = [ints] + ([floats] if mk.float_args else [])
        self._dispatch(pso, mk.name, arrays, constants, mk.grid(env), mk.threads, mk.smem_bytes)
        for a, h in zip(args, host):
            if isinstance(a, np.ndarray) and h is not a:
                a[...] = h

    def run_raw(self, source: str, name: str, params: list, arrays: list, grid, threads: int, smem_bytes: int,
                language: str = "3.0") -> None:
        """Run a hand-written MSL kernel whose buffers are `arrays` (lanemap.py's check kernel)."""
        pso = self._pipeline(source, name, language, threads, smem_bytes)
        self._dispatch(pso, name, arrays, [], tuple(grid) + (1,) * (3 - len(grid)), threads, smem_bytes)
