"""The PyObjC runtime's own logic (buffer order, argument arrays, threadgroup memory, grid, copies back, errors),
run against a stand-in for the `Metal` module that executes what it is given on the CPU engine.

No Apple machine is available: this cannot show that PyObjC and Metal behave as the stand-in does (that is
written from Apple's API documentation, as runtime.py is), only that runtime.py drives that API consistently
with the kernel it generated and gets the right numbers back."""
import re
import sys
import types

import numpy as np
import pytest

from tiles.backend import get
from tiles.backends.metal import emulator, lanemap, runtime
from tiles.emu import runner
from tiles.kernels.attention import attention_fwd
from tiles.kernels.gemm import gemm
from tiles.testing import assert_close, poisoned, random_array

pytestmark = pytest.mark.skipif(get("metal-emu").available() is not None, reason="no host C++ compiler")

_C_TYPES = {"float": np.float32, "half": np.float16, "int": np.int32, "bfloat": "bfloat16"}


class _Obj:
    """alloc().init() and a setter for anything, as PyObjC objects have."""

    @classmethod
    def alloc(cls):
        return cls()

    def init(self):
        return self

    def __getattr__(self, name):
        if name.startswith("set") and name.endswith("_"):
            return lambda value: setattr(self, name[3:-1], value)
        raise AttributeError(name)


class _Buffer:
    def __init__(self, data: bytes):
        self.bytes = bytearray(data)

    def contents(self):
        return types.SimpleNamespace(as_buffer=lambda n: memoryview(self.bytes)[:n])


class _Encoder:
    def __init__(self, cb):
        self.cb, self.buffers, self.smem = cb, {}, 0

    def setComputePipelineState_(self, pso):
        self.pso = pso

    def setBuffer_offset_atIndex_(self, buf, offset, index):
        assert offset == 0
        self.buffers[index] = buf

    def setBytes_length_atIndex_(self, data, length, index):
        assert len(data) == length
        self.buffers[index] = _Buffer(data)

    def setThreadgroupMemoryLength_atIndex_(self, length, index):
        assert index == 0 and length % 16 == 0
        self.smem = length

    def dispatchThreadgroups_threadsPerThreadgroup_(self, grid, threads):
        self.cb.work = (self, grid, threads)

    def endEncoding(self):
        pass


class _CommandBuffer:
    def computeCommandEncoder(self):
        return _Encoder(self)

    def commit(self):
        enc, grid, threads = self.work
        fn = enc.pso.function
        arrays = []
        for i, (ctype, _, attr) in enumerate(p for p in fn.params if p[2].startswith("buffer(")):
            assert attr == f"buffer({i})", "buffers are bound in order"
            base = ctype.split()[-1].rstrip("*")
            dtype = np.dtype(_C_TYPES[base]) if base != "bfloat" else random_array((1,), "bf16").dtype
            arrays.append(np.frombuffer(enc.buffers[i].bytes, dtype=dtype))
        params = [runner.Param(c, n, emulator.BUILTINS.get(a)) for c, n, a in fn.params]
        mod = runner.compile(fn.source, kernel=fn.name, params=params, shim="metal", atoms=("apple",),
                             defines={**fn.macros, **_DEVICE_MAP})
        assert threads[1] == threads[2] == 1
        mod.launch(grid, threads[0], arrays, shared_bytes=enc.smem)

    def waitUntilCompleted(self):
        pass

    def status(self):
        return 4  # completed


_PARAM = re.compile(r"\s*([\w ]+?\*?)\s+(\w+)\s+(?:\[\[(\w+(?:\(\d+\))?)\]\]|TILES_ATTR\((\w+\(\d+\))\))\s*[,)]")


_DEVICE_MAP: dict = {}  # defines that give the stand-in "device" another simdgroup_matrix layout


class _Function:
    """A kernel of the library: its source and its (C type, name, attribute) parameters, read off the source."""

    def __init__(self, source, name, macros):
        self.source, self.name, self.macros = source, name, dict(macros)
        sig = source[source.index(f"kernel void {name}(") + len(f"kernel void {name}("):]
        sig = sig[:sig.index("{")]
        self.params = [(m.group(1), m.group(2), m.group(3) or m.group(4)) for m in _PARAM.finditer(sig)]


class _Device:
    def __init__(self):
        self.compiled = []  # (source, macros) of every library made

    def name(self):
        return "stand-in"

    def newCommandQueue(self):
        return types.SimpleNamespace(commandBuffer=_CommandBuffer)

    def newLibraryWithSource_options_error_(self, source, options, error):
        assert '#include "tiles_metal' not in source, "the runtime hands Metal one self-contained text"
        assert options.FastMathEnabled is False
        self.language = options.LanguageVersion
        macros = getattr(options, "PreprocessorMacros", {})
        self.compiled.append((source, macros))
        lib = types.SimpleNamespace(newFunctionWithName_=lambda n: _Function(source, n, macros)
                                    if f"kernel void {n}(" in source else None)
        return lib, None

    def newComputePipelineStateWithFunction_error_(self, fn, error):
        pso = types.SimpleNamespace(function=fn, maxTotalThreadsPerThreadgroup=lambda: 1024,
                                    threadExecutionWidth=lambda: 32)
        return pso, None

    def maxThreadgroupMemoryLength(self):
        return 32 * 1024

    def newBufferWithBytes_length_options_(self, data, length, options):
        assert len(data) <= length
        return _Buffer(bytes(data) + bytes(length - len(data)))


