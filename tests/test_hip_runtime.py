"""The hip device runtime without an AMD GPU: the kernel-argument buffer, the stream a launch goes on (torch's
current one, never a device synchronize), the on-disk code-object cache, and hiprtc in a child process (a crash is
an exception). The device itself is a fake here: what runs on one is named in docs/backends/hip.md."""
import ctypes
import sys

import numpy as np
import pytest

from tiles import dtypes
from tiles.backends.hip import launch, runtime, toolchain
from tiles.dsl import ArgSpec
from tiles.kernels.gemm import gemm
from tiles.kernels.rmsnorm import rmsnorm_fwd
from tiles.kernels.softmax import softmax_fwd

SPECS = [ArgSpec("gl", dtypes.bf16, 2), ArgSpec("gl", dtypes.f32, 1), ArgSpec("gl", dtypes.bf16, 2),
         ArgSpec("gl", dtypes.bf16, 1), ArgSpec("scalar", dtypes.f32)]


class FakeTensor:
    """What the runtime reads of a torch tensor on the GPU (and is_torch: the class's module)."""
    __module__ = "torch"

    def __init__(self, ptr, shape, itemsize, strides=None):
        self.ptr, self.shape, self.itemsize = ptr, tuple(shape), itemsize
        self._strides = strides or tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))

    def data_ptr(self):
        return self.ptr

    def dim(self):
        return len(self.shape)

    def stride(self):
        return self._strides

    def element_size(self):
        return self.itemsize

    def numel(self):
        return int(np.prod(self.shape))


def generated(target="gfx942"):
    return launch.generated(rmsnorm_fwd.trace(SPECS, target), target)


def test_kernel_arguments_are_packed_at_their_alignment():
    y, rstd = FakeTensor(0x7F0000001000, (300, 200), 2), FakeTensor(0x7F0000100000, (300,), 4)
    x = FakeTensor(0x7F0000200000, (300, 200), 2, strides=(256, 1))   # rows 256 elements apart
    w = FakeTensor(0x7F0000300000, (200,), 2)
    buf = runtime.kernargs(generated(), [y, rstd, x, w, 1e-6])
    dims = launch.GL_DIMS.itemsize
    assert dims == 28
    # pointer (8) + dims (28) per global, each pointer 8-aligned, the float scalar after the last dims
    offsets = [0, 40, 80, 120]
    assert len(buf) == 120 + 8 + dims + 4
    for off, t in zip(offsets, (y, rstd, x, w)):
        assert int.from_bytes(buf[off:off + 8], "little") == t.ptr
        got = np.frombuffer(buf[off + 8:off + 8 + dims], launch.GL_DIMS)[0]
        shape = (1,) * (4 - t.dim()) + t.shape
        assert tuple(got)[:4] == shape
    assert tuple(np.frombuffer(buf[88:116], launch.GL_DIMS)[0])[4:] == (0, 0, 256)   # X's row stride, in elements
    assert np.frombuffer(buf[-4:], np.float32)[0] == np.float32(1e-6)


def test_kernel_arguments_refuse_host_arrays_and_huge_arrays():
    g = generated()
    with pytest.raises(TypeError, match="not a device array"):
        runtime.kernargs(g, [np.zeros((4, 4))] * 4 + [1.0])
    big = FakeTensor(0x1000, (2**16, 2**15), 2)   # 4 GiB: past the 32-bit buffer offsets
    with pytest.raises(Exception, match="2 GiB"):
        runtime.kernargs(g, [big, FakeTensor(0x2000, (2**16,), 4), big, FakeTensor(0x3000, (2**15,), 2), 1.0])


def test_stream_is_torchs_current_one_for_torch_tensors(monkeypatch):
    monkeypatch.setattr(runtime, "torch_stream", lambda: 0xABC0)
    assert runtime.stream_for([FakeTensor(0x1000, (4,), 2), 1.0]) == 0xABC0
    assert runtime.stream_for([object(), 1.0]) == 0   # not torch's: the null stream


