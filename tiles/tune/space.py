"""Search spaces as kernels declare them (`@tl.kernel(tune=..., tune_key=..., tune_where=..., tune_defaults=...)`),
and arguments as the static steps see them (a shape and a dtype, no memory)."""
from __future__ import annotations

import inspect

import numpy as np

from .. import dtypes, targets


def pow2(n: int) -> int:
    """The smallest power of two >= n (the usual shape bucket of a dim: 1, 2, 4, ..., 16384)."""
    return 1 << max(0, int(n) - 1).bit_length()


class Space:
    """What `@tl.kernel(tune=..., tune_key=..., tune_where=...)` declares."""

    def __init__(self, per_target: dict, key=None, where=None, defaults=None):
        for t, space in per_target.items():
            if t != "default":
                targets.target(t)   # a misspelt target must not be ignored silently
            for name, values in space.items():
                if not (callable(values) or (isinstance(values, (list, tuple)) and values)):
                    raise TypeError(f"tune[{t!r}][{name!r}]: a non-empty list of values or a function of the "
                                    f"arguments returning one, got {values!r}")
        self.per_target, self.key, self.where, self.defaults = dict(per_target), key, where, defaults
        self._base: dict = {}
        self._names: dict = {}

    def for_target(self, target: str | None) -> dict:
        return self.per_target.get(target or "", self.per_target.get("default", {}))

    def names(self, target: str | None) -> frozenset:
        names = self._names.get(target)
        if names is None:
            names = self._names[target] = frozenset(self.for_target(target))
        return names

    def chosen(self, target: str | None, args, overrides: dict) -> bool:
        """Whether the caller set a tuned name to a value of its own: not one of `defaults(*args)`, what a
        caller with no opinion passes for the shape (the row kernels' plan passes rows per block)."""
        named = self.names(target).intersection(overrides)
        if not named:
            return False
        usual = self.defaults(*args) if self.defaults else {}
        return any(n not in usual or usual[n] != overrides[n] for n in named)

    def bucket(self, args) -> tuple:
        """The shape bucket of these arguments (every array's exact shape where the kernel declares none)."""
        if self.key is not None:
            return tuple(self.key(*args))
        return tuple(tuple(a.shape) if hasattr(a, "shape") else None for a in args)

    def base(self, kfn, target: str | None) -> dict:
        """The configuration a launch with no keywords has for target (function defaults < configs)."""
        if target not in self._base:
            defaults = {k: v for k, v in kfn.const_defaults.items() if v is not inspect.Parameter.empty}
            self._base[target] = {**defaults, **kfn.configs.get("default", {}), **kfn.configs.get(target or "", {})}
        return self._base[target]


class Shaped:
    """An argument as the static steps see it: a shape and a dtype, no memory (tracing reads only those)."""

    def __init__(self, shape, dtype, base: Shaped | None = None, fill=None):
        self.shape, self.dtype = tuple(int(n) for n in shape), np.dtype(dtypes.of(dtype).np)
        self.base = base   # the temporary whose memory this one views in another shape (reshape), or None
        # None: a temporary each launch writes before it reads; a value: what it holds before the first launch,
        # and what every launch leaves in it (tl.store_sum's counters, 0), so that one allocation serves them all
        self.fill = fill

    def reshape(self, shape) -> Shaped:
        """The same memory in another shape (a plan's temporary that two steps view differently)."""
        return Shaped(shape, self.dtype, self.base or self, self.fill)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def __repr__(self):
        return f"Shaped({self.shape}, {dtypes.of(self.dtype)})"


def shapes_of(args) -> list:
    """Every array among args as a Shaped; numbers as they are."""
    return [Shaped(a.shape, dtypes.of(a)) if hasattr(a, "shape") else a for a in args]


