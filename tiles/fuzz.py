"""A differential fuzzer of the compiler: random valid kernels, run on the reference interpreter and on every
engine asked for; a disagreement beyond the dtype's tolerance, a crash, or a compile failure of a kernel the
verifier accepted is a finding, shrunk to a small kernel printed as Python source.

A generated kernel is Python source (so a finding is its own reproducer): a few independent *chains* over one
2-D grid of R x C blocks, each starting from loads (global -> registers, or through shared memory, with dtype
conversions), applying random ops of the vocabulary (maps, comparisons and where, reductions with and without
an accumulator, broadcasts, masks, copies, swap_pairs, mma of every transpose variant in a plain or pipelined K
loop, loops whose trip count is a runtime scalar that may be 0 or 1, atomic adds) and storing into its own depth
slices of the output Y. Several chains share one compile, which is what makes the emulators affordable.
Argument extents are random and rarely multiples of the tiles.

    tiles fuzz --budget 120 --backends cuda-emu:sm_80,hip-emu:gfx942 --seed 1
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import os
import random
import time
from pathlib import Path

import numpy as np

from . import backend as registry
from . import testing
from .dsl import TileError

CPU_ENGINES = ("cuda-emu:sm_80", "hip-emu:gfx942", "hip-emu:gfx950", "metal-emu")
_TOL = {"f32": 2e-5, "f16": 4e-3, "bf16": 3.2e-2}   # twice testing.TOLERANCE: a chain rounds several times


@dataclasses.dataclass
class Case:
    """One generated kernel: its source, the constants and the argument arrays (host, before the launch)."""
    seed: int
    chains: list          # [[line, ...], ...]: each chain's statements (indented, inside the kernel body)
    tol: list             # per chain: the tolerance of its least precise dtype
    consts: dict
    shapes: dict          # M, N, KD (the mma's K extent), nk (a loop's trip count)
    ab_dtype: str
    x_dtype: str

    def source(self, chains=None) -> str:
        chains = self.chains if chains is None else chains
        body = [ln for ch in chains for ln in ch]
        return "\n".join([
            "import math",
            "import tiles as tl",
            "",
            "",
            "@tl.kernel",
            "def fuzzed(Y, G, X, Z, A, At, B, Bt, s, nk, *, R, C, K):",
            "    br, bc = tl.grid(tl.cdiv(X.rows, R), tl.cdiv(X.cols, C))",
            *body, ""])

    def arrays(self, rng: np.random.Generator, outputs: int):
        M, N, KD = self.shapes["M"], self.shapes["N"], self.shapes["KD"]
        r = lambda shape, dt, scale=1.0: testing.random_array(shape, dt, rng, scale)  # noqa: E731
        return [testing.poisoned((outputs, M, N), "f32"), r((M, N), "f32"), r((M, N), self.x_dtype),
                r((M, N), "f32"), r((M, KD), self.ab_dtype), r((KD, M), self.ab_dtype), r((KD, N), self.ab_dtype),
                r((N, KD), self.ab_dtype), float(np.float32(rng.uniform(-2, 2))), self.shapes["nk"]]


class _Chain:
    """The statements of one chain, the register tiles it holds, and the output slot it stores to."""

    def __init__(self, g: "Generator", slot: int):
        self.g, self.slot, self.lines, self.low = g, slot, [], "f32"
        self.n = 0

    def tile(self, dtype="f32", rows=None, cols=None, layout="row"):
        self.n += 1
        name = f"t{self.slot}_{self.n}"
        lay = f", layout={layout!r}" if layout != "row" else ""
        self.emit(f"{name} = tl.regs(tl.{dtype}, {rows or 'R'}, {cols or 'C'}{lay})")
        return name

    def vec(self, axis):
        self.n += 1
        name = f"v{self.slot}_{self.n}"
        self.emit(f"{name} = tl.rvec(tl.f32, {'R' if axis == 'rows' else 'C'}, axis={axis!r})")
        return name

    def shared(self, dtype, rows, cols):
        self.n += 1
        name = f"s{self.slot}_{self.n}"
        self.emit(f"{name} = tl.shared(tl.{dtype}, {rows}, {cols})")
        return name

    def emit(self, line, indent=1):
        self.lines.append("    " * indent + line)

    def lower(self, dtype):
        order = ("f32", "f16", "bf16")
        self.low = max(self.low, dtype, key=order.index)


class Generator:
    """Random valid kernels for a set of targets (dtypes and granularity every one of them accepts)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.seed = seed

    def case(self) -> Case:
        rng = self.rng
        R, C = rng.choice((16, 32, 64)), rng.choice((16, 32, 64))
        K = rng.choice((32, 64))
        shapes = dict(M=rng.randint(1, 3 * R), N=rng.randint(1, 3 * C), KD=rng.randint(1, 3 * K), nk=rng.choice((0, 1, 2, 3)))
        self.ab = rng.choice(("bf16", "f16"))
        self.x_dtype = rng.choice(("f32", "bf16", "f16"))
        self.col_layouts = rng.random() < 0.1
        chains, tols = [], []
        for slot in range(rng.randint(1, 3)):
            ch = _Chain(self, slot)
            self.chain(ch)
            chains.append(ch.lines)
            tols.append(_TOL[ch.low])
        return Case(self.seed, chains, tols, dict(R=R, C=C, K=K), shapes, self.ab, self.x_dtype)

    # ------------------------------------------------------------ a chain: a start, some ops, a store

    def chain(self, ch: _Chain):
        rng = self.rng
        start = rng.choice(("load", "load", "shared", "mma", "loop"))
        t = getattr(self, "start_" + start)(ch)
        steps = self.STEPS + ((Generator.step_layout,) if self.col_layouts else ())
        for _ in range(rng.randint(1, 5)):
            t = rng.choice(steps)(self, ch, t)
        if rng.random() < 0.2:
            ch.emit(f"tl.atomic_add(G, {t}, ({rng.choice(('0', 'br'))}, bc))")
        ch.emit(f"tl.store(Y, {t}, ({ch.slot}, br, bc))")

    def start_load(self, ch):
        dst = self.rng.choice(("f32", "f32", "bf16", "f16"))
        t = ch.tile(dst)
        ch.emit(f"tl.load({t}, {self.rng.choice(('X', 'Z'))}, (br, bc))")
        ch.lower(dst)
        ch.lower(self.x_dtype)
        return self._f32(ch, t) if dst != "f32" else t

    def start_shared(self, ch):
        s = ch.shared(self.x_dtype, "R", "C")
        ch.emit(f"tl.load({s}, X, (br, bc))")
        t = ch.tile()
        ch.emit(f"tl.load({t}, {s})")
        ch.lower(self.x_dtype)
        if self.rng.random() < 0.5:   # and back through shared memory
            s2 = ch.shared("f32", "R", "C")
            ch.emit(f"tl.store({s2}, {t})")
            t2 = ch.tile()
            ch.emit(f"tl.load({t2}, {s2})")
            return t2
        return t

    def start_mma(self, ch):
        """acc = sum over K blocks of a' b', every transpose variant; a from registers or shared memory."""
        rng = self.rng
        ta, tb = rng.random() < 0.4, rng.random() < 0.5
        acc = ch.tile()
        ch.emit(f"tl.zero({acc})")
        loop = rng.choice(("pipeline", "range", "none"))
        ab = self.ab
        a_sh = ch.shared(ab, "K", "R") if ta else ch.shared(ab, "R", "K")
        b_sh = ch.shared(ab, "C", "K") if tb else ch.shared(ab, "K", "C")
        a_reg = None
        if not ta and rng.random() < 0.4:
            a_reg = ch.tile(ab, "R", "K")
        ind = 1
        k = "0"
        if loop != "none":
            ch.emit(f"for k in tl.{loop}(tl.cdiv(A.cols, K)):")
            ind, k = 2, "k"
        ch.emit(f"tl.load({a_sh}, {'At' if ta else 'A'}, {f'({k}, br)' if ta else f'(br, {k})'})", ind)
        ch.emit(f"tl.load({b_sh}, {'Bt' if tb else 'B'}, {'(bc, ' + k + ')' if tb else '(' + k + ', bc)'})", ind)
        a = a_sh
        if a_reg:
            ch.emit(f"tl.load({a_reg}, {a_sh})", ind)
            a = a_reg
        ch.emit(f"tl.mma_{'At' if ta else 'A'}{'Bt' if tb else 'B'}({acc}, {a}, {b_sh}, {acc})", ind)
        ch.lower(ab)
        return acc

    def start_loop(self, ch):
        """A sum over a runtime trip count nk (0, 1, 2 or 3) of loads at shifted columns."""
        acc = ch.tile()
        ch.emit(f"tl.fill({acc}, 0.5)")
        t = ch.tile()
        ch.emit("for i in tl.range(nk):")
        ch.emit(f"tl.load({t}, Z, (br, bc + i))", 2)
        ch.emit(f"tl.add({acc}, {acc}, {t})", 2)
        return acc

    # ------------------------------------------------------------ steps: tile -> tile, values kept moderate

    def _f32(self, ch, t):
        u = ch.tile()
        ch.emit(f"tl.copy({u}, {t})")
        return u

    def step_unary(self, ch, t):
        op = self.rng.choice(("exp", "exp2", "log", "log2", "abs", "neg", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
                              "relu", "sin", "cos"))
        u = ch.tile()
        if op in ("log", "log2", "sqrt", "rsqrt"):   # a positive domain
            ch.emit(f"tl.abs({u}, {t})")
            ch.emit(f"tl.add({u}, {u}, 0.5)")
            ch.emit(f"tl.{op}({u}, {u})")
        elif op in ("exp", "exp2"):                 # a bounded argument
            ch.emit(f"tl.tanh({u}, {t})")
            ch.emit(f"tl.{op}({u}, {u})")
        else:
            ch.emit(f"tl.{op}({u}, {t})")
        return u

    def step_binary(self, ch, t):
        rng = self.rng
        op = rng.choice(("add", "sub", "mul", "max", "min", "div", "pow"))
        u = ch.tile()
        if op == "pow":
            ch.emit(f"tl.abs({u}, {t})")
            ch.emit(f"tl.add({u}, {u}, 0.25)")
            ch.emit(f"tl.pow({u}, {u}, {rng.choice(('2.0', '0.5', '3', '-1.5', 's'))})")
            return u
        other = rng.choice(("scalar", "const", "tile"))
        if other == "tile":
            w = ch.tile()
            ch.emit(f"tl.load({w}, Z, (br, bc))")
            b = w
        else:
            b = "s" if other == "scalar" else repr(rng.choice((2, -1.5, 0.75, 3)))
        if op == "div":   # a denominator away from 0
            d = ch.tile()
            if b in ("s",) or other == "tile":
                ch.emit(f"tl.abs({d}, {t})")
                ch.emit(f"tl.add({d}, {d}, 1.0)")
                ch.emit(f"tl.div({u}, {b}, {d})" if other == "tile" else f"tl.div({u}, {t}, 1.5)")
                return u
            ch.emit(f"tl.div({u}, {t}, {b})")
            return u
        ch.emit(f"tl.{op}({u}, {t}, {b})")
        return u

    def step_where(self, ch, t):
        """A mask from a comparison of exact values (fresh loads, the scalar), so every backend sees one mask."""
        rng = self.rng
        x, m, u = ch.tile(), ch.tile(), ch.tile()
        ch.emit(f"tl.load({x}, Z, (br, bc))")
        op = rng.choice(("lt", "le", "gt", "ge", "eq", "ne"))
        ch.emit(f"tl.{op}({m}, {x}, {rng.choice(('s', '0.0', '0.5'))})")
        other = rng.choice((x, "0.0", "s"))
        ch.emit(f"tl.where({u}, {m}, {t}, {other})" if rng.random() < 0.5 else f"tl.where({u}, {m}, {other}, {t})")
        return u

    def step_reduce(self, ch, t):
        """A row or column reduction (with or without an accumulator) broadcast back over the tile."""
        rng = self.rng
        axis = rng.choice(("rows", "cols"))
        red = rng.choice(("max", "min", "sum"))
        v = ch.vec(axis)
        pre = "row" if axis == "rows" else "col"
        if rng.random() < 0.5:
            acc = ch.vec(axis)
            ch.emit(f"tl.fill({acc}, {rng.choice(('0.0', '1.0', 's'))})")
            ch.emit(f"tl.{pre}_{red}({v}, {t}, {acc})")
        else:
            ch.emit(f"tl.{pre}_{red}({v}, {t})")
        if red == "sum":
            ch.emit(f"tl.mul({v}, {v}, {1.0 / 64})")
        u = ch.tile()
        ch.emit(f"tl.{rng.choice(('add', 'sub', 'mul'))}_{pre[:3]}({u}, {t}, {v})")
        return u

    def step_mask(self, ch, t):
        rng = self.rng
        u = ch.tile()
        fill = rng.choice(("0.0", "-1.0", "s"))
        if rng.random() < 0.5:
            ch.emit(f"tl.bounds_mask({u}, {t}, X.rows - br * R, X.cols - bc * C, {fill})")
        else:
            ch.emit(f"tl.causal_mask({u}, {t}, br * R, bc * C, {fill})")
        return u

    def step_convert(self, ch, t):
        dt = self.rng.choice(("bf16", "f16"))
        h = ch.tile(dt)
        ch.emit(f"tl.copy({h}, {t})")
        ch.lower(dt)
        if self.rng.random() < 0.3:
            ch.emit(f"tl.swap_pairs({h}, {h})")
        return self._f32(ch, h)

    def step_swap(self, ch, t):
        u = ch.tile()
        ch.emit(f"tl.swap_pairs({u}, {t})")
        return u

    def step_layout(self, ch, t):
        """Through a column-layout register tile (a backend may refuse it: a TileError, not a finding)."""
        u = ch.tile(layout="col")
        ch.emit(f"tl.copy({u}, {t})")
        w = ch.tile()
        ch.emit(f"tl.mul({u}, {u}, 2.0)")
        ch.emit(f"tl.copy({w}, {u})")
        return w

    STEPS = (step_unary, step_unary, step_binary, step_binary, step_where, step_reduce, step_reduce, step_mask,
             step_convert, step_swap)   # step_layout in one kernel of 10: CUDA refuses column layouts


