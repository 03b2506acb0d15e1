"""Where a torch op runs: the backend of the device its tensors live on, and the tensors as that backend
takes them.

    CUDA tensor, torch for NVIDIA       -> "cuda"       (sm_90a on Hopper, sm_80 on Ampere)
    CUDA tensor, torch for ROCm         -> "hip"        (torch.version.hip set; gfx942, gfx950)
    mps tensor                          -> "metal"
    CPU tensor                          -> "reference"  (numpy; slow, for tests and machines without a GPU),
                                           or the backend named by backend= or $TILES_TORCH_BACKEND
                                           (an emulator such as "hip-emu:gfx950": slower still)

Device backends take the tensors themselves (no copies: the kernel reads and writes torch's memory, on
torch's current stream). The reference interpreter and the emulators take numpy views of CPU tensors, which
share their memory, so the outputs the op allocated are written in place.
"""
from __future__ import annotations

import os
import threading

import ml_dtypes
import numpy as np
import torch

from tiles import backend as backends
from tiles.dsl import TileError

ENV = "TILES_TORCH_BACKEND"
HOST_KINDS = ("reference", "emulator")   # backends that run on host memory

# numpy has no bf16 or fp8: their tensors are viewed through integers of the same width
_NARROW = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
           torch.float8_e4m3fn: (torch.uint8, ml_dtypes.float8_e4m3fn),
           torch.float8_e5m2: (torch.uint8, ml_dtypes.float8_e5m2)}


def backend_name(device: torch.device, name: str = "") -> str:
    """The backend for tensors on `device`; `name` (or $TILES_TORCH_BACKEND for CPU tensors) overrides."""
    if name:
        return name
    if device.type == "cpu":
        return os.environ.get(ENV) or "reference"
    if device.type == "cuda":
        return "hip" if torch.version.hip else "cuda"
    if device.type == "mps":
        return "metal"
    raise TileError(f"tiles has no backend for {device.type} tensors (cpu, cuda, mps)")


def resolve(tensors, name: str = "") -> backends.Backend:
    """The backend for an op's tensors, which must share one device; a TileError naming the two devices if not,
    or if the backend cannot take tensors of that device."""
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        raise TileError(f"tensors on different devices: {', '.join(sorted(map(str, devices)))}")
    (device,) = devices
    b = backends.resolve(backend_name(device, name), tensors)
    if (b.kind in HOST_KINDS) != (device.type == "cpu"):
        raise TileError(f"backend {b.name} ({b.kind}) cannot run on {device} tensors; "
                        f"{'move them to the CPU' if b.kind in HOST_KINDS else 'use a CPU backend for CPU tensors'}")
    return b


def numpy_view(t: torch.Tensor) -> np.ndarray:
    """A numpy array sharing t's memory (a CPU tensor), in the tiles dtype of t."""
    t = t.detach()
    if t.dtype in _NARROW:
        as_int, np_dtype = _NARROW[t.dtype]
        return t.view(as_int).numpy().view(np_dtype)
    return t.numpy()


# the op body being recorded on this thread (replay.Recording), if any: what it allocates and launches
_recording = threading.local()


def recording():
    return getattr(_recording, "current", None)


def empty(shape, like: torch.Tensor, dtype=None) -> torch.Tensor:
    """An op's new tensor (an output or a temporary) on like's device, in dtype (default like's)."""
    t = torch.empty(shape, dtype=dtype or like.dtype, device=like.device)
    rec = recording()
    if rec is not None:
        rec.allocations.append(t)
    return t


def launch(kfn, args, name: str = "", **consts) -> None:
    """Launch a tiles kernel on torch tensors (and Python numbers) where they live. While an op's body is being
    recorded, the launch is prepared (Backend.prepare) and run as prepared, so that the first call runs what a
    replay will."""
    b = resolve([a for a in args if isinstance(a, torch.Tensor)], name)
    arrays = [numpy_view(a) if isinstance(a, torch.Tensor) else a for a in args] if b.kind in HOST_KINDS else list(args)
    rec = recording()
    prepared = None if rec is None else b.prepare(kfn, arrays, **consts)
    if rec is not None:
        rec.launches.append((prepared, args))   # None: a launch the replay cannot make, so no replay
    if prepared is None:
        b.launch(kfn, arrays, **consts)
        return
    prepared([a.data_ptr() if isinstance(a, torch.Tensor) else 0 for a in args])
