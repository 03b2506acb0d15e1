"""Backends: where a kernel runs. Each registers itself here; the reference interpreter is always present.

A backend is one (compiler, place) pair: "reference" (numpy), "cuda" (an NVIDIA GPU), "hip-emu:gfx942"
(the generated HIP executed on the CPU), ... Vendor packages register theirs on import and must import
cheaply: heavy imports (cupy, hip-python, PyObjC) happen in `available()` or at the first launch.
"""
from __future__ import annotations

import ctypes
import functools
import importlib
import os
import shutil
import sys
import threading
import time
import weakref

import numpy as np

from . import dtypes, interp, ir, tune
from .dsl import TileError
from .types import ALIGN, GL


HUNG_S = 60.0   # a launch with host arrays still running after this long is taken as hung (the largest take ~1 s)


class LaunchHung(RuntimeError):
    """A launch never ended; the device is stuck for this process, so callers that go on to other launches (a
    search, a sweep) stop here instead."""


def poll(done, timeout_s: float, step_s: float = 1e-3) -> bool:
    """Whether done() (a device's event or command buffer, queried without blocking) turns true within timeout_s:
    a hung kernel cannot be stopped from the host, but a poll can give up on it where a blocking wait never would."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(step_s)
    return True


def _alike(a, b) -> bool:
    """Two temporaries that one workspace key would serve (tune.Shaped: shape, dtype and fill)."""
    return (a.shape, a.dtype, a.fill) == (b.shape, b.dtype, b.fill)


class Backend:
    name = "reference"
    target: str | None = None     # the target whose kernel configurations it uses
    kind = "reference"            # "reference" | "device" | "emulator"
    device = "CPU (numpy)"

    def available(self) -> str | None:
        """None if this backend can run here, else why not."""
        return None

    def available_for(self, args) -> str | None:
        """available(), for a launch on these arrays (the metal backend takes torch's mps tensors without PyObjC)."""
        return self.available()

    def asarray(self, a: np.ndarray):
        """A host array moved to where this backend runs."""
        return a

    def numpy(self, a) -> np.ndarray:
        return np.asarray(a)

    def finished(self, timeout_s: float) -> bool:
        """Whether the work queued here so far ends within timeout_s (False: still running, a launch that hangs).
        A host backend runs each launch to its end before returning: always True."""
        return True

    def expect_finished(self, kfn, overrides: dict) -> None:
        """Raise LaunchHung, naming the kernel and its keywords, where the launch just queued does not end within
        HUNG_S: a hung kernel cannot be stopped from the host, but it can be named instead of waited on forever."""
        if not self.finished(HUNG_S):
            raise LaunchHung(f"{kfn.__name__} with {overrides} did not finish within {HUNG_S:.0f} s on {self.name}: "
                             f"the launch hangs, and the device cannot be used from this process any more (restart "
                             f"it); leave the configuration out (a search: tune_where) and report it")

    def launch(self, kfn, args, **overrides):
        overrides = tune.resolve(kfn, self, args, overrides)   # the tuned configuration, where one is cached
        main = None
        for f, a, kw in self.steps(kfn, args, overrides):
            k = f.trace(a, self.target, **kw)
            check_args(k, a)
            self.run(k, a)
            main = main or (k if f is kfn else None)
        return main

    def prepare(self, kfn, args, **overrides):
        """The launch of kfn on these arguments as a callable that launches it again on arrays of the same
        signature (shapes, strides, dtypes, devices, 16-byte alignment, which of them share an address; the scalars'
        values) at other addresses: prepared(addresses), one per argument (a scalar's is ignored). None where this
        backend cannot (a device backend without its own). The caller keys what it prepares by that signature
        (tiles/torch/replay.py). Host backends rebuild the arrays at the new addresses and launch as before
        (HostPrepared); a GPU backend with plan_step plans, checks and packs once (DevicePrepared)."""
        if self.kind in ("reference", "emulator"):
            return HostPrepared(self, kfn, args, overrides)
        if not hasattr(self, "plan_step") or any(isinstance(a, np.ndarray) for a in args):   # host arrays: call()
            return None
        return DevicePrepared.of(self, kfn, args, tune.resolve(kfn, self, args, overrides))

    def steps(self, kfn, args, overrides: dict) -> list[tuple]:
        """kfn's launches for these arguments (KernelFn.steps), its temporaries allocated here."""
        steps = kfn.steps(args, self.target, **overrides)
        temps = temporaries(steps)
        if not temps:
            return steps
        like = next((a for a in args if hasattr(a, "shape")), None)
        return placed(steps, {base: self.workspace(base, like, nth) for base, nth in temps})

    def workspace(self, spec, like, nth: int = 0):
        """A temporary array of spec's shape and dtype where `like` lives, reused by later launches of its shape
        (launches on one backend run in order; one launch's steps see it alone); nth: which of a launch's
        temporaries of that shape, dtype and fill it is."""
        if self.kind == "device" and is_torch(like):
            return self.torch_workspace(spec, like.device, nth)
        key = (spec.shape, spec.dtype, spec.fill, str(getattr(like, "device", "")), nth)
        if key not in self._workspaces:   # poisoned: a step that reads what no step wrote fails its checks
            fill = np.nan if spec.fill is None else spec.fill
            self._workspaces[key] = self.asarray(np.full(spec.shape, fill, spec.dtype))
        return self._workspaces[key]

    def torch_workspace(self, spec, device, nth: int = 0):
        """A temporary for launches on torch tensors on `device` (a GPU backend's): from torch's caching allocator,
        which orders reuse by stream; one with a fill is kept from launch to launch (what each leaves behind is
        the fill), one per stream (torch_stream): launches on two streams may run at once."""
        import torch
        dtype = getattr(torch, spec.dtype.name)
        if spec.fill is None:
            return torch.empty(spec.shape, dtype=dtype, device=device)
        key = (spec.shape, spec.dtype, spec.fill, device, self.torch_stream(device), nth)
        if key not in self._workspaces:
            self._workspaces[key] = torch.full(spec.shape, spec.fill, dtype=dtype, device=device)
        return self._workspaces[key]

    @functools.cached_property
    def _workspaces(self) -> dict:
        return {}

    def run(self, k: ir.Kernel, args) -> None:
        interp.run(k, args)

    def call(self, kfn, *args, **overrides) -> ir.Kernel:
        """Launch with host (numpy) arrays: copies them to the backend, runs, copies every array back in place."""
        dev = [self.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        k = self.launch(kfn, dev, **overrides)
        self.expect_finished(kfn, overrides)
        for host, d in zip(args, dev):
            if isinstance(host, np.ndarray) and d is not host:
                host[...] = self.numpy(d)
        return k

    def __repr__(self):
        return f"<backend {self.name}>"


class Emulator(Backend):
    """A vendor's generated source compiled for the host and run on the CPU engine (tiles/emu); subclasses give
    the language and run()."""
    kind = "emulator"
    language = ""   # the generated code it runs: "CUDA", "HIP", "MSL"

    def __init__(self, name: str, target: str):
        self.name, self.target = name, target
        self.device = f"CPU executing the generated {self.language} for {target} (lanes as fibers)"

    def available(self) -> str | None:
        cxx = os.environ.get("CXX") or "g++"
        return None if shutil.which(cxx) else f"no host C++ compiler ({cxx}) to build the emulated {self.language}"

    def launch(self, kfn, args, **overrides):
        """The engine runs on contiguous arrays (a strided one on a copy, written back after): traced for those
        copies, so that what the trace takes as given of an array (GL.aligned) is what the kernel is given."""
        host = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in args]
        k = super().launch(kfn, host, **overrides)
        for a, h in zip(args, host):
            if isinstance(a, np.ndarray) and h is not a:
                np.copyto(a, h)
        return k


def temporaries(steps) -> list[tuple]:
    """(temporary, nth) for each temporary (tune.Shaped) that steps allocate, in the order they first appear: one
    array each, however many steps view it; nth counts the temporaries alike before it (softmax's maxes and sums
    get two arrays)."""
    out: list = []
    for _, args, _ in steps:
        for base in (a.base or a for a in args if isinstance(a, tune.Shaped)):
            if all(base is not t for t, _ in out):
                out.append((base, sum(_alike(base, t) for t, _ in out)))
    return out


def placed(steps, arrays: dict) -> list[tuple]:
    """steps with each temporary replaced by its array (arrays: temporary -> array), a view where a step sees it
    in another shape."""
    def place(a):
        if not isinstance(a, tune.Shaped):
            return a
        return arrays[a] if a.base is None else arrays[a.base].reshape(a.shape)
    return [(f, [place(a) for a in a_], kw) for f, a_, kw in steps]


class DevicePrepared:
    """Backend.prepare on a GPU: each step of the launch traced, checked, planned and packed once, on these
    arguments (the backend's plan_step: an object whose `slots` say where each array's address, or a tensor map
    made for it, sits in its packed parameters). A call takes the arrays' new addresses, checks their alignment
    and the current device, allocates the plan's temporaries (torch's allocator, as a launch would), writes each
    address (or its map, made once per address: the backend's tensor_map) in and issues each step on the stream
    a launch would take. Locked, so that two threads calling one DevicePrepared do not issue each other's
    addresses. The backend provides: current_device(), plan_step(kernel, args, device), issue(step, stream),
    launch_stream(args_are_torch, device), torch_stream(device); tensor_map(spec, address) where a step has maps."""

    def __init__(self, backend, device, steps, names, temporaries, on_torch: bool, aligned):
        """aligned: the sources that were on a 16-byte boundary when the steps were traced (ArgSpec.aligned), and
        must be at every call."""
        self.backend, self.device, self.steps, self.names = backend, device, steps, names
        self.temporaries, self.torch, self.aligned = temporaries, on_torch, sorted(aligned)
        self.arrays = sorted({src for _, slots in steps for _, src, spec in slots if spec is None})
        self.maps: dict = {}   # (id(spec), address) -> the map's bytes
        self.lock = threading.Lock()

    @classmethod
    def of(cls, backend, kfn, args, overrides: dict) -> DevicePrepared | None:
        """None where a step takes an array that is neither an argument (nor a view of one from its start) nor a
        temporary of the plan."""
        device = backend.current_device()
        steps = kfn.steps(args, backend.target, **overrides)
        temps = temporaries(steps)
        like = next((a for a in args if hasattr(a, "shape")), None)
        arrays = {t: backend.workspace(t, like, nth) for t, nth in temps}
        starts = {address(a): i for i, a in reversed(list(enumerate(args))) if hasattr(a, "shape")}
        bases = [t for t, _ in temps]

        def source(a) -> int | None:   # the argument a step's array is (or views from its start), or its temporary
            if isinstance(a, tune.Shaped):
                return len(args) + bases.index(a.base or a)
            if not hasattr(a, "shape"):
                return None
            return next((i for i, b in enumerate(args) if b is a), starts.get(address(a)))

        planned = []
        for (f, shaped, kw), (_, a, _) in zip(steps, placed(steps, arrays)):
            step = backend.plan_step(f.trace(a, backend.target, **kw), a, device)
            where = [source(x) for x in shaped]
            if any(where[arg] is None for _, arg, _ in step.slots):
                return None
            planned.append((step, [(offset, where[arg], spec) for offset, arg, spec in step.slots]))
        names = [*kfn.arg_names[:len(args)], *(f"temporary {i}" for i in range(len(temps)))]
        kept = [arrays[t] for t in bases]
        where = [address(a) if hasattr(a, "shape") else 1 for a in args] + [address(a) for a in kept]
        aligned = {src for _, slots in planned for _, src, _ in slots if where[src] % ALIGN == 0}
        if any(map(is_torch, args)):
            return cls(backend, device, planned, names, _fresh(backend, temps, like.device), True, aligned)
        return cls(backend, device, planned, names, lambda: (kept, where[len(args):]), False, aligned)

    def __call__(self, addresses) -> None:
        b = self.backend
        device = b.current_device()
        if device != self.device:
            raise TileError(f"argument {self.names[self.arrays[0]]} is on device {self.device}, the kernel runs on "
                            f"device {device}")
        alive, temps = self.temporaries()   # alive: their memory, until every step is issued
        where = [*addresses, *temps]
        for i in self.aligned:
            if where[i] % ALIGN:
                raise TileError(f"argument {self.names[i]}: data must start on a {ALIGN}-byte boundary (as it did when "
                                f"the launch was prepared), its address is {where[i]:#x} ({where[i] % ALIGN} bytes "
                                f"past one); pass a copy")
        stream = b.launch_stream(self.torch, device)
        with self.lock:
            for step, slots in self.steps:
                for offset, src, spec in slots:
                    step.set(offset, where[src] if spec is None else self.tensor_map(spec, where[src]))
                b.issue(step, stream)

    def tensor_map(self, spec, address: int) -> np.ndarray:
        m = self.maps.get((id(spec), address))
        if m is None:
            if len(self.maps) >= 4096:   # a model's allocations move: start over
                self.maps.clear()
            m = self.maps[id(spec), address] = self.backend.tensor_map(spec, address)
        return m


SCRATCH_ALIGN = 256   # bytes between the starts of the pieces of one scratch buffer


def scratch_layout(nbytes) -> tuple[list[int], int]:
    """(offsets, total bytes) of pieces of these sizes in one scratch buffer, each on a SCRATCH_ALIGN boundary (a
    piece of 0 bytes takes no room)."""
    sizes = [-(-n // SCRATCH_ALIGN) * SCRATCH_ALIGN for n in nbytes]
    return [sum(sizes[:i]) for i in range(len(sizes))], sum(sizes)


def _fresh(backend, temps, device):
    """temporaries() of a DevicePrepared on torch tensors: (memory, addresses). Those a launch writes before it
    reads are pieces of one buffer from torch's allocator, new each call (one allocation however many the plan
    has); those with a fill are the backend's kept ones (torch_workspace)."""
    offsets, total = scratch_layout(0 if t.fill is not None else t.nbytes for t, _ in temps)

    def temporaries():
        import torch
        scratch = torch.empty(total, dtype=torch.uint8, device=device) if total else None
        base = scratch.data_ptr() if total else 0
        return scratch, [base + o if t.fill is None else address(backend.torch_workspace(t, device, nth))
                         for (t, nth), o in zip(temps, offsets)]
    return temporaries


def address(a) -> int:
    """A device array's address: torch's data_ptr() first (its __cuda_array_interface__ is built anew on every
    access, microseconds each), then the interface's."""
    if callable(getattr(a, "data_ptr", None)):
        return int(a.data_ptr())
    if hasattr(a, "__cuda_array_interface__"):
        return int(a.__cuda_array_interface__["data"][0])
    raise TypeError(f"{type(a).__name__} is not a CUDA array")


class HostPrepared:
    """Backend.prepare on host memory: each call views the memory at the new addresses as the arrays the launch
    was prepared with (numpy, the same shapes, strides and dtypes) and launches them."""

    def __init__(self, backend: Backend, kfn, args, overrides: dict):
        self.backend, self.kfn, self.overrides = backend, kfn, overrides
        self.args = [(a.shape, a.strides, a.dtype) if isinstance(a, np.ndarray) else a for a in args]

    def __call__(self, addresses) -> None:
        args = [host_array(addr, *a) if isinstance(a, tuple) else a for addr, a in zip(addresses, self.args)]
        self.backend.launch(self.kfn, args, **self.overrides)


def host_array(address: int, shape, strides, dtype) -> np.ndarray:
    """The host memory at `address` as an array of this shape, byte strides (non-negative) and dtype: a view,
    which the memory's owner must outlive."""
    span = dtype.itemsize + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    memory = (ctypes.c_char * span).from_address(address) if span else b""
    return np.ndarray(shape, dtype, buffer=memory, strides=strides)


_REGISTRY: dict[str, Backend] = {}
_VENDORS = ("cuda", "hip", "metal")


def register(b: Backend) -> Backend:
    _REGISTRY[b.name] = b
    return b


@functools.cache
def _discover():
    for v in _VENDORS:
        importlib.import_module(f"tiles.backends.{v}")


def all_backends() -> list[Backend]:
    _discover()
    return list(_REGISTRY.values())


def available() -> list[Backend]:
    return [b for b in all_backends() if b.available() is None]


def get(name: str) -> Backend:
    _discover()
    if name not in _REGISTRY:
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def is_cuda_array(a) -> bool:
    # the device's type first: torch builds its __cuda_array_interface__ anew on every access
    return getattr(getattr(a, "device", None), "type", None) == "cuda" or hasattr(a, "__cuda_array_interface__")


def is_torch(a) -> bool:
    """A torch tensor (or Parameter), told without importing torch."""
    return type(a).__module__.startswith("torch")


def place(a) -> str | None:
    """The device backend an array lives on: "cuda", "hip" (torch built for ROCm, whose GPU tensors report
    device type "cuda"), "metal" (torch's mps tensors), or None (host memory)."""
    dev = getattr(getattr(a, "device", None), "type", None)
    if is_torch(a):
        if dev == "cuda":
            return "hip" if getattr(sys.modules["torch"].version, "hip", None) else "cuda"
        return "metal" if dev == "mps" else None
    return "cuda" if is_cuda_array(a) else None


def for_arrays(args) -> Backend:
    """The backend where the arrays live: torch's CUDA tensors -> cuda (hip under a ROCm build of torch), mps
    tensors -> metal, other CUDA arrays (cupy, __cuda_array_interface__) -> cuda, host arrays -> reference."""
    return get(next((p for p in map(place, args) if p), "reference"))


def resolve(backend, args=()) -> Backend:
    """A Backend from a name, a Backend, or None (where the arrays live); raises if it cannot run here."""
    b = get(backend) if isinstance(backend, str) else backend or for_arrays(args)
    why = b.available_for(args)
    if why is not None:
        raise RuntimeError(f"backend {b.name} cannot run here: {why}")
    return b


def launch(kfn, args, backend=None, **overrides):
    return resolve(backend, args).launch(kfn, args, **overrides)


def check_args(k: ir.Kernel, args) -> dict:
    """Checks every backend makes before a launch; returns the scalar environment. Raises TileError."""
    if len(args) != len(k.params):
        raise TileError(f"{k.name} takes {len(k.params)} arguments, got {len(args)}", k.loc)
    for p, a in zip(k.params, args):
        if not isinstance(p, GL):
            continue
        shape, strides = tuple(a.shape), _strides(a)
        if len(shape) != p.rank:
            raise TileError(f"argument {p.name}: expected rank {p.rank}, got shape {shape}", k.loc)
        if dtypes.of(a) != p.dtype:
            raise TileError(f"argument {p.name}: expected dtype {p.dtype}, got {dtypes.of(a)}", k.loc)
        if shape[-1] > 1 and strides[-1] != 1:
            raise TileError(f"argument {p.name}: the last dim must be contiguous (stride 1 element), "
                            f"got strides {strides} (in elements)", k.loc)
        if any(n == 0 for n in shape):
            raise TileError(f"argument {p.name}: empty array of shape {shape}", k.loc)
    _check_indexed(k, args)
    env = interp.bind(k, args)
    for c in k.checks:
        va, vb = ir.evaluate(c.a, env), ir.evaluate(c.b, env)
        if not c.holds(va, vb):   # "B.rows is 48 but A.cols is 40"; against a constant "Y.cols is 16 but must be 32"
            must = "must be" if c.op == "==" else "must be greater than"
            want = f"{must} {vb}" if ir.fmt(c.b) == str(vb) else f"{ir.fmt(c.b)} is {vb}"
            raise TileError(f"argument check failed: {ir.fmt(c.a)} is {va} but {want}", c.loc)
    _check_arrivals(k, args)
    return env


_ARRIVALS: "weakref.WeakKeyDictionary[ir.Kernel, list]" = weakref.WeakKeyDictionary()


def _check_arrivals(k: ir.Kernel, args) -> None:
    """store_sum's counters must be 0 before a launch: one left at n by a launch that stopped part way, or an array
    never zeroed, makes a tile's block count as last before the others' parts are in, and the sum is silently
    short. Checked where the counters are host (numpy) arrays; on a device that would cost a synchronization, and
    the kernels' own workspaces (Shaped(fill=0)) start at 0 and every launch leaves them so."""
    if k not in _ARRIVALS:   # (argument index, the op) of each store_sum: found once a kernel
        names = [p.name for p in k.params]
        _ARRIVALS[k] = [(names.index(op.srcs[2].name), op) for op, _ in k.walk() if op.name == "store_sum"]
    for i, op in _ARRIVALS[k]:
        a = args[i]
        if isinstance(a, np.ndarray) and a.any():
            raise TileError(f"store_sum: the counters in {op.srcs[2].name} must all be 0 before the launch (each launch "
                            f"leaves them so); {np.count_nonzero(a)} of {a.size} are not", op.loc)


_INDEXED: "weakref.WeakKeyDictionary[ir.Kernel, dict]" = weakref.WeakKeyDictionary()


def _check_indexed(k: ir.Kernel, args) -> None:
    """Every dimension longer than 1 of an array the kernel accesses must be one some access indexes (or one the
    kernel declares with tl.broadcast_over): the others' entries past 0 would be silently ignored."""
    if k not in _INDEXED:
        _INDEXED[k] = k.indexed_axes()
    for p, a in zip(k.params, args):
        if not isinstance(p, GL) or p.name not in _INDEXED[k]:
            continue
        axes, first = _INDEXED[k][p.name]
        shape = tuple(a.shape)
        for d, n in enumerate(shape):
            ax = 4 - len(shape) + d
            if n > 1 and ax not in axes:
                op = first[ax]
                kept = len(op.attrs["idx"])
                raise TileError(
                    f"argument {p.name}: dimension {d} ({p.name}.{ir.Dim.NAMES[ax]}) has size {n} of shape {shape}, "
                    f"but the kernel never indexes it: this {op.name} (tile coordinates over the last {kept} dims) "
                    f"would use only index 0 there and silently ignore the rest. Index it (e.g. a grid over "
                    f"{p.name}.{ir.Dim.NAMES[ax]}), pass an array without that dimension, or declare "
                    f"tl.broadcast_over({p.name}, {ir.Dim.NAMES[ax]!r}) in the kernel", op.loc)


def _strides(a) -> tuple:
    """Strides in elements, for numpy, cupy and torch arrays."""
    s = a.stride() if callable(getattr(a, "stride", None)) else tuple(x // a.itemsize for x in a.strides)
    return tuple(s)


def as_rows(a, width: int):
    """a (..., R, C) as (..., R * C / width, width): its last two dims as rows of `width` elements, a view of the
    same memory; None where R * C does not divide by width or those dims are not contiguous (a copy would part
    from the memory). For numpy, cupy and torch arrays, the CUDA backend's own and static shapes (tune.Shaped)."""
    *lead, r, c = a.shape
    if (r * c) % width:
        return None
    if not isinstance(a, tune.Shaped):
        step = 1
        for n, s in zip((c, r), reversed(_strides(a)[-2:])):   # a dim of extent 1 has any stride
            if n > 1 and s != step:
                return None
            step *= n
    return a.reshape((*lead, r * c // width, width))


register(Backend())