class FakeHip:
    """hip-python's calls the runtime makes, recorded."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args))
            return {"hipGetDevice": (0, 0), "hipModuleLoadData": (0, "module"),
                    "hipModuleGetFunction": (0, "function"), "hiprtcVersion": (0, 6, 2)}.get(name, (0,))
        return call


def fake_device(monkeypatch, tmp_path, stream: int) -> FakeHip:
    """hip-python faked (its calls recorded), torch's current stream `stream`, one code object on disk for every
    kernel."""
    hip = FakeHip()
    monkeypatch.setattr(runtime, "_hip", lambda: ((hip, FakeHip()), None))
    monkeypatch.setattr(runtime, "torch_stream", lambda: stream)
    code = tmp_path / "k.hsaco"
    code.write_bytes(b"\x7fELF")
    monkeypatch.setattr(runtime, "cached_code_object", lambda src, tgt, ver: code)
    return hip


def test_a_launch_goes_on_torchs_stream_without_synchronizing(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    hip = fake_device(monkeypatch, tmp_path, 0x5000)
    versions = []
    monkeypatch.setattr(runtime, "cached_code_object",
                        lambda src, tgt, ver: versions.append((tgt, ver)) or tmp_path / "k.hsaco")
    x, w = torch.zeros(70, 100, dtype=torch.bfloat16), torch.zeros(100, dtype=torch.bfloat16)
    y, rstd = torch.empty_like(x), torch.empty(70)
    b = runtime.Hip()
    for _ in range(2):
        b.launch(rmsnorm_fwd, [y, rstd, x, w, 1e-6])
    names = [n for n, _ in hip.calls]
    assert names.count("hipModuleLoadData") == 1 and versions == [("gfx942", "6.2")]   # loaded once
    assert names.count("hipModuleLaunchKernel") == 2 and not any("Synchronize" in n for n in names)
    args = dict(hip.calls)["hipModuleLaunchKernel"]
    grid, block, lds, stream = args[1:4], args[4:7], args[7], args[8]
    assert grid == (-(-70 // 64), 1, 1) and block == (256, 1, 1) and stream == 0x5000 and lds >= 0


def test_hip_python_takes_the_launch_as_the_pointers_it_is(monkeypatch, tmp_path):
    """What the runtime hands hipModuleLaunchKernel, through hip-python's own argument conversions (they run
    without ROCm; only the call itself needs libamdhip64): the raw stream handle is that stream, and `extra` is
    the address of HIP_LAUNCH_PARAM_BUFFER_POINTER, the packed arguments, HIP_LAUNCH_PARAM_BUFFER_SIZE, their
    size, HIP_LAUNCH_PARAM_END."""
    torch = pytest.importorskip("torch")
    real = pytest.importorskip("hip").hip
    try:
        from rocm.bindings._hip_helpers import HipModuleLaunchKernel_extra as Extra
    except ImportError:
        from hip._hip_helpers import HipModuleLaunchKernel_extra as Extra
    hip = fake_device(monkeypatch, tmp_path, 0x7F005000)
    x, w = torch.zeros(70, 100, dtype=torch.bfloat16), torch.zeros(100, dtype=torch.bfloat16)
    y, rstd = torch.empty_like(x), torch.empty(70)
    seen = []

    def launch_kernel(*a):   # read through hip-python's conversions while the runtime's buffers are alive
        extra = int(Extra.fromObj(a[10]))
        words = [int(p or 0) for p in ctypes.cast(extra, ctypes.POINTER(ctypes.c_void_p))[:5]]
        size = ctypes.c_size_t.from_address(words[3]).value
        seen.append((int(real.ihipStream_t.fromObj(a[8])), a[9], words, ctypes.string_at(words[1], size)))
        return (0,)
    monkeypatch.setattr(hip, "hipModuleLaunchKernel", launch_kernel, raising=False)
    runtime.Hip().launch(rmsnorm_fwd, [y, rstd, x, w, 1e-6])
    (stream, params, words, packed), = seen
    assert stream == 0x7F005000 and params is None
    assert words[0::2] == [1, 2, 3]   # BUFFER_POINTER, BUFFER_SIZE, END (hip_runtime_api.h)
    # the packed arguments: each global's pointer where the layout puts it, the scalar last
    pointers = [int.from_bytes(packed[o:o + 8], "little") for o in (0, 40, 80, 120)]
    assert pointers == [t.data_ptr() for t in (y, rstd, x, w)]
    assert len(packed) == 160 and np.frombuffer(packed[-4:], np.float32)[0] == np.float32(1e-6)


def test_a_prepared_launch_packs_what_kernargs_packs_for_the_new_tensors(monkeypatch, tmp_path):
    """Backend.prepare on the hip backend (tiles.backend.DevicePrepared, HipLaunch): called with other tensors'
    addresses, each step hands hipModuleLaunchKernel the buffer kernargs packs for those tensors (their addresses,
    the plan's temporaries' of that call: pieces of one scratch buffer, and the counters kept with their fill), one
    or two steps (rmsnorm split 4 ways: a temporary of the parts; gemm's K split 4 ways: parts and counters;
    softmax split 4 ways: the parts' maxes and sums, two pieces of the buffer)."""
    torch = pytest.importorskip("torch")
    from tiles.backend import placed, temporaries
    hip = fake_device(monkeypatch, tmp_path, 0x5000)
    seen = []

    def launch_kernel(*a):
        words = [int(p or 0) for p in ctypes.cast(a[10], ctypes.POINTER(ctypes.c_void_p))[:5]]
        seen.append((a[8], ctypes.string_at(words[1], ctypes.c_size_t.from_address(words[3]).value)))
        return (0,)
    monkeypatch.setattr(hip, "hipModuleLaunchKernel", launch_kernel, raising=False)
    b = runtime.Hip()
    monkeypatch.setattr(b, "torch_stream", lambda device: 0)   # the kept counters' stream

    def norm():
        x, w = torch.randn(70, 4096, dtype=torch.bfloat16), torch.randn(4096, dtype=torch.bfloat16)
        return [torch.empty_like(x), torch.empty(70), x, w, 1e-6]

    def product():
        return [torch.empty(16, 256), torch.randn(16, 4096, dtype=torch.bfloat16),
                torch.randn(4096, 256, dtype=torch.bfloat16)]
    def rows():
        x = torch.randn(16, 8192, dtype=torch.bfloat16)
        return [torch.empty_like(x), x]
    for kfn, tensors, split, launches, temps in ((rmsnorm_fwd, norm, 1, 1, 0), (rmsnorm_fwd, norm, 4, 2, 1),
                                                 (gemm, product, 4, 1, 2), (softmax_fwd, rows, 4, 2, 2)):
        prepared = b.prepare(kfn, tensors(), SPLIT=split)
        made = []   # what each call's temporaries() gives: (memory, addresses)
        temporaries_of = prepared.temporaries
        prepared.temporaries = lambda: made.append(temporaries_of()) or made[-1]
        new = tensors()
        seen.clear()
        prepared([t.data_ptr() if isinstance(t, torch.Tensor) else 0 for t in new])
        steps = kfn.steps(new, "gfx942", SPLIT=split)
        ((_, addresses),) = made
        assert len(addresses) == temps
        spans = sorted((p, p + t.nbytes) for (t, _), p in zip(temporaries(steps), addresses))
        assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:])), "temporaries overlap"
        at = {t: FakeTensor(p, t.shape, t.dtype.itemsize) for (t, _), p in zip(temporaries(steps), addresses)}
        want = [runtime.kernargs(launch.generated(f.trace(shaped, "gfx942", **kw), "gfx942"), a)
                for (f, shaped, kw), (_, a, _) in zip(steps, placed(steps, at))]
        assert [packed for _, packed in seen] == want and len(want) == launches
        assert {stream for stream, _ in seen} == {0x5000}