# ---------------------------------------------------------------- running and comparing

def load(case: Case, chains=None, directory: Path | None = None):
    """The kernel of a case, from its source written to a file (tracebacks and TileErrors name its lines)."""
    src = case.source(chains)
    directory = directory or Path(os.environ.get("TILES_CACHE", Path.home() / ".cache" / "tiles")) / "fuzz"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"fuzzed_{hashlib.sha1(src.encode()).hexdigest()[:16]}.py"
    if not path.exists():
        path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fuzzed


def _compare(out, ref, tol) -> str | None:
    """None if out matches ref: NaN exactly where the reference has NaN (unwritten poison), the rest within tol."""
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    nan_o, nan_r = np.isnan(out), np.isnan(ref)
    if (nan_o != nan_r).any():
        i = tuple(int(x[0]) for x in np.nonzero(nan_o != nan_r))
        return f"NaN pattern differs ({int((nan_o != nan_r).sum())} elements, first at {i}: {out[i]} vs {ref[i]})"
    fin = ~nan_r
    diff = out[fin] - ref[fin]
    if not np.isfinite(diff).all():
        if (out[fin][~np.isfinite(diff)] != ref[fin][~np.isfinite(diff)]).any():
            return "infinities differ"
        diff = np.where(np.isfinite(diff), diff, 0.0)
    scale = max(float(np.linalg.norm(ref[fin][np.isfinite(ref[fin])])), 1e-3 * math.sqrt(max(diff.size, 1)))
    err = float(np.linalg.norm(diff)) / scale
    return None if err <= tol else f"relative error {err:.3g} > {tol:.3g}"


