"""The kernel DSL: a Python function traced into the IR.

Ops are plain calls, destination first (ThunderKittens' order); each records one ir.Op with the line of
the user's kernel it came from, so that the verifier and the launch checks can point at that line.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import linecache
import math
import os
import sys
import threading
from contextlib import contextmanager

from . import dtypes, ir
from .types import ALIGN, GL, RT, RV, ST, SV

_HERE = os.path.dirname(os.path.abspath(__file__))
_state = threading.local()


class TileError(Exception):
    """A kernel that is wrong (shape, dtype, layout, target feature) or a call that does not fit it."""

    def __init__(self, message: str, loc: ir.Loc | None = None):
        self.loc, self.problem = loc, message
        super().__init__(f"{loc}\n  {message}" if loc else message)


def _loc() -> ir.Loc | None:
    # frames walked by hand: inspect.stack() reads the source of every frame, most of a kernel's trace time
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_HERE + os.sep):
            text = linecache.getline(filename, frame.f_lineno)
            return ir.Loc(os.path.basename(filename), frame.f_lineno, text)
        frame = frame.f_back
    return None


# Words of C++ (CUDA, HIP) and the Metal Shading Language that a tile's name may not be
RESERVED = frozenset("""
    alignas alignof and asm auto bool break case catch char char16_t char32_t char8_t class concept const consteval
    constexpr constinit const_cast continue decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto half if inline int long mutable namespace new noexcept not nullptr operator
    or private protected public register reinterpret_cast requires return short signed sizeof static static_assert
    static_cast struct switch template this thread_local throw true try typedef typeid typename union unsigned using
    virtual void volatile wchar_t while xor
    bfloat constant device fragment half kernel thread threadgroup threadgroup_imageblock uchar uint ushort vertex
""".split())


class _Builder:
    def __init__(self):
        self.tiles, self.body, self.checks, self.grid = [], [], [], None
        self.grid_group = None
        self.broadcast: dict[str, set] = {}
        self.blocks = [self.body]
        self.names: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        """A tile's name in the generated source: base, or base1, base2, ... when taken."""
        if not base.isidentifier() or base in RESERVED or base.startswith("__"):
            raise TileError(f"tile name {base!r} cannot name a variable in the C++ and MSL the backends generate "
                            "(not an identifier, or a keyword there); choose another", _loc())
        n = self.names.get(base, 0)
        self.names[base] = n + 1
        return base if n == 0 else f"{base}{n}"

    def emit(self, stmt):
        self.blocks[-1].append(stmt)


def _builder() -> _Builder:
    b = getattr(_state, "builder", None)
    if b is None:
        raise TileError("tiles ops can only be called inside a @tiles.kernel function while it is traced")
    return b


def _op(name, dst, *srcs, **attrs):
    _builder().emit(ir.Op(name, dst, tuple(srcs), attrs, _loc()))


# ---------------------------------------------------------------- allocation and structure

def shared(dtype, rows: int, cols: int, name: str = "s") -> ST:
    t = ST(_builder().fresh(name), dtypes.of(dtype), _size(rows, "rows"), _size(cols, "cols"))
    _builder().tiles.append(t)
    return t


def shared_vec(dtype, length: int, name: str = "sv") -> SV:
    t = SV(_builder().fresh(name), dtypes.of(dtype), _size(length, "length"))
    _builder().tiles.append(t)
    return t


def regs(dtype, rows: int, cols: int, layout: str = "row", name: str = "r") -> RT:
    if layout not in ("row", "col"):
        raise TileError(f"layout must be 'row' or 'col', got {layout!r}", _loc())
    t = RT(_builder().fresh(name), dtypes.of(dtype), _size(rows, "rows"), _size(cols, "cols"), layout)
    _builder().tiles.append(t)
    return t


def rvec(dtype, length: int, axis: str = "rows", name: str = "v") -> RV:
    if axis not in ("rows", "cols"):
        raise TileError(f"axis must be 'rows' or 'cols', got {axis!r}", _loc())
    t = RV(_builder().fresh(name), dtypes.of(dtype), _size(length, "length"), axis)
    _builder().tiles.append(t)
    return t


def _size(n, what):
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise TileError(f"tile {what} must be a positive compile-time int, got {n!r}", _loc())
    return n