@pytest.fixture
def device(monkeypatch):
    fake = types.ModuleType("Metal")
    fake.MTLCreateSystemDefaultDevice = _Device
    fake.MTLCompileOptions = _Obj
    fake.MTLLanguageVersion3_0, fake.MTLLanguageVersion3_1 = (3 << 16), (3 << 16) + 1
    fake.MTLResourceStorageModeShared = 0
    fake.MTLCommandBufferStatusCompleted, fake.MTLCommandBufferStatusError = 4, 5
    fake.MTLSizeMake = lambda w, h, d: (w, h, d)
    monkeypatch.setitem(sys.modules, "Metal", fake)
    monkeypatch.setattr(runtime.sys, "platform", "darwin")
    dev = runtime.MetalDevice()
    assert dev.available() is None
    return dev


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_gemm_through_the_runtime(device, dtype):
    """bf16 needs Metal 3.1 and keeps the scratch path; f16 gets the checked lane map."""
    a, b = random_array((70, 50), dtype), random_array((50, 90), dtype)
    c = poisoned((70, 90), "f32")
    device.launch(gemm, [c, a, b])
    assert_close(c, a.astype(np.float64) @ b.astype(np.float64), "f32")
    dev = device._device
    assert dev.language == (3 << 16) + (dtype == "bf16")
    checked = any("kernel void tiles_lane_map(" in src for src, _ in dev.compiled)
    assert checked == (dtype == "f16"), "the lane map is checked on the first kernel that could use it"
    assert ("TILES_METAL_LANE_MAP" in dev.compiled[-1][1]) == (dtype == "f16")


def test_another_lane_map_keeps_the_scratch(device, monkeypatch):
    """A device whose layout is not targets.py's: the check says so, a warning, and kernels stay correct."""
    monkeypatch.setitem(_DEVICE_MAP, "TILES_METAL_EMU_OTHER_LANE_MAP", None)
    a, b = random_array((40, 30), "f16"), random_array((30, 20), "f16")
    c = poisoned((40, 20), "f32")
    with pytest.warns(UserWarning, match="lane map differs"):
        device.launch(gemm, [c, a, b])
    assert_close(c, a.astype(np.float64) @ b.astype(np.float64), "f32")
    assert "TILES_METAL_LANE_MAP" not in device._device.compiled[-1][1]


def test_attention_through_the_runtime(device):
    """Float scalars travel in their own constant buffer after the ints."""
    q, k, v = (random_array((1, 2, 40, 64), "f16") for _ in range(3))
    o, lse = poisoned(q.shape, "f16"), poisoned(q.shape[:3], "f32")
    device.launch(attention_fwd, [o, lse, q, k, v, 0.125], D=64)
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) * 0.125
    p = np.exp(s - s.max(-1, keepdims=True))
    assert_close(o, p / p.sum(-1, keepdims=True) @ v.astype(np.float64), "f16")
    assert_close(lse, np.log(p.sum(-1)) + s.max(-1), "f32", tol=1e-4)


def test_lane_map_check_through_the_runtime(device):
    assert lanemap.check(device) is None


def test_command_buffer_errors_are_exceptions(device, monkeypatch):
    monkeypatch.setattr(_CommandBuffer, "status", lambda self: 5)
    monkeypatch.setattr(_CommandBuffer, "error", lambda self: types.SimpleNamespace(
        localizedDescription=lambda: "Execution of the command buffer was aborted"), raising=False)
    a = random_array((8, 8), "f16")
    with pytest.raises(runtime.MetalError, match="command buffer failed: Execution"):
        device.launch(gemm, [poisoned((8, 8), "f32"), a, a])


def test_a_command_buffer_that_never_ends_is_named(device, monkeypatch):
    """Its status polled until it ends: one still scheduled (3) after backend.HUNG_S raises LaunchHung naming the
    kernel, instead of waiting forever; one that ends after a few polls runs as usual."""
    from tiles import backend
    polls = []
    monkeypatch.setattr(_CommandBuffer, "status", lambda self: polls.append(1) or (4 if len(polls) > 3 else 3))
    a = random_array((8, 8), "f16")
    c = poisoned((8, 8), "f32")
    device.launch(gemm, [c, a, a])
    assert len(polls) >= 4
    assert_close(c, a.astype(np.float64) @ a.astype(np.float64), "f16")
    monkeypatch.setattr(_CommandBuffer, "status", lambda self: 3)
    monkeypatch.setattr(backend, "HUNG_S", 0.05)
    with pytest.raises(backend.LaunchHung, match=r"tiles_kernel_gemm did not finish within 0 s on metal"):
        device.launch(gemm, [poisoned((8, 8), "f32"), a, a])


