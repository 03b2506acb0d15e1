"""Launching generated kernels on an NVIDIA GPU through cupy.

The cubin comes from toolchain.compile (NVRTC in a child process: a compiler crash is an exception here) and
is cached on disk under ~/.cache/tiles/cuda (TILES_CACHE overrides ~/.cache/tiles), keyed by the source, the
header library's contents, the compile options, and the compiler and driver versions. Kernels launch on cupy
arrays, torch CUDA tensors or any __cuda_array_interface__ object, on the caller's current stream (torch's
when a torch tensor is passed).
Every argument is checked before the launch (check_launch), so bad input never reaches the GPU. Cubins are loaded
and launched through the driver API (ctypes): a repeated launch is one cuLaunchKernel on parameters packed once, or
on Hopper one cuLaunchKernelEx, programmatic (Launch): the kernel may start while the one before it finishes.
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tiles import diskcache, dtypes, ir, targets
from tiles.backend import _strides, address, check_args, is_cuda_array
from tiles.dsl import TileError
from tiles.types import GL

from . import codegen, schedules, toolchain

ALIGN = 16   # bytes: cp.async and TMA copy 16-byte chunks
GRID_LIMITS = (2**31 - 1, 65535, 65535)


# ---- checks (pure Python: testable without a GPU) ------------------------------------------------------------

# Launch overhead: a launch asks each array for its address several times, torch's data_ptr() first.
pointer = address


def device_of(a) -> int | None:
    """The CUDA device index of an array, None where it does not say (then the current device is assumed)."""
    dev = getattr(a, "device", None)
    if dev is None:
        return None
    if isinstance(dev, int):
        return dev
    if hasattr(dev, "id"):        # cupy
        return int(dev.id)
    if getattr(dev, "type", None) == "cuda":   # torch
        return int(dev.index or 0)
    return -1                      # somewhere else (a torch CPU tensor, ...)


def torch_stream(device: int) -> int:
    """torch's current stream on a device, as a raw pointer: through the call torch's own compiled code makes
    where torch has it (torch.cuda.current_stream builds a Stream object: ~40 us per launch on the H200's host)."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw else torch.cuda.current_stream(device).cuda_stream


LAUNCH_MEMO = 1024   # launches remembered (the memo starts over past this)


def launch_signature(a):
    """What a launch's checks and parameters depend on, for one argument: an array's address, shape, strides,
    dtype and device; a scalar's type and value."""
    if isinstance(a, DeviceArray):   # fixed at its creation
        return a.signature
    if isinstance(a, (int, float, np.number)):
        return type(a), a
    if type(a).__module__ == "torch":   # its own accessors: several times cheaper than the generic ones
        return a.data_ptr(), a.shape, a.stride(), a.dtype, a.device
    if not is_cuda_array(a):   # never the same as a device array's: the checks refuse it
        return type(a), id(a)
    return array_signature(a)


def array_signature(a) -> tuple:
    return pointer(a), tuple(a.shape), _strides(a), a.dtype, device_of(a)


def check_launch(k: ir.Kernel, args, device: int = 0) -> dict:
    """Everything that must hold before launching k on `device`; returns the scalar environment.

    On top of the checks every backend makes (rank, dtype, contiguous last dim, the kernel's check_eq), the
    arrays must live on this GPU, start on a 16-byte boundary, and the grid must fit CUDA's limits.
    """
    for p, a in zip(k.params, args):
        if not isinstance(p, GL):
            continue
        if not is_cuda_array(a):
            raise TileError(f"argument {p.name}: a {type(a).__name__} is not on the GPU; pass a cupy array, "
                            f"a torch CUDA tensor or another __cuda_array_interface__ object", k.loc)
        dev = device_of(a)
        if dev is not None and dev != device:
            raise TileError(f"argument {p.name} is on device {dev}, the kernel runs on device {device}", k.loc)
        ptr = pointer(a)
        if ptr % ALIGN:
            raise TileError(f"argument {p.name}: data must start on a {ALIGN}-byte boundary, its address is "
                            f"{ptr:#x} ({ptr % ALIGN} bytes past one); pass a copy (e.g. .copy() or .contiguous())",
                            k.loc)
    env = check_args(k, args)
    for axis, (g, limit) in enumerate(zip(k.grid, GRID_LIMITS)):
        n = int(ir.evaluate(g, env))
        if n > limit:
            raise TileError(f"grid dim {'xyz'[axis]} is {n} blocks ({ir.fmt(g)}), CUDA allows {limit}", k.loc)
    return env


def pack(k: ir.Kernel, args, address=lambda a: np.uint64(pointer(a))) -> list:
    """The launch parameters, in the order TC_GL_PARAMS / the scalar params declare them; an array's pointer is
    address(array) (the CPU emulator passes the array itself)."""
    out = []
    for p, a in zip(k.params, args):
        if isinstance(p, GL):
            shape = (1,) * (4 - len(a.shape)) + tuple(int(n) for n in a.shape)
            strides = (0,) * (4 - len(a.shape)) + tuple(int(s) for s in _strides(a))
            # a dim of extent 1 is never stepped over: stride 0 keeps the 16-byte vector path open
            strides = tuple(0 if n == 1 else s for n, s in zip(shape, strides))
            out += [address(a)] + [np.int32(n) for n in shape] + [np.int64(s) for s in strides[:3]]
        else:
            out.append(np.float32(a) if p.dtype == dtypes.f32 else np.int32(a))
    return out


def address_slots(k: ir.Kernel) -> list[tuple[int, int, None]]:
    """(index among pack's values, argument position, None) of each array's address."""
    out, i = [], 0
    for j, p in enumerate(k.params):
        if isinstance(p, GL):
            out.append((i, j, None))
        i += 8 if isinstance(p, GL) else 1
    return out


# ---- the launch: one driver call on parameters packed once --------------------------------------------------

@functools.lru_cache(maxsize=1)
def driver() -> ctypes.CDLL:
    """The CUDA driver library, with the entry points that load and launch a function typed."""
    lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    u32, ptr, out = ctypes.c_uint, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
    for name, args in {"cuLaunchKernel": [ptr, u32, u32, u32, u32, u32, u32, u32, ptr, ptr, ptr],
                       "cuLaunchKernelEx": [ptr, ptr, ptr, ptr],
                       "cuModuleLoadData": [out, ctypes.c_char_p],
                       "cuModuleGetFunction": [out, ptr, ctypes.c_char_p],
                       "cuFuncSetAttribute": [ptr, ctypes.c_int, ctypes.c_int],
                       "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]}.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = ctypes.c_int
    return lib


def check(err: int, what: str):
    if err:
        name = ctypes.c_char_p()
        driver().cuGetErrorName(err, ctypes.byref(name))
        raise RuntimeError(f"{what} failed: {(name.value or b'unknown error').decode()} ({err})")


INVALID_CONTEXT = 201     # CUDA_ERROR_INVALID_CONTEXT
MAX_DYNAMIC_SHARED = 8   # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


def load_function(cubin: bytes, name: str, smem_bytes: int) -> int:
    """The CUfunction `name` of a cubin (or NUL-terminated PTX, which the driver compiles for the device), loaded
    into the current context (which must exist: Runtime.function)."""
    lib, module, fn = driver(), ctypes.c_void_p(), ctypes.c_void_p()
    check(lib.cuModuleLoadData(ctypes.byref(module), cubin), "cuModuleLoadData")
    check(lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()), f"cuModuleGetFunction({name})")
    if smem_bytes > 48 * 1024:   # beyond 48 KB a block must opt in
        check(lib.cuFuncSetAttribute(fn, MAX_DYNAMIC_SHARED, smem_bytes), "cuFuncSetAttribute")
    return fn.value


# Programmatic dependent launch: cuLaunchKernelEx given one launch attribute. The structs as cuda.h lays them out
# (CUDA 12.0 on; tests/test_cuda_compile.py checks the sizes and offsets, against the header where one is here).
PROGRAMMATIC_STREAM_SERIALIZATION = 6   # CUlaunchAttributeID CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
PDL_DRIVER = 12030   # the driver from which stream capture keeps a programmatic launch (a programmatic graph edge)


class LaunchAttributeValue(ctypes.Union):
    """CUlaunchAttributeValue: 64 bytes, 8-byte aligned (some members hold pointers)."""
    _fields_ = [("pad", ctypes.c_uint64 * 8), ("programmaticStreamSerializationAllowed", ctypes.c_int)]


class LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: a CUlaunchAttributeID (a 4-byte enum), padding to 8 bytes, the value."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", LaunchAttributeValue)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