def grid(*sizes, group=None):
    """Declare the launch grid (1 to 3 dims, scalars of the arguments) and return this block's indices.

    Blocks start in the order of their index, axis 0 fastest. group=g (a grid of 2 or 3 dims; a scalar of the
    arguments, at least 1) starts them column by column within groups of g rows instead: for each group of g
    indices along axis 0, every index of axis 1 in turn, the group's rows fastest; axis 2 slowest. The blocks
    running at once then share a few rows' operands in L2 (GEMM's tiles of A; a few heads' Q), and within a
    group go through axis 1 in order: a kernel whose blocks along axis 1 do less and less work starts the
    longest first (attention backward's causal kv blocks)."""
    b = _builder()
    if b.grid is not None:
        raise TileError("tl.grid is called twice", _loc())
    if not 1 <= len(sizes) <= 3:
        raise TileError(f"tl.grid takes 1 to 3 sizes, got {len(sizes)}", _loc())
    if group is not None:
        if len(sizes) < 2:
            raise TileError(f"tl.grid(group=...) groups the rows of a 2-D or 3-D grid; this grid has {len(sizes)} "
                            "dim", _loc())
        g = ir.as_expr(group)
        if isinstance(group, (int, float)) and (group != int(group) or group < 1):
            raise TileError(f"tl.grid(group=...) takes a whole number of rows of at least 1, got {group}", _loc())
        if g.dtype != dtypes.i32:
            raise TileError(f"tl.grid(group=...) takes a whole number of rows; got a {g.dtype} ({ir.fmt(g)})", _loc())
        if not isinstance(g, ir.Const):   # a scalar of the arguments: tested before the launch
            b.checks.append(ir.Check(g, ir.as_expr(0), _loc(), ">"))
        b.grid_group = g
    b.grid = tuple(ir.as_expr(s) for s in sizes)
    idx = tuple(ir.BlockIdx(i) for i in builtins.range(len(sizes)))
    return idx if len(idx) > 1 else idx[0]


@contextmanager
def _loop(kind, n, stages, name):
    b = _builder()
    loop = ir.Loop(kind, ir.LoopVar(b.fresh(name)), ir.as_expr(n), [], stages, _loc())
    b.emit(loop)
    b.blocks.append(loop.body)
    try:
        yield loop.var
    finally:
        b.blocks.pop()


def range(n, name: str = "i"):  # noqa: A001 - mirrors Python's range inside kernels
    """A loop over 0..n-1 whose body is traced once."""
    with _loop("range", n, None, name) as i:
        yield i


def pipeline(n, stages: int | None = None, name: str = "k"):
    """A loop whose global->shared loads a backend may issue ahead of the compute that uses them."""
    with _loop("pipeline", n, stages, name) as k:
        yield k


def cdiv(a, b):
    return ir.Call("cdiv", (ir.as_expr(a), ir.as_expr(b)))


def minimum(a, b):
    return ir.Call("min", (ir.as_expr(a), ir.as_expr(b)))


def maximum(a, b):
    return ir.Call("max", (ir.as_expr(a), ir.as_expr(b)))


def broadcast_over(g, *axes):
    """Declare that the kernel uses only index 0 of global g along these axes ("batch", "depth", "rows",
    "cols"), however long the caller's array is there: a stride-0 expanded view (torch's expand), say. Without
    it, an argument longer than 1 along an axis no access of the kernel indexes is refused before the launch,
    where its other entries would be silently ignored."""
    if not isinstance(g, GL):
        raise TileError(f"tl.broadcast_over takes a global argument, got {g!r}", _loc())
    bad = [a for a in axes if a not in ir.Dim.NAMES]
    if bad or not axes:
        raise TileError(f"tl.broadcast_over({g.name}, ...): axes must be among {', '.join(ir.Dim.NAMES)}, "
                        f"got {', '.join(map(repr, bad or axes)) or 'none'}", _loc())
    _builder().broadcast.setdefault(g.name, set()).update(ir.Dim.NAMES.index(a) for a in axes)


def check_eq(a, b):
    """Require two argument extents to be equal; tested before every launch, the error names this line."""
    _builder().checks.append(ir.Check(ir.as_expr(a), ir.as_expr(b), _loc()))


def check_gt(a, b):
    """Require a > b (a scalar argument, a softmax scale > 0); tested before every launch like check_eq. A backend
    may use what it declares: a multiplication by a positive scalar commutes with a row max (ir.positive)."""
    _builder().checks.append(ir.Check(ir.as_expr(a), ir.as_expr(b), _loc(), ">"))


# ---------------------------------------------------------------- memory