@pytest.mark.skipif(sys.platform == "darwin", reason="off macOS only")
def test_not_available_off_macos():
    assert "Metal needs macOS" in runtime.MetalDevice().available()


# ---- torch's mps tensors: what the runtime hands torch.mps.compile_shader ---------------------------------------

class _FakeKernel:
    max_threads_per_threadgroup, thread_execution_width = 1024, 32

    def __init__(self, calls):
        self.calls = calls

    def __call__(self, *args, **kw):
        self.calls.append((args, kw))


class _FakeLibrary:
    def __init__(self, source, calls):
        self.source, self.calls = source, calls

    def __getattr__(self, name):
        assert f"kernel void {name}(" in self.source
        return _FakeKernel(self.calls)


def test_mps_tensors_launch_through_torch_compile_shader():
    """The buffers are the tensors themselves (no copies), in the kernel's buffer order; the int and float
    constants go by value; threads and group size give the kernel's grid of threadgroups; the threadgroup memory is
    declared in the kernel (torch sets no length); the library is compiled once per source."""
    torch = pytest.importorskip("torch")
    from tiles.kernels.rmsnorm import rmsnorm_fwd
    x, w = torch.randn(70, 100).bfloat16(), torch.randn(100).bfloat16()
    y, rstd = torch.empty_like(x), torch.empty(70)
    k = rmsnorm_fwd.trace([y, rstd, x, w, 1e-6], "apple")
    sources, calls = [], []
    compile_shader = lambda src: sources.append(src) or _FakeLibrary(src, calls)  # noqa: E731
    for _ in range(2):
        runtime.launch_mps(k, [y, rstd, x, w, 1e-6], compile_shader)
    assert len(sources) == 1 and len(calls) == 2
    src = sources[0]
    assert "TILES_ATTR(threadgroup(0))" not in src and "threadgroup float4 tiles_arena[" in src
    assert '#include "tiles_metal/' not in src   # the headers inlined: compile_shader has no include path
    mk = runtime._static[k]
    arena = int(re.search(r"tiles_arena\[(\d+)\]", src).group(1))
    assert arena * 16 >= mk.smem_bytes
    args, kw = calls[0]
    assert all(a is t for a, t in zip(args[:4], (y, rstd, x, w)))   # the tensors, not copies
    ints, floats = args[4], args[5]
    _, want_ints, _ = mk.pack([y, rstd, x, w, 1e-6], runtime.interp.bind(k, [y, rstd, x, w, 1e-6]))
    assert ints == list(want_ints) and floats == [pytest.approx(1e-6)]
    assert ints[:7] == [1, 1, 70, 100, 0, 0, 100]      # Y: (1, 1, 70, 100), row stride 100 elements
    groups = -(-70 // mk.kernel.consts["BR"])
    assert kw == dict(threads=(groups * mk.threads, 1, 1), group_size=(mk.threads, 1, 1), arg_casts={4: "int32"})


def test_mps_launch_refuses_a_pipeline_too_small():
    torch = pytest.importorskip("torch")
    from tiles.kernels.rmsnorm import rmsnorm_fwd
    x, w = torch.randn(8, 16).bfloat16(), torch.randn(16).bfloat16()
    args = [torch.empty_like(x), torch.empty(8), x, w, 1e-6]
    k = rmsnorm_fwd.trace(args, "apple")

    class Small(_FakeKernel):
        max_threads_per_threadgroup = 32

    runtime._libraries.clear()
    with pytest.raises(runtime.MetalError, match="threads per threadgroup"):
        runtime.launch_mps(k, args, lambda src: type("L", (), {"__getattr__": lambda self, n: Small([])})())


def test_static_arena_source_builds_against_the_msl_shim():
    """The compile_shader variant of a kernel is well-formed against our model of the Metal library (the host
    check: no Metal compiler on Linux)."""
    from tiles.backends.metal import codegen, toolchain
    from tiles.kernels.rmsnorm import rmsnorm_fwd
    a = [poisoned((8, 16), "bf16"), poisoned((8,), "f32"), random_array((8, 16), "bf16"), random_array((16,), "bf16"),
         1e-6]
    mk = codegen.generate(rmsnorm_fwd.trace(a, "apple"), static_arena=True)
    assert toolchain.compile(mk).ok


def test_mps_tensors_need_torchs_device_not_pyobjc(monkeypatch):
    class MpsTensor:   # what available_for reads: a torch class
        __module__ = "torch"
    monkeypatch.setattr(runtime.sys, "platform", "darwin")
    monkeypatch.setattr(runtime, "_torch_mps", lambda: True)
    monkeypatch.setitem(sys.modules, "Metal", None)   # no PyObjC
    b = runtime.MetalDevice()
    assert b.available_for([MpsTensor(), 1.0]) is None
    assert "pyobjc" in b.available_for([np.zeros(4)]).lower()
    monkeypatch.setattr(runtime, "_torch_mps", lambda: False)
    assert "no MPS device" in b.available_for([MpsTensor()])