# the one attribute of every programmatic launch (the driver reads it during the call)
PROGRAMMATIC = LaunchAttribute(PROGRAMMATIC_STREAM_SERIALIZATION,
                               value=LaunchAttributeValue(programmaticStreamSerializationAllowed=1))


class Launch:
    """A planned launch: the function, its grid and block, and its parameters packed once into host memory.

    cuLaunchKernel takes an array of pointers, one per parameter, and copies each parameter's bytes from where
    its pointer points (the sizes come from the cubin). Packing them once makes a repeated launch one driver call:
    cupy's kernel call converted every parameter again on each launch (a tiny GEMM on the H200: 27.7 us per
    launch through cupy, 13.3 us through this; .ci/launch_cost.py).

    programmatic: cuLaunchKernelEx with programmatic stream serialization, for code that waits for the grids before
    it (Schedule.pdl): the grid may be scheduled once the kernel before it in the stream lets it (all its blocks
    ran griddepcontrol.launch_dependents, which tiles kernels do first thing) and runs its prologue meanwhile;
    its griddepcontrol.wait then holds it until that kernel has completed and its memory is visible. After a
    kernel that never lets it (torch's, cuBLAS's), it starts as an ordinary launch would."""

    def __init__(self, function: int, grid, block, smem: int, params: list, programmatic: bool = False, slots=()):
        """slots: (index in params, argument position, TensorMapSpec or None) of each parameter that holds an
        array's address (None) or its tensor map: what a prepared launch rewrites for arrays at other addresses."""
        values = [np.ascontiguousarray(p).view(np.uint8).reshape(-1) for p in params]
        offsets = np.cumsum([0] + [-(-v.size // 8) * 8 for v in values])   # each value 8-byte aligned
        self.buffer = np.zeros(int(offsets[-1]), np.uint8)
        for v, o in zip(values, offsets):
            self.buffer[o:o + v.size] = v
        self.slots = [(int(offsets[i]), arg, spec) for i, arg, spec in slots]
        self.pointers = (self.buffer.ctypes.data + offsets[:-1]).astype(np.uint64)
        grid, block = (tuple(grid) + (1, 1))[:3], (tuple(block) + (1, 1))[:3]
        self.args = (function, *grid, *block, smem)
        self.programmatic = programmatic
        self.configs: dict = {}   # stream -> its LaunchConfig, never changed once made (threads share a Launch)

    def set(self, offset: int, value) -> None:
        """Writes an address (an int) or a tensor map's bytes at a slot's offset (tiles.backend.DevicePrepared)."""
        if isinstance(value, int):
            self.words[offset >> 3] = value
        else:
            self.buffer[offset:offset + value.size] = value

    @functools.cached_property
    def words(self) -> np.ndarray:
        return self.buffer.view(np.uint64)

    def __call__(self, stream: int) -> int:
        """Queues the launch on `stream`; returns the driver's status (0: queued)."""
        if not self.programmatic:
            return driver().cuLaunchKernel(*self.args, stream, self.pointers.ctypes.data, None)
        config = self.configs.get(stream)
        if config is None:
            config = self.configs[stream] = LaunchConfig(*self.args[1:], stream, ctypes.pointer(PROGRAMMATIC), 1)
        return driver().cuLaunchKernelEx(ctypes.byref(config), self.args[0], self.pointers.ctypes.data, None)


# ---- TMA tensor maps (the warp-specialized schedule) ---------------------------------------------------------

TMA_DTYPES = {"bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
              "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",   # attention backward's dQ accumulator (reduce-adds)
              "fp8e4m3": "CU_TENSOR_MAP_DATA_TYPE_UINT8", "fp8e5m2": "CU_TENSOR_MAP_DATA_TYPE_UINT8"}  # bytes
TMA_STRIDE_LIMIT = 2**40   # bytes (cuTensorMapEncodeTiled)
TMA_DIM_LIMIT = 2**32


@dataclass(frozen=True)
class TensorMapSpec:
    """What cuTensorMapEncodeTiled is given for one tile TMA moves: a 4-D map of the global, innermost dim
    first (cols, rows, depth, batch), whose box is one swizzle panel of the shared tile."""
    dtype: str                      # cuda.bindings CUtensorMapDataType name
    dims: tuple[int, int, int, int]
    strides: tuple[int, int, int]   # bytes between consecutive rows, depths, batches
    box: tuple[int, int, int, int]
    swizzle: str                    # CUtensorMapSwizzle name, the shared tile's mode


def tensor_map_spec(k: ir.Kernel, tma: schedules.TmaMap, dtype: dtypes.DType, shape, strides,
                    load: bool = False, split: int = 1) -> TensorMapSpec:
    """The map of `tma` over an array of this shape and element strides; a TileError where TMA cannot address it.

    Bounds need nothing more: TMA zero-fills the parts of a box outside `dims` that it loads, which is what
    tl.load means, and writes only the parts inside that it stores. A load's box is fitted to a global shorter
    than the tile (schedules.box_rows, as the kernel's tc::box_rows announces it); a tile the blocks of a cluster
    load in `split` runs of rows (tc::load_tma_multicast_rows) has a box of one run, never fitted."""
    shape = (1,) * (4 - len(shape)) + tuple(int(n) for n in shape)
    strides = (0,) * (4 - len(strides)) + tuple(int(s) for s in strides)
    size = dtype.itemsize
    dims = tuple(reversed(shape))
    out, below = [], shape[3] * size
    for n, st in zip(reversed(shape[:3]), reversed(strides[:3])):
        # a dim of extent 1 is never stepped over: any stride TMA accepts will do (past the dims below it)
        b = st * size if n > 1 else -(-below // 16) * 16
        if b % 16 or not 0 < b < TMA_STRIDE_LIMIT:
            raise TileError(f"argument {tma.gl}: the warp-specialized schedule reads it with TMA, which needs "
                            f"strides that are positive multiples of 16 bytes below 2**40; one is {b} bytes "
                            f"(pass a contiguous copy whose rows are a multiple of {16 // size} elements)", k.loc)
        out.append(b)
        below = b * n
    if any(n >= TMA_DIM_LIMIT for n in dims):
        raise TileError(f"argument {tma.gl}: TMA addresses at most 2**32 elements per dim, got {shape}", k.loc)
    swizzle = f"CU_TENSOR_MAP_{schedules.TMA_SWIZZLE[tma.swizzle_bytes]}"
    rows = tma.rows // split if split > 1 else schedules.box_rows(tma.rows, dims[1]) if load else tma.rows
    return TensorMapSpec(TMA_DTYPES[dtype.name], dims, tuple(out), (tma.panel_cols, rows, 1, 1), swizzle)


# CUtensorMap: 128 opaque bytes passed by value. cupy passes a one-element numpy array of a structured dtype
# as a struct parameter (its "custom user structures").
TENSOR_MAP = np.dtype([("opaque", "<u8", (16,))])


def encode_tensor_map(spec: TensorMapSpec, address: int) -> np.ndarray:
    """cuTensorMapEncodeTiled (cuda.bindings, through the driver: needs a GPU machine) -> the parameter value."""
    from cuda.bindings import driver as cu
    u32, u64 = cu.cuuint32_t, cu.cuuint64_t
    err, tmap = cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, spec.dtype), 4, address, [u64(n) for n in spec.dims],
        [u64(b) for b in spec.strides], [u32(n) for n in spec.box], [u32(1)] * 4,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, getattr(cu.CUtensorMapSwizzle, spec.swizzle),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise TileError(f"cuTensorMapEncodeTiled refused {spec}: {err}")
    return np.array([int(w) for w in tmap.opaque], "<u8").view(TENSOR_MAP)


def tensor_map_specs(k: ir.Kernel, sched: schedules.Schedule, args, pointer=pointer) -> list[tuple[TensorMapSpec, int]]:
    """(spec, address) of every tensor map parameter of the schedule, in parameter order."""
    by_name = {p.name: (p, a) for p, a in zip(k.params, args)}
    out = []
    loads = sched.tma + sched.resident if sched.boxes else ()
    for m in sched.maps:
        p, a = by_name[m.gl]
        split = sched.cluster if m.tile in sched.multicast_rows else 1
        out.append((tensor_map_spec(k, m, p.dtype, a.shape, _strides(a), load=m in loads, split=split), pointer(a)))
    return out


# ---- compile cache ------------------------------------------------------------------------------------------

def cache_dir() -> Path:
    return diskcache.folder("cuda")


def cached_cubin(source: str, target: str, driver: str, ptx: bool = False) -> Path:
    """The cubin (or PTX) of source for target, compiled once per (source, header library, options, compiler and
    driver versions)."""
    opts = toolchain.options(target, "nvrtc", ptx)
    key = diskcache.key(source, toolchain.headers_digest(), opts, toolchain.versions(), driver)

    def build() -> bytes:
        image = toolchain.cached_compile(source, target, ptx=ptx).cubin
        (cache_dir() / f"{key}.cu").write_text(source)   # beside it, for `tiles inspect` and people
        return image

    return diskcache.cached(cache_dir() / f"{key}.{'ptx' if ptx else 'cubin'}", build)


# ---- the device ---------------------------------------------------------------------------------------------

def target_of(capability: tuple[int, int]) -> str | None:
    """The tiles target whose cubins run on a device of this compute capability."""
    major, _ = capability
    if major == 9:
        return "sm_90a"
    if major == 8:
        return "sm_80"    # sm_80 machine code runs on every 8.x device
    return None


@functools.lru_cache(maxsize=1)
def probe() -> tuple[str | None, str | None]:
    """(target, None) when a usable GPU is here, else (None, why not)."""
    try:
        import cupy
    except ImportError as e:
        return None, f"cupy is not installed ({e}): pip install 'tiles[cuda]'"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - no driver, no device: cupy raises its own CUDARuntimeError
        return None, f"no CUDA device ({e})"
    if n == 0:
        return None, "no CUDA device"
    cc = cupy.cuda.Device().compute_capability
    tgt = target_of((int(cc[:-1]), int(cc[-1])))
    if tgt is None:
        return None, f"compute capability {cc[:-1]}.{cc[-1]} has no tiles target (sm_80 and sm_90a only)"
    why = toolchain.available("nvrtc")
    return (None, why) if why else (tgt, None)


def programmatic_launches(capability: tuple[int, int], driver: int) -> bool:
    """Whether a launch of code that waits for the grids before it (Schedule.pdl: sm_90a's) is programmatic
    (Launch): on a device with griddepcontrol (sm_90 on), under a driver whose stream capture keeps it, unless
    TILES_PDL=0 (read when the runtime starts: time both in one session, one process each)."""
    return capability[0] >= 9 and driver >= PDL_DRIVER and os.environ.get("TILES_PDL", "1") != "0"


class DeviceArray:
    """A device buffer of any tiles dtype (cupy has no bf16/fp8): raw bytes in cupy, the dtype beside them."""

    def __init__(self, host: np.ndarray):
        import cupy
        self.dtype = host.dtype
        raw = np.ascontiguousarray(host).view(f"u{host.dtype.itemsize}")
        self.raw = cupy.asarray(raw)
        self.shape, self.itemsize = host.shape, host.dtype.itemsize
        self.strides = self.raw.strides
        self.device = self.raw.device
        self.signature = array_signature(self)

    @property
    def __cuda_array_interface__(self):
        cai = dict(self.raw.__cuda_array_interface__)
        cai["typestr"] = self.dtype.str
        return cai

    def data_ptr(self) -> int:   # asked first by pointer(): cheaper than building the interface dict
        return self.raw.data.ptr

    def numpy(self) -> np.ndarray:
        return self.raw.get().view(self.dtype)

    def reshape(self, shape) -> DeviceArray:
        """The same buffer in another shape (contiguous, as every DeviceArray is)."""
        view = object.__new__(DeviceArray)
        view.dtype, view.itemsize, view.raw = self.dtype, self.itemsize, self.raw.reshape(shape)
        view.shape, view.strides, view.device = view.raw.shape, view.raw.strides, self.device
        view.signature = array_signature(view)
        return view


class Runtime:
    def __init__(self, target: str):
        import cupy
        self.cupy, self.target = cupy, target
        self.driver = str(cupy.cuda.runtime.driverGetVersion())
        cc = cupy.cuda.Device().compute_capability
        # another target's code (sm_80 on a Hopper GPU) goes to the driver as PTX, planned within that target's
        # shared memory, so that it is the code its own GPUs would run
        self.ptx = target != target_of((int(cc[:-1]), int(cc[-1])))
        self.max_smem = cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
        if self.ptx:
            self.max_smem = min(self.max_smem, targets.target(target).shared_bytes)
        self.sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self.programmatic = programmatic_launches((int(cc[:-1]), int(cc[-1])), int(self.driver))
        self.functions: dict = {}   # (source, device) -> CUfunction
        self.tensor_maps: dict = {}
        self.launches: dict = {}   # (kernel, constants, device, launch signatures) -> (traced kernel, Launch)
        self.compiles: dict = {}   # (id(kernel), schedule, device) -> (kernel, generated, CUfunction)

    def function(self, gen: codegen.Generated, device: int) -> int:
        """The CUfunction of gen on `device` (a module is loaded once per context, so per device)."""
        key = (gen.source, device)
        if key not in self.functions:
            self.cupy.cuda.runtime.free(0)   # makes the device's primary context current on this thread
            cubin = cached_cubin(gen.source, self.target, self.driver, self.ptx).read_bytes()
            self.functions[key] = load_function(cubin, gen.name, gen.schedule.smem_bytes)
        return self.functions[key]

    def generate(self, k: ir.Kernel, schedule: str | None = None) -> codegen.Generated:
        return codegen.generate(k, schedules.plan(k, self.target, self.max_smem, schedule))

    def compiled(self, k: ir.Kernel, device: int, schedule: str | None = None):
        """(generated code, CUfunction) of k on `device`, under its planned schedule or the one named."""
        key = (id(k), schedule, device)   # traces are cached objects: their id stands for them
        if key not in self.compiles:
            gen = self.generate(k, schedule)
            self.compiles[key] = (k, gen, self.function(gen, device))
        return self.compiles[key][1:]

    def launch(self, kfn, args, overrides: dict) -> ir.Kernel:
        """Trace kfn for these arguments and constants, check, and launch; returns the traced kernel.

        A launch like an earlier one (same kernel and constants; same addresses, shapes, strides, dtypes, scalars
        and device) was traced, checked and packed then: all of it is reused, so that host time stays far below
        a short kernel's (a benchmark, a model's step)."""
        device = self.cupy.cuda.runtime.getDevice()
        try:
            key = (kfn, tuple(overrides.items()), device, tuple(map(launch_signature, args)))
            hit = self.launches.get(key)
        except TypeError:   # an unhashable constant: nothing to remember it by
            key, hit = None, None
        if hit is None:
            k = kfn.trace(args, self.target, **overrides)
            hit = (k, self.plan_launch(k, args, device))
            if key is not None:
                if len(self.launches) >= LAUNCH_MEMO:
                    self.launches.clear()
                self.launches[key] = hit
        k, launch = hit
        self.issue(launch, self._stream(args, device))
        return k

    def issue(self, launch: Launch, stream: int) -> None:
        err = launch(stream)
        if err == INVALID_CONTEXT:   # a host thread that has not used the device yet: make its context current
            self.cupy.cuda.runtime.free(0)
            err = launch(stream)
        check(err, "cuLaunchKernelEx (programmatic; TILES_PDL=0 launches without)" if launch.programmatic
              else "cuLaunchKernel")

    def plan_launch(self, k: ir.Kernel, args, device: int) -> Launch:
        """The launch of k on these arguments, after every check before it."""
        env = check_launch(k, args, device)
        gen, fn = self.compiled(k, device)
        try:
            specs = tensor_map_specs(k, gen.schedule, args)
        except TileError:
            if k.options.get("schedule") == "warp_specialized":   # asked for by name: refuse, saying why
                raise
            gen, fn = self.compiled(k, device, "warp")   # arrays TMA cannot address: the warp schedule reads them
            specs = []
        grid = tuple(int(ir.evaluate(g, env)) for g in k.grid)
        if gen.schedule.persistent:   # one block per SM (or blocks_per_sm) walks every tile of tl.grid
            c = gen.schedule.cluster   # in clusters: axis 0 in pairs of tiles, whole clusters of blocks
            tiles = -(-grid[0] // c) * int(np.prod(grid[1:]))
            grid = (min(tiles, self.sms * gen.schedule.blocks // c) * c,)
        params = pack(k, args)
        names = [p.name for p in k.params]
        maps = [(len(params) + i, names.index(m.gl), spec)
                for i, (m, (spec, _)) in enumerate(zip(gen.schedule.maps, specs))]
        return Launch(fn, grid, (gen.schedule.threads,), gen.schedule.smem_bytes,
                      params + [self.tensor_map(spec, ptr) for spec, ptr in specs],
                      programmatic=self.programmatic and gen.schedule.pdl, slots=address_slots(k) + maps)

    def tensor_map(self, spec: TensorMapSpec, address: int) -> np.ndarray:
        """Encoded once per (spec, address): a benchmark's repeated launches do not pay the driver call."""
        key = (spec, address)
        if key not in self.tensor_maps:
            if len(self.tensor_maps) >= LAUNCH_MEMO * 4:   # a model's allocations move: start over
                self.tensor_maps.clear()
            self.tensor_maps[key] = encode_tensor_map(spec, address)
        return self.tensor_maps[key]

    def _stream(self, args, device: int) -> int:
        """torch's current stream when a torch tensor is among the arguments, else cupy's (a raw handle)."""
        for a in args:
            if type(a).__module__.startswith("torch"):
                return torch_stream(device)
        return self.cupy.cuda.get_current_stream().ptr