@dataclasses.dataclass
class Finding:
    backend: str
    what: str
    source: str
    shapes: dict
    consts: dict

    def __str__(self):
        return (f"[{self.backend}] {self.what}\n  shapes {self.shapes}, constants {self.consts}\n"
                + "\n".join("    " + ln for ln in self.source.splitlines()))


def check(case: Case, backends, chains=None, data_seed: int = 0, ref_nan=None):
    """Run one case everywhere: (per-backend outcome 'ok'/'refused', findings). With ref_nan (the reference
    output's NaN mask of the unshrunk case, per stored chain), a variant whose reference output has other NaNs
    reads a tile nothing wrote (a removal broke it) and counts as not failing."""
    chains = case.chains if chains is None else chains
    slots = _keys(case, chains)   # Y keeps the unshrunk depth: each chain stores to its own slot
    try:
        kfn = load(case, chains)
        args = case.arrays(np.random.default_rng(data_seed), len(case.chains))
        ref = _copy(args)
        registry.get("reference").call(kfn, *ref, **case.consts)
    except TileError:
        return {"reference": "refused"}, []   # the generator made something the verifier refuses: skip it
    if ref_nan is not None and any((np.isnan(ref[0][i]) != ref_nan[c]).any() or np.isnan(ref[1]).any()
                                   for c in slots for i in (c,)):
        return {"reference": "broken"}, []
    outcomes, findings = {"reference": "ok"}, []
    for b in backends:
        got = _copy(args)
        try:
            testing.run(b, kfn, *got, **case.consts)
        except TileError:
            outcomes[b.name] = "refused"
            continue
        except Exception as e:  # noqa: BLE001 - a crash or a compile failure of a verified kernel is a finding
            outcomes[b.name] = "finding"
            findings.append(Finding(b.name, f"{type(e).__name__}: {str(e)[:2000]}", case.source(chains),
                                    case.shapes, case.consts))
            continue
        problems = []
        for i in slots:
            p = _compare(got[0][i], ref[0][i], case.tol[i])
            if p:
                problems.append(f"Y[{i}]: {p}")
        p = _compare(got[1], ref[1], max(case.tol[i] for i in slots))
        if p:
            problems.append(f"G (atomic_add): {p}")
        outcomes[b.name] = "finding" if problems else "ok"
        if problems:
            findings.append(Finding(b.name, "; ".join(problems), case.source(chains), case.shapes, case.consts))
    return outcomes, findings