def load(dst, src, idx=(), *, via=None):
    """dst <- src. From a global, idx gives the tile coordinates (units of dst) over the global's trailing dims.
    via: a shared tile the tile passes through (global -> via -> dst): one bulk copy of whole lines, where a register
    tile's own loads move a fragment's few bytes at a time; in a tl.pipeline, the copy runs ahead."""
    if via is not None:
        load(via, src, idx)
        load(dst, via)
        return
    _op("load", dst, src, idx=_index(idx))


def store(dst, src, idx=(), *, via=None):
    """dst <- src. Into a global, elements past its end are not written. via: a shared tile the tile passes
    through (src -> via -> global), so that the global is written in whole lines."""
    if via is not None:
        store(via, src)
        store(dst, via, idx)
        return
    _op("store", dst, src, idx=_index(idx))


def atomic_add(dst, src, idx):
    """dst += src, atomically, into a global."""
    _op("atomic_add", dst, src, idx=_index(idx))


def store_sum(dst, src, idx, *, parts, part, count: int, arrivals):
    """dst's tile at idx <- the sum of the f32 tiles src that `count` blocks pass for it, each as its `part` (0 to
    count - 1): a sum split over blocks (a GEMM's split of K) in one launch. Each block writes its src to its own
    slice of `parts` (f32, dst's shape with depth times count: the tile (d, r, c)'s part p at depth d * count + p);
    the last of the count to arrive, as `arrivals` counts them (i32, one counter per tile of dst: dst's shape with
    rows and cols in tiles), adds the slices in part order, so that the sum does not depend on which block came
    last, and stores it in dst's dtype. The counters must be zero before the launch and are left at zero."""
    count = _size(count, "count")
    b = _builder()
    for a, x in ((parts, "parts"), (arrivals, "arrivals")):
        if not isinstance(a, GL):
            raise TileError(f"store_sum: {x} must be a global array argument, got {a!r}", _loc())
    if isinstance(dst, GL) and isinstance(src, RT):   # the shapes the verifier's rule leaves to the launch
        loc = _loc()
        checks = [(parts.batch, dst.batch), (parts.depth, dst.depth * count), (parts.rows, dst.rows),
                  (parts.cols, dst.cols), (arrivals.batch, dst.batch), (arrivals.depth, dst.depth),
                  (arrivals.rows, cdiv(dst.rows, src.rows)), (arrivals.cols, cdiv(dst.cols, src.cols))]
        b.checks += [ir.Check(ir.as_expr(x), ir.as_expr(y), loc) for x, y in checks
                     if not (isinstance(x, int) and isinstance(y, int))]   # a rank's leading 1s
    _op("store_sum", dst, src, parts, arrivals, ir.as_expr(part), idx=_index(idx), count=count)


def _index(idx):
    if not isinstance(idx, tuple):
        idx = (idx,)
    return tuple(ir.as_expr(i) for i in idx)


# ---------------------------------------------------------------- compute

def _mma(ta, tb):
    def mma(d, a, b, c):
        _op("mma", d, a, b, c, trans_a=ta, trans_b=tb)
    mma.__name__ = f"mma_{'At' if ta else 'A'}{'Bt' if tb else 'B'}"
    mma.__doc__ = f"d = {'a.T' if ta else 'a'} @ {'b.T' if tb else 'b'} + c, accumulated in f32."
    return mma


mma_AB, mma_ABt, mma_AtB, mma_AtBt = _mma(False, False), _mma(False, True), _mma(True, False), _mma(True, True)


def zero(dst):
    _op("zero", dst)


def fill(dst, value):
    _op("fill", dst, ir.as_expr(value))


def copy(dst, src):
    """dst <- src with dtype conversion (round to nearest even; fp8 e4m3 saturates)."""
    _op("copy", dst, src)


def swap_pairs(dst, src):
    """dst[:, 2j] = src[:, 2j + 1] and dst[:, 2j + 1] = src[:, 2j]: each column pair exchanged (dst may be src)."""
    _op("swap_pairs", dst, src)


def _scalar_or_tile(x):
    return x if isinstance(x, (RT, RV, ST, SV, GL)) else ir.as_expr(x)


def _unary(name):
    def f(dst, src):
        _op(name, dst, src)
    f.__name__ = name
    return f


def _binary(name):
    def f(dst, a, b):
        _op(name, dst, a, _scalar_or_tile(b))
    f.__name__ = name
    return f


def _reduce(name):
    def f(dst, src, acc=None):
        _op(name, dst, src, acc)
    f.__name__ = name
    return f


def _broadcast(name):
    def f(dst, src, vec):
        _op(name, dst, src, vec)
    f.__name__ = name
    return f


