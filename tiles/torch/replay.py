"""An op's body, run once per signature of its arguments and replayed after that.

What a tiles.torch op's body does (its checks, the kernels and plans it chooses, the views it launches them on,
and each launch's tuning lookup, tracing, checks and packing) depends on its arguments' signature alone: each
tensor's shape, strides, dtype and device, its address modulo 16 and which earlier tensor starts at the same
address; every other argument's value; the tuning cache (its folder and what this process holds of it) and the
backend of CPU tensors ($TILES_TORCH_BACKEND). The first call with a signature runs the body and records what it
allocates (dispatch.empty) and launches (dispatch.launch, each launch prepared: Backend.prepare), tracing every
array a launch takes to the argument, allocation or kept constant (keep) that starts at its address. A later
call with that signature allocates the same outputs (its temporaries as pieces of one scratch buffer), gives
each prepared launch its arrays' new addresses and returns the outputs: on a GPU, one driver call a kernel and no
Python checks, views or plans.

A body that launches on other memory (a contiguous copy of a strided argument), or on a backend that cannot
prepare a launch (metal for now), is not replayed: it runs every call, as it always did.
"""
from __future__ import annotations

import functools
import inspect
import os

import torch

from tiles import tune
from tiles.backend import scratch_layout
from tiles.types import ALIGN

from . import dispatch

MEMO = 1024   # signatures remembered per op (the memo starts over past this)
_MISS = object()
_KEPT: dict[int, torch.Tensor] = {}   # address -> a constant that lives as long as the process
MEMOS: dict[str, dict] = {}           # an op's body's name -> its memo (signature -> Replay, or None: not replayed)


def keep(t: torch.Tensor) -> torch.Tensor:
    """t, a constant the process keeps (a kernel's table): a body that launches on it replays at its address."""
    _KEPT[t.data_ptr()] = t
    return t


def signature(args) -> tuple[tuple, list[int]]:
    """(key, addresses): what the body of an op depends on, of its arguments, and each tensor's address (0 for
    the other arguments)."""
    key, addresses, first = [], [], {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            p = a.data_ptr()
            key.append((a.shape, a.stride(), a.dtype, a.device, p % ALIGN, first.setdefault(p, i)))
            addresses.append(p)
        else:
            key.append((type(a), a))
            addresses.append(0)
    return tuple(key), addresses


class Recording:
    """What one run of a body allocated and launched (dispatch.empty, dispatch.launch append here)."""

    def __init__(self):
        self.allocations: list[torch.Tensor] = []
        self.launches: list[tuple] = []   # (prepared launch or None, its arguments)

    def replay(self, args, addresses, out) -> Replay | None:
        """The Replay of this run, or None where it cannot be replayed."""
        starts: dict[int, int] = {}   # address -> where the replay finds it: argument, allocation, constant
        for i, (a, p) in enumerate(zip(args, addresses)):
            if isinstance(a, torch.Tensor):
                starts.setdefault(p, i)
        constants = list(_KEPT)
        for j, t in enumerate(self.allocations + [_KEPT[p] for p in constants]):
            p = t.data_ptr()
            if p == 0 or p in starts:   # no memory, or an address taken twice: nothing to tell them apart by
                return None
            starts[p] = len(args) + j
        zero = len(args) + len(self.allocations) + len(constants)   # a scalar's address: 0
        launches = []
        for prepared, launched in self.launches:
            sources = [starts.get(a.data_ptr()) if isinstance(a, torch.Tensor) else zero for a in launched]
            if prepared is None or None in sources:
                return None
            launches.append((prepared, sources))
        outputs = []
        for t in (out,) if isinstance(out, torch.Tensor) else out:
            j = starts.get(t.data_ptr(), -1) - len(args)
            if not 0 <= j < len(self.allocations) or not t.is_contiguous() or t.numel() != self.allocations[j].numel():
                return None
            outputs.append((j, None if t is self.allocations[j] else t.shape))
        return Replay(len(args), self.allocations, {j for j, _ in outputs}, constants, launches, outputs,
                      isinstance(out, torch.Tensor))


class Replay:
    """One signature's body, replayed: the outputs allocated as the body allocated them, its other allocations
    (temporaries the caller never sees) as pieces of one scratch buffer (one allocation, however many there
    were), the prepared launches on their sources' addresses (the arguments', the outputs', the temporaries',
    the constants', then 0 for a scalar), the outputs returned."""

    def __init__(self, n_args: int, allocations: list, returned: set, constants: list, launches: list, outputs: list,
                 single: bool):
        kept = [j for j in range(len(allocations)) if j in returned]
        temps = [j for j in range(len(allocations)) if j not in returned]
        if len({allocations[j].device for j in temps}) > 1:   # one buffer serves one device
            kept, temps = list(range(len(allocations))), []
        self.allocations = [(allocations[j].shape, allocations[j].dtype, allocations[j].device) for j in kept]
        self.offsets, total = scratch_layout(allocations[j].numel() * allocations[j].element_size() for j in temps)
        self.scratch = (total, allocations[temps[0]].device) if temps else None
        order = {j: n_args + i for i, j in enumerate(kept + temps)}   # allocation j -> its place among the sources

        def renumbered(s: int) -> int:
            return order.get(s - n_args, s) if n_args <= s < n_args + len(allocations) else s
        self.launches = [(prepared, [renumbered(s) for s in sources]) for prepared, sources in launches]
        self.constants = constants + [0]
        self.outputs = [(kept.index(j), shape) for j, shape in outputs]
        self.single = single

    def __call__(self, addresses):
        new = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype, device in self.allocations]
        where = [*addresses, *[t.data_ptr() for t in new]]
        if self.scratch:   # alive until every launch is issued
            scratch = torch.empty(self.scratch[0], dtype=torch.uint8, device=self.scratch[1])
            where += [scratch.data_ptr() + o for o in self.offsets]
        where += self.constants
        for prepared, sources in self.launches:
            prepared([where[s] for s in sources])
        out = [new[j] if shape is None else new[j].view(shape) for j, shape in self.outputs]
        return out[0] if self.single else tuple(out)


def replayed(body):
    """body (an op's implementation), remembered per signature of its arguments and replayed (module docstring).
    Never while tuning may search (TILES_AUTOTUNE=1: the search runs as the launch's own) or inside a body being
    recorded (its allocations and launches belong to that recording)."""
    memo = MEMOS[body.__name__] = {}

    @functools.wraps(body)
    def op(*args):
        if dispatch.recording() is not None or os.environ.get("TILES_AUTOTUNE") == "1":
            return body(*args)
        key, addresses = signature(args)
        key = (key, tune.generation(), os.environ.get("TILES_CACHE"), os.environ.get(dispatch.ENV))
        replay = memo.get(key, _MISS)
        if replay is None:
            return body(*args)
        if replay is not _MISS:
            return replay(addresses)
        rec = dispatch._recording.current = Recording()
        try:
            out = body(*args)
        finally:
            dispatch._recording.current = None
        if len(memo) >= MEMO:
            memo.clear()
        memo[key] = rec.replay(args, addresses, out)
        return out
    op.__signature__ = inspect.signature(body, eval_str=True)   # torch.library reads the op's schema off it
    return op