def _keys(case: Case, chains) -> list:
    """Each chain's index in the unshrunk case: the slot its reference output had there (by its store)."""
    return [int(c[-1].split("(Y, ")[1].split(",")[1].split("(")[1]) for c in chains]


def reference_nan(case: Case, data_seed: int = 0) -> list:
    args = case.arrays(np.random.default_rng(data_seed), len(case.chains))
    registry.get("reference").call(load(case), *args, **case.consts)
    return [np.isnan(args[0][i]) for i in range(len(case.chains))]


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def shrink(case: Case, backend, budget: float = 120.0) -> Finding | None:
    """The smallest kernel (fewest chains, then fewest statements) that still fails on `backend`."""
    t0 = time.time()
    nan = reference_nan(case)

    def fails(chains):
        if time.time() - t0 > budget:
            return None
        try:
            _, found = check(case, [backend], chains, ref_nan=nan)
        except Exception:  # noqa: BLE001 - a removal that breaks the source is not a smaller case
            return None
        return found[0] if found else None

    chains = list(case.chains)
    best = fails(chains)
    if best is None:
        return None
    for ch in list(chains):   # drop whole chains
        if len(chains) > 1:
            trial = [c for c in chains if c is not ch]
            f = fails(trial)
            if f:
                chains, best = trial, f
    for ci in range(len(chains)):   # then single statements, stores last
        i = 0
        while i < len(chains[ci]) - 1:
            trial = [list(c) for c in chains]
            line = trial[ci][i]
            if line.strip().startswith(("for ",)) or "= tl." in line:
                i += 1
                continue
            del trial[ci][i]
            f = fails(trial)
            if f:
                chains, best = trial, f
            else:
                i += 1
    return best