exp, exp2, log, log2, abs, neg, sqrt, rsqrt, tanh, sigmoid, silu, gelu, erf, relu, sin, cos = (  # noqa: A001
    _unary(n) for n in ir.UNARY)
add, sub, mul, div, max, min, pow, lt, le, gt, ge, eq, ne = (_binary(n) for n in ir.BINARY)  # noqa: A001


def where(dst, mask, a, b):
    """dst = a where mask is nonzero, else b (a mask from lt/le/gt/ge/eq/ne holds 1.0 or 0.0); a and b are
    tiles of dst's shape or scalars."""
    _op("where", dst, mask, _scalar_or_tile(a), _scalar_or_tile(b))
row_max, row_min, row_sum = (_reduce(f"row_{r}") for r in ir.REDUCE)
col_max, col_min, col_sum = (_reduce(f"col_{r}") for r in ir.REDUCE)
# Every element of an f32 vector (either axis, any length) <- the max / min / sum of the whole tile, over every
# worker's part of it (with acc: combined with acc's element): one exchange across the workers.
tile_max, tile_min, tile_sum = (_reduce(f"tile_{r}") for r in ir.REDUCE)
add_row, sub_row, mul_row, div_row = (_broadcast(f"{b}_row") for b in ir.BROADCAST)
add_col, sub_col, mul_col, div_col = (_broadcast(f"{b}_col") for b in ir.BROADCAST)


def logsumexp2(dst, m, s):
    """Every element of dst <- log2(sum_j s[j] * 2**m[j]) over the whole vectors m and s: the merge of
    online-softmax partials (m a max, s the sum of 2**(x - m) under it) into one log-sum-exp2, computed as
    M + log2(sum_j s[j] * 2**(m[j] - M)) with M = max m; a pair whose m is -inf adds nothing."""
    _op("logsumexp2", dst, m, s)


def causal_mask(dst, src, row0, col0, fill):
    """dst[i, j] = src[i, j] where col0 + j <= row0 + i, else fill."""
    _op("causal_mask", dst, src, ir.as_expr(row0), ir.as_expr(col0), ir.as_expr(fill))


def bounds_mask(dst, src, rows, cols, fill):
    """dst[i, j] = src[i, j] where i < rows and j < cols, else fill."""
    _op("bounds_mask", dst, src, ir.as_expr(rows), ir.as_expr(cols), ir.as_expr(fill))


def dropout(dst, src, p, seed, offset, row0, col0):
    """dst[i, j] = src[i, j] / (1 - p) where u >= p, else 0; u the Philox 4x32-10 uniform of element
    (row0 + i, col0 + j) for (seed, offset), the same on every backend (tiles/philox.py defines it)."""
    _op("dropout", dst, src, ir.as_expr(p), ir.as_expr(seed), ir.as_expr(offset), ir.as_expr(row0),
        ir.as_expr(col0))


# ---------------------------------------------------------------- kernels

class ArgSpec:
    """What tracing needs to know of one argument: a global's dtype, rank and alignment (GL.aligned), or a scalar's
    dtype."""

    def __init__(self, kind: str, dtype: dtypes.DType, rank: int = 0, aligned: bool = False):
        self.kind, self.dtype, self.rank, self.aligned = kind, dtype, rank, aligned

    @staticmethod
    def of(value) -> "ArgSpec":
        if isinstance(value, ArgSpec):
            return value
        if isinstance(value, bool):
            raise TypeError("booleans are not kernel arguments; pass flags as keyword constants")
        if isinstance(value, int):
            return ArgSpec("scalar", dtypes.i32)
        if isinstance(value, float):
            return ArgSpec("scalar", dtypes.f32)
        shape = getattr(value, "shape", None)
        if shape is None:
            raise TypeError(f"cannot pass {type(value).__name__} to a kernel: expected an array or a number")
        if not 1 <= len(shape) <= 4:
            raise TypeError(f"arrays of rank 1 to 4 only, got rank {len(shape)}")
        dtype = dtypes.of(value)
        return ArgSpec("gl", dtype, len(shape), _aligned(value, shape, dtype.itemsize))

    def key(self):
        return (self.kind, self.dtype.name, self.rank, self.aligned)