class EventHip(FakeHip):
    """hipEventQuery answers `answers` in turn, then its last one forever (600: not ready, 0: done)."""
    hipEventDisableTiming = 2

    class hipError_t:   # noqa: N801 - hip-python's enum's name
        hipSuccess, hipErrorNotReady = 0, 600

    def __init__(self, *answers):
        super().__init__()
        self.answers = list(answers)

    def __getattr__(self, name):
        if name == "hipEventCreateWithFlags":
            return lambda flags: self.calls.append((name, (flags,))) or (0, "event")
        if name == "hipEventQuery":
            return lambda event: self.calls.append((name, (event,))) or (
                self.answers.pop(0) if len(self.answers) > 1 else self.answers[0],)
        return super().__getattr__(name)


def test_a_hung_launch_is_named_not_waited_on(monkeypatch):
    """finished(): an event recorded behind the last launch, on that launch's stream, polled until it is done or
    the time is up, and destroyed either way (searches and host-array calls wait on launches this way)."""
    b = runtime.Hip()
    b._stream = 0x5000
    for hip, done in ((EventHip(600, 600, 600, 0), True), (EventHip(600), False)):
        monkeypatch.setattr(runtime, "_hip", lambda: ((hip, FakeHip()), None))
        assert b.finished(5.0 if done else 0.05) is done
        names = [n for n, _ in hip.calls]
        assert names[-1] == "hipEventDestroy" and (names.count("hipEventQuery") == 4 or not done)
        assert dict(hip.calls)["hipEventRecord"] == ("event", 0x5000)
        assert dict(hip.calls)["hipEventCreateWithFlags"] == (2,)   # no timing: synchronization only
    monkeypatch.setattr(runtime, "_hip", lambda: ((EventHip(400), FakeHip()), None))
    with pytest.raises(RuntimeError, match="HIP call failed: 400"):
        b.finished(1.0)