@dataclasses.dataclass
class Report:
    kernels: int = 0
    chains: int = 0
    runs: dict = dataclasses.field(default_factory=dict)      # backend -> kernels run (and compared)
    refused: dict = dataclasses.field(default_factory=dict)   # backend -> kernels a backend refused (TileError)
    findings: list = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        lines = [f"{self.kernels} kernels ({self.chains} chains) generated"]
        for b, n in self.runs.items():
            lines.append(f"  {b:<16} {n} run and compared, {self.refused.get(b, 0)} refused with a TileError")
        lines.append(f"{len(self.findings)} finding(s)")
        return "\n".join(lines + [str(f) for f in self.findings])


def fuzz(budget: float = 60.0, backends=CPU_ENGINES, seed: int = 0, shrink_budget: float = 120.0,
         max_findings: int = 5, log=print) -> Report:
    """Generate and check kernels until `budget` seconds have passed; shrink each finding."""
    bs = []
    for name in backends:
        b = registry.get(name)
        why = b.available()
        if why:
            log(f"skipping {name}: {why}")
        else:
            bs.append(b)
    rep = Report()
    t0, i = time.time(), 0
    while time.time() - t0 < budget and len(rep.findings) < max_findings:
        case = Generator(seed * 1_000_003 + i).case()
        i += 1
        outcomes, found = check(case, bs)
        if outcomes.get("reference") != "ok":
            continue
        rep.kernels += 1
        rep.chains += len(case.chains)
        for name, o in outcomes.items():
            if name == "reference":
                continue
            bucket = rep.refused if o == "refused" else rep.runs
            bucket[name] = bucket.get(name, 0) + 1
        for f in found:
            small = shrink(case, registry.get(f.backend), shrink_budget) or f
            rep.findings.append(small)
            log(str(small))
    return rep