def _aligned(a, shape, itemsize: int) -> bool:
    """Whether array a starts on an ALIGN-byte boundary and steps by whole ALIGN-byte units along every dim but its
    last, which is contiguous. Dims of extent 1 count too: HIP passes their real strides (a tile past the end reads
    zeros through them), where CUDA's launch passes 0. A shape with no memory (tune.Shaped) stands for a fresh
    allocation: contiguous, at an aligned address."""
    if not callable(getattr(a, "stride", None)) and getattr(a, "strides", None) is None:   # no memory
        strides, address = tuple(int(math.prod(shape[i + 1:])) for i in builtins.range(len(shape))), 0
    else:
        from .backend import _strides   # (tiles.backend imports this module)
        strides = _strides(a)
        if callable(getattr(a, "data_ptr", None)):   # torch's, and the CUDA runtime's own arrays
            address = a.data_ptr()
        else:
            face = getattr(a, "__cuda_array_interface__", None) or getattr(a, "__array_interface__", None)
            address = face["data"][0] if face else 0
    return address % ALIGN == 0 and all(s * itemsize % ALIGN == 0 for s in strides[:-1])


# What backends read from Kernel.options (docs/design.md, "Configurations")
OPTIONS = ("workers", "stages", "schedule", "persistent", "wgmma", "max_registers", "rings", "rewrites",
           "deferred", "turns", "mfma", "exp2_poly", "blocks_per_sm", "resident", "boxes", "shared_vectors",
           "consumer_groups", "cluster", "runs")