def test_code_objects_are_cached_on_disk(monkeypatch, tmp_path):
    monkeypatch.setenv("TILES_CACHE", str(tmp_path))
    calls = []
    monkeypatch.setattr(toolchain, "compile_hiprtc", lambda src, tgt: calls.append(tgt) or b"code:" + tgt.encode())
    src = generated().source
    p1 = runtime.cached_code_object(src, "gfx942", "6.2")
    p2 = runtime.cached_code_object(src, "gfx942", "6.2")
    assert p1 == p2 and p1.parent == tmp_path / "hip" and p1.read_bytes() == b"code:gfx942" and len(calls) == 1
    assert runtime.cached_code_object(src, "gfx950", "6.2") != p1            # another target
    assert runtime.cached_code_object(src, "gfx942", "6.3") != p1            # another hiprtc
    monkeypatch.setattr(toolchain, "headers_digest", lambda: "other headers")
    assert runtime.cached_code_object(src, "gfx942", "6.2") != p1            # other headers
    assert len(calls) == 4


def test_hiprtc_runs_in_a_child_process(monkeypatch):
    """A compiler that dies takes only its child process: the caller gets CompilerCrash, or CompileError with the
    log for a compiler that refuses."""
    monkeypatch.setattr(toolchain, "_worker_cmd", lambda: [sys.executable, "-c", "import os; os.abort()"])
    with pytest.raises(toolchain.CompilerCrash, match="SIGABRT"):
        toolchain.compile_hiprtc("int x;", "gfx942")
    monkeypatch.setattr(toolchain, "_worker_cmd",
                        lambda: [sys.executable, "-c", "import sys; print('kernel.hip:3: error: no'); sys.exit(1)"])
    with pytest.raises(toolchain.CompileError, match="kernel.hip:3: error"):
        toolchain.compile_hiprtc("int x;", "gfx942")
    with pytest.raises(ValueError, match="unknown CDNA target"):
        toolchain.compile_hiprtc("int x;", "gfx90a")


def test_headers_digest_covers_what_hiprtc_is_handed():
    names = {f"{p.parent.name}/{p.name}" for p in toolchain.headers()}
    assert "tiles_hip/tiles.hpp" in names and "tiles_cuda/philox.h" in names
    assert len(toolchain.headers_digest()) == 16
