"""Autotuning: a search space per kernel and target, pruned by the offline toolchains, ranked by a static cost
model, timed on a device, and the winners kept in a persistent cache that every launch reads (docs/tuning.md).

    @tl.kernel(configs=CONFIGS,
               tune={"sm_90a": dict(BM=[64, 128], BN=[128, 256], stages=[3, 4], workers=[1, 2])},
               tune_key=lambda C, A, B: (tl.tune.pow2(A.shape[0]), B.shape[-1], A.shape[-1]),
               tune_where=lambda cfg, C, A, B: cfg["BM"] <= 2 * tl.tune.pow2(A.shape[0]))

A space maps a target (or "default", for every target without its own) to lists of values of constants and
launch options; a value may instead be a function of the kernel's arguments (anything with .shape and
.dtype) returning the list. `tune_where(cfg, *args)` sees the whole configuration (constants and options)
and prunes what cannot or need not run. `tune_key(*args)` is the shape bucket: launches whose arguments fall in
one bucket share one cache entry.

A launch (`Backend.launch`) looks its bucket up in the cache (a dict in memory, read from disk once per process)
and runs the winner under the caller's keywords; with no entry it runs the configured default. It never
searches unless asked: `tune=True` at the call, or TILES_AUTOTUNE=1. `tune=False` runs the default even where an
entry exists; a caller who sets one of the tuned names chooses for themselves, and the cache is not read.
"""
from __future__ import annotations

import os

import numpy as np

from .cache import (Entry, cache_dir, entries, forget, generation, identity, judge, key_of, read_file, source_hash,
                    store, summary)
from .model import model, model_device, work
from .search import Candidate, Result, candidates, defaults, prune, rank, search
from .space import Shaped, Space, pow2, shapes_of
from .workload import result_json, tune_workload

__all__ = ["Candidate", "Entry", "Result", "Shaped", "Space", "cache_dir", "candidates", "defaults", "entries", "forget",
           "identity",
           "judge", "key_of", "model", "model_device", "pow2", "prune", "rank", "read_file", "resolve", "result_json",
           "search", "shapes_of", "source_hash", "store", "summary", "tune_workload", "work"]

_MISS = object()


RESOLVED_MEMO = 4096   # launches' resolved keywords remembered (the memo starts over past this)
_RESOLVED: dict = {}


def resolve(kfn, b, args, overrides: dict) -> dict:
    """The keywords a launch of kfn on backend b runs with: the cache's winner for these arguments under the
    caller's keywords; else the kernel's heuristic for these shapes (defaults); else the caller's alone. Pops the
    call's `tune` switch.

    What it depends on (the arguments' shapes and dtypes, the scalars, the keywords, the backend and its target,
    the cache's folder and the entries this process holds) is remembered per launch, so that a model's repeated
    launches do not pay the lookup: a kernel's tune_key and heuristic see shapes, dtypes and scalar values, never
    addresses or strides. A launch that may search (tune=True, TILES_AUTOTUNE=1) is never remembered."""
    mode = overrides.pop("tune", None)
    if mode or os.environ.get("TILES_AUTOTUNE") == "1":
        return _resolve(kfn, b, args, overrides, mode)
    try:
        key = (kfn, b.name, b.target, mode, tuple(overrides.items()), tuple(map(_signature, args)),
               os.environ.get("TILES_CACHE"), generation())
        hit = _RESOLVED.get(key)
    except TypeError:   # an unhashable keyword: nothing to remember it by
        return _resolve(kfn, b, args, overrides, mode)
    if hit is None:
        if len(_RESOLVED) >= RESOLVED_MEMO:
            _RESOLVED.clear()
        hit = _RESOLVED[key] = _resolve(kfn, b, args, overrides, mode)
    return dict(hit)


def _signature(a):
    """An argument as a configuration may depend on it: an array's shape and dtype, a scalar's value (numpy's
    scalars have a shape too)."""
    shape = None if isinstance(a, np.generic) else getattr(a, "shape", None)
    return (type(a), a) if shape is None else (tuple(shape), a.dtype)


def _resolve(kfn, b, args, overrides: dict, mode) -> dict:
    space = kfn.tune
    target = b.target
    if space is not None and mode is not False and not space.chosen(target, args, overrides):
        cfg = entries(kfn).get(key_of(kfn, b, args, overrides), _MISS)
        if cfg is _MISS and (mode or os.environ.get("TILES_AUTOTUNE") == "1"):
            cfg = search(kfn, b, args, overrides).winner.config
        if cfg is not _MISS:
            # a tuned name among the caller's keywords is one of tune_defaults (else it was chosen): the winner's goes
            return {**overrides, **cfg}
    return defaults(kfn, target, args, overrides)