class KernelFn:
    """A traceable kernel. configs maps a target name (or "default") to constants and launch options; tune, the
    search space per target that `tiles.tune` searches instead (docs/tuning.md)."""

    def __init__(self, fn, configs: dict | None = None, tune=None, plan=None, heuristic=None):
        functools.update_wrapper(self, fn)
        self.fn, self.configs = fn, dict(configs or {})
        self.tune = tune   # a tiles.tune.Space, or None: no search space
        self.plan = plan   # plan(cfg, *args, target=...): None (one launch of this kernel) or its launches (steps())
        self.heuristic = heuristic   # heuristic(target, *args, **kw): the configuration for these shapes, or {}
        sig = inspect.signature(fn)
        positional = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.arg_names = [p.name for p in positional]
        # arguments a launch may leave out (a default of None: the body sees None), after every required one
        self.required = sum(p.default is inspect.Parameter.empty for p in positional)
        if any(p.default not in (None, inspect.Parameter.empty) for p in positional) or any(
                p.default is inspect.Parameter.empty for p in positional[self.required:]):
            raise TypeError(f"{fn.__name__}: an array argument may default to None only, after every required one")
        self.const_defaults = {p.name: p.default for p in sig.parameters.values() if p.kind == p.KEYWORD_ONLY}
        self._cache: dict = {}
        self._checked: set = set()   # the sets of names shape_config has checked

    def config(self, target: str | None = None, **overrides) -> tuple[dict, dict]:
        """The constants and launch options for a target: defaults < configs['default'] < configs[target] < overrides."""
        overrides.pop("tune", None)   # the call's tuning switch (tiles.tune.resolve), not a constant
        merged = {**self.configs.get("default", {}), **self.configs.get(target or "", {}), **overrides}
        consts = {k: v for k, v in self.const_defaults.items() if v is not inspect.Parameter.empty}
        options = {}
        self.check_names(merged)
        for k, v in merged.items():
            (consts if k in self.const_defaults else options)[k] = v
        missing = [k for k in self.const_defaults if k not in consts]
        if missing:
            raise TypeError(f"{self.__name__}: missing constant(s) {', '.join(missing)}")
        return consts, options

    def check_names(self, cfg: dict) -> None:
        """Every name of cfg a constant or a launch option: a typo must not be ignored silently."""
        for k in cfg:
            if k not in self.const_defaults and k not in OPTIONS:
                raise TypeError(f"{self.__name__}: {k!r} is neither a constant ({', '.join(self.const_defaults)}) "
                                f"nor a launch option ({', '.join(OPTIONS)})")

    def shape_config(self, target: str | None, args, keywords: dict | None = None) -> dict:
        """What the kernel's heuristic sets for these arguments' shapes and the caller's other keywords (attention's
        causal) on target, over configs[target] ({}: none); a name that is neither a constant nor an option is
        refused, as in config()."""
        if self.heuristic is None:
            return {}
        chosen = self.heuristic(target, *args, **{k: v for k, v in (keywords or {}).items() if k != "tune"})
        names = frozenset(chosen)
        if names not in self._checked:   # once per set of names: a launch's host time counts
            self.check_names(chosen)
            self._checked.add(names)
        return dict(chosen)

    def steps(self, args, target: str | None = None, **overrides) -> list[tuple]:
        """The launches one call makes, as (kernel, arguments, keywords): this kernel alone unless its `plan`,
        given the configuration for target (constants and options) and the arguments, returns several. A plan's
        arguments may include temporaries (tiles.tune.Shaped: a shape and a dtype) that the launch allocates; a
        step that launches this kernel again keeps the caller's keywords and is not planned again."""
        if self.plan is None:
            return [(self, args, overrides)]
        consts, options = self.config(target, **overrides)
        planned = self.plan({**consts, **options}, *args, target=target)
        if planned is None:
            return [(self, args, overrides)]
        return [(f, a, {**overrides, **kw} if f is self else kw) for f, a, kw in planned]

    def main_step(self, args, target: str | None = None, **overrides) -> tuple:
        """The step of steps() that launches this kernel: what compiling, inspecting and modelling it describe."""
        return next(s for s in self.steps(args, target, **overrides) if s[0] is self)

    def trace(self, args, target: str | None = None, **overrides) -> ir.Kernel:
        """Trace for argument specs (or example arrays/numbers) and a target's configuration; verified, cached."""
        specs = [ArgSpec.of(a) for a in args]
        if not self.required <= len(specs) <= len(self.arg_names):
            n = len(self.arg_names)
            count = n if self.required == n else f"{self.required} to {n}"
            raise TypeError(f"{self.__name__} takes {count} arguments ({', '.join(self.arg_names)}), got {len(specs)}")
        consts, options = self.config(target, **overrides)
        cache_key = (tuple(s.key() for s in specs), target, tuple(sorted(map(repr, consts.items()))),
                     tuple(sorted(map(repr, options.items()))))
        if cache_key not in self._cache:
            self._cache[cache_key] = self._trace(specs, consts, options, target)
        return self._cache[cache_key]

    def _trace(self, specs, consts, options, target):
        from .verify import verify
        params = []
        for name, s in zip(self.arg_names, specs):
            if s.kind == "gl":
                dims = tuple(1 if ax < 4 - s.rank else ir.Dim(name, ax) for ax in builtins.range(4))
                params.append(GL(name, s.dtype, dims, s.rank, s.aligned))
            else:
                params.append(ir.ScalarArg(name, s.dtype))
        b = _Builder()
        b.names.update((p.name, 1) for p in params)   # a tile named like an argument gets a suffix
        if getattr(_state, "builder", None) is not None:
            raise TileError("kernels cannot be traced inside another kernel")
        _state.builder = b
        try:
            self.fn(*params, *[None] * (len(self.arg_names) - len(params)), **consts)
        finally:
            _state.builder = None
        src_file = os.path.basename(inspect.getsourcefile(self.fn) or "?")
        line = self.fn.__code__.co_firstlineno
        k = ir.Kernel(self.__name__, params, consts, options, b.grid or (), b.tiles, b.body, b.checks,
                      ir.Loc(src_file, line, f"def {self.__name__}(...)"),
                      {n: frozenset(a) for n, a in b.broadcast.items()}, b.grid_group)
        verify(k, target)
        return k

    def __call__(self, *args, backend=None, **overrides):
        """Run on a backend (by name; default: chosen from where the arrays live). Arrays are updated in place."""
        from . import backend as backends
        return backends.launch(self, args, backend, **overrides)

    def __repr__(self):
        return f"<tiles kernel {self.__name__}>"


def kernel(fn=None, *, configs: dict | None = None, tune: dict | None = None, tune_key=None, tune_where=None,
           tune_defaults=None, plan=None, heuristic=None):
    """Decorator: @tiles.kernel or @tiles.kernel(configs={"sm_90a": {...}, "default": {...}}). tune: the search
    space per target ({"sm_90a": dict(BM=[64, 128], ...)}), tune_key: the shape bucket of the arguments,
    tune_where: the constraint that prunes it, tune_defaults: the values callers pass for a shape when they have
    no opinion (tiles.tune.Space, docs/tuning.md); plan: the launches a call makes where one kernel is not enough
    (KernelFn.steps: gemm's split of K into a bf16 C); heuristic(target, *args, **kw): the configuration a launch
    with no tuned entry runs for these shapes and the caller's keywords kw, over configs[target] ({}: configs
    alone; gemm's skinny M, attention's short causal rows)."""
    def make(f):
        space = None
        if tune is not None:
            from .tune import Space
            space = Space(tune, tune_key, tune_where, tune_defaults)
        return KernelFn(f, configs, space, plan, heuristic)
    return make if fn is None else make(fn)
