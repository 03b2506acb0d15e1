"""A differential fuzzer of the compiler: random valid kernels, run on the reference interpreter and on every
engine asked for; a disagreement beyond the dtype's tolerance, a crash, or a compile failure of a kernel the
verifier accepted is a finding, shrunk to a small kernel printed as Python source.

A generated kernel is Python source (so a finding is its own reproducer): a few independent *chains* over one 2-D
grid of R x C blocks, each starting from loads (global -> registers, or through shared memory, with dtype
conversions, fp8 globals among them), applying random ops of the vocabulary (maps, comparisons and where, reductions
(of rows, columns, whole tiles) with and without an accumulator, vector maps, conversions and round trips through
shared vectors, broadcasts, logsumexp2, dropout, masks, copies to 16-bit and fp8 dtypes, swap_pairs, mma of every
transpose variant and input dtype in a plain or pipelined K loop, loops whose trip count is a runtime scalar that
may be 0 or 1, atomic adds) and storing into its own depth slices of the outputs Y (tiles) and V (vectors). Several
chains share one compile, which is what makes the emulators affordable. Argument extents are random and rarely
multiples of the tiles.

Not every op is valid on every target (fp8 exists on CDNA and sm_90a only): the verifier decides, per backend,
which chains its target takes (all, when the whole kernel traces for it), and a backend's own refusal of a tile
(a TileError naming it) drops that tile's chain; the kernel then runs there with the chains left, against the
reference run of the same chains.

    tiles fuzz --budget 120 --backends cuda-emu:sm_80,hip-emu:gfx942 --seed 1
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import os
import random
import re
import time
from pathlib import Path

import numpy as np

from . import backend as registry
from . import testing
from .dsl import TileError

CPU_ENGINES = ("cuda-emu:sm_80", "hip-emu:gfx942", "hip-emu:gfx950", "metal-emu")
_TOL = {k: 2 * v for k, v in testing.TOLERANCE.items()}   # twice testing.TOLERANCE: a chain rounds several times
_PRECISION = ("f32", "f16", "bf16", "fp8e4m3", "fp8e5m2")   # a chain's tolerance: its least precise rounding
FP8 = ("fp8e4m3", "fp8e5m2")
# The kernel's parameters in order; a kernel takes those its chains name (so that a kernel without fp8 chains has
# no fp8 argument, which a target without fp8 refuses), Y and X always (the grid is over X).
PARAMS = ("Y", "V", "G", "S", "P", "L", "X", "Z", "W", "A", "At", "B", "Bt", "E", "A8", "At8", "B8", "Bt8", "s", "nk",
          "seed")


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
    f8_dtype: str = "fp8e4m3"

    def params(self, chains=None) -> list:
        body = " ".join(ln for ch in (self.chains if chains is None else chains) for ln in ch)
        used = set(re.findall(r"\b\w+\b", body))
        return [p for p in PARAMS if p in used or p in ("Y", "X")]

    def source(self, chains=None) -> str:
        chains = self.chains if chains is None else chains
        body = [ln for ch in chains for ln in ch]
        params = self.params(chains)
        pre = ['    tl.broadcast_over(W, "rows")   # a cols vector read from row 0 of W however many rows it has'] \
            if "W" in params else []
        return "\n".join([
            "import math",
            "import tiles as tl",
            "",
            "",
            "@tl.kernel",
            f"def fuzzed({', '.join(params)}, *, R, C, K):",
            "    br, bc = tl.grid(tl.cdiv(X.rows, R), tl.cdiv(X.cols, C))",
            *pre, *body, ""])

    def arrays(self, rng: np.random.Generator, outputs: int) -> dict:
        """Every parameter's value by name (a kernel takes those of self.params)."""
        M, N, KD = self.shapes["M"], self.shapes["N"], self.shapes["KD"]
        R, C = self.consts["R"], self.consts["C"]
        r = lambda shape, dt, scale=1.0: testing.random_array(shape, dt, rng, scale)  # noqa: E731
        ab, f8 = self.ab_dtype, self.f8_dtype
        nb = max(-(-M // R), -(-N // C))   # V[slot, block, :]: a vector per block, race-free (step_vector)
        return dict(Y=testing.poisoned((outputs, M, N), "f32"), V=testing.poisoned((outputs, nb, max(M, N)), "f32"),
                    G=r((M, N), "f32"), S=testing.poisoned((outputs, M, N), "f32"),
                    P=testing.poisoned((outputs, M, N), "f32"), L=np.zeros((outputs, -(-M // R), -(-N // C)), np.int32), X=r((M, N), self.x_dtype), Z=r((M, N), "f32"), W=r((2, N), "f32"),
                    A=r((M, KD), ab), At=r((KD, M), ab), B=r((KD, N), ab), Bt=r((N, KD), ab),
                    E=r((M, N), f8), A8=r((M, KD), f8), At8=r((KD, M), f8), B8=r((KD, N), f8), Bt8=r((N, KD), f8),
                    s=float(np.float32(rng.uniform(-2, 2))), nk=self.shapes["nk"],
                    seed=int(rng.integers(0, 2**31 - 1)))


class _Chain:
    """The statements of one chain, the register tiles it holds, and the output slot it stores to."""

    def __init__(self, g: "Generator", slot: int):
        self.g, self.slot, self.lines, self.low = g, slot, [], "f32"
        self.n = 0
        self.stored_vector = False   # one vector store per chain: two would overlap other blocks' (a race)
        self.tiles = {}   # register tile -> (dtype, rows, cols)

    def tile(self, dtype="f32", rows=None, cols=None, layout="row"):
        self.n += 1
        name = f"t{self.slot}_{self.n}"
        self.tiles[name] = (dtype, rows or "R", cols or "C")
        lay = f", layout={layout!r}" if layout != "row" else ""
        self.emit(f"{name} = tl.regs(tl.{dtype}, {rows or 'R'}, {cols or 'C'}{lay})")
        return name

    def vec(self, axis, dtype="f32"):
        self.n += 1
        name = f"v{self.slot}_{self.n}"
        self.emit(f"{name} = tl.rvec(tl.{dtype}, {'R' if axis == 'rows' else 'C'}, axis={axis!r})")
        return name

    def shared_vec(self, length):
        self.n += 1
        name = f"s{self.slot}_{self.n}"
        self.emit(f"{name} = tl.shared_vec(tl.f32, {length})")
        return name

    def shared(self, dtype, rows, cols):
        self.n += 1
        name = f"s{self.slot}_{self.n}"
        self.emit(f"{name} = tl.shared(tl.{dtype}, {rows}, {cols})")
        return name

    def emit(self, line, indent=1):
        self.lines.append("    " * indent + line)

    def lower(self, dtype):
        self.low = max(self.low, dtype, key=_PRECISION.index)


class Generator:
    """Random valid kernels for a set of targets (dtypes and granularity every one of them accepts)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.seed = seed

    def case(self) -> Case:
        rng = self.rng
        R, C = rng.choice((16, 32, 64)), rng.choice((16, 32, 64))
        K = rng.choice((32, 64, 128))   # 128: gfx950's block-scaled fp8 MFMA where A comes from LDS
        shapes = dict(M=rng.randint(1, 3 * R), N=rng.randint(1, 3 * C), KD=rng.randint(1, 3 * K), nk=rng.choice((0, 1, 2, 3)))
        self.ab = rng.choice(("bf16", "f16"))
        self.f8 = rng.choice(FP8)
        self.x_dtype = rng.choice(("f32", "bf16", "f16"))
        self.col_layouts = rng.random() < 0.1
        chains, tols = [], []
        for slot in range(rng.randint(1, 3)):
            ch = _Chain(self, slot)
            self.chain(ch)
            chains.append(ch.lines)
            tols.append(_TOL[ch.low])
        return Case(self.seed, chains, tols, dict(R=R, C=C, K=K), shapes, self.ab, self.x_dtype, self.f8)

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
        if rng.random() < 0.1 and ch.tiles.get(t) == ("f32", "R", "C"):   # one part a tile: the count, flag, barriers
            ch.emit(f"tl.store_sum(S, {t}, ({ch.slot}, br, bc), parts=P, part=0, count=1, arrivals=L)")
        if rng.random() < 0.15:   # out through a shared tile: RT -> ST, then ST -> GL
            sh = ch.shared("f32", "R", "C")
            ch.emit(f"tl.store({sh}, {t})")
            t = sh
        ch.emit(f"tl.store(Y, {t}, ({ch.slot}, br, bc))")

    def start_load(self, ch):
        rng = self.rng
        src = rng.choices(("X", "Z", "E"), (9, 9, 2))[0]   # fp8 kept to a chain of 4 or so: sm_80 and Apple drop it
        dst = rng.choices(("f32", "bf16", "f16", self.f8), (8, 4, 4, 1))[0]
        t = ch.tile(dst)
        ch.emit(f"tl.load({t}, {src}, (br, bc))")
        ch.lower(self.x_dtype if src == "X" else "f32")
        if src != "E" or dst not in (self.f8, "f32"):   # fp8 data into f32 or its own dtype is exact
            ch.lower(dst)
        return self._f32(ch, t) if dst != "f32" else t

    def start_shared(self, ch):
        fp8 = self.rng.random() < 0.2   # fp8 data through an fp8 shared tile (a load converts it to f32)
        s = ch.shared(self.f8 if fp8 else self.x_dtype, "R", "C")
        ch.emit(f"tl.load({s}, {'E' if fp8 else 'X'}, (br, bc))")
        t = ch.tile()
        ch.emit(f"tl.load({t}, {s})")
        if not fp8:
            ch.lower(self.x_dtype)
        if self.rng.random() < 0.5:   # and back through shared memory
            s2 = ch.shared("f32", "R", "C")
            ch.emit(f"tl.store({s2}, {t})")
            t2 = ch.tile()
            ch.emit(f"tl.load({t2}, {s2})")
            return t2
        return t

    def start_mma(self, ch):
        """acc = sum over K blocks of a' b', every transpose variant and input dtype (fp8 where the target has it:
        the verifier decides); a from registers or shared memory."""
        rng = self.rng
        ta, tb = rng.random() < 0.4, rng.random() < 0.5
        acc = ch.tile()
        ch.emit(f"tl.zero({acc})")
        loop = rng.choice(("pipeline", "range", "none"))
        fp8 = rng.random() < 0.25
        ab, g = (self.f8, "8") if fp8 else (self.ab, "")
        a_sh = ch.shared(ab, "K", "R") if ta else ch.shared(ab, "R", "K")
        b_sh = ch.shared(ab, "C", "K") if tb else ch.shared(ab, "K", "C")
        a_reg = None
        if not ta and rng.random() < 0.4:
            a_reg = ch.tile(ab, "R", "K")
        if rng.random() < 0.3:   # a launch precondition (true of every case: A and B share K)
            ch.emit(f"tl.check_eq({'Bt' if tb else 'B'}{g}.{'cols' if tb else 'rows'}, A{g}.cols)")
        ind = 1
        k = "0"
        if loop != "none":
            ch.emit(f"for k in tl.{loop}(tl.cdiv(A{g}.cols, K)):")
            ind, k = 2, "k"
        ch.emit(f"tl.load({a_sh}, {'At' if ta else 'A'}{g}, {f'({k}, br)' if ta else f'(br, {k})'})", ind)
        ch.emit(f"tl.load({b_sh}, {'Bt' if tb else 'B'}{g}, {'(bc, ' + k + ')' if tb else '(' + k + ', bc)'})", ind)
        a = a_sh
        if a_reg:
            ch.emit(f"tl.load({a_reg}, {a_sh})", ind)
            a = a_reg
        ch.emit(f"tl.mma_{'At' if ta else 'A'}{'Bt' if tb else 'B'}({acc}, {a}, {b_sh}, {acc})", ind)
        ch.lower("bf16" if fp8 else ab)   # exact inputs either way: the error is the f32 accumulation's
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
        op = self.rng.choice(("exp", "exp2", "log", "log2", "abs", "neg", "sqrt", "rsqrt", "tanh", "sigmoid", "silu",
                              "gelu", "erf", "relu", "sin", "cos"))
        u = ch.tile()
        if op in ("log", "log2", "sqrt", "rsqrt"):   # a positive domain
            ch.emit(f"tl.abs({u}, {t})")
            ch.emit(f"tl.add({u}, {u}, 0.5)")
            ch.emit(f"tl.{op}({u}, {u})")
        elif op in ("exp", "exp2"):                 # a bounded argument
            ch.emit(f"tl.tanh({u}, {t})")
            ch.emit(f"tl.{op}({u}, {u})")
        elif op in ("sin", "cos"):
            self._trig_argument(ch, u, t)
            ch.emit(f"tl.{op}({u}, {u})")
        else:
            ch.emit(f"tl.{op}({u}, {t})")
        return u

    @staticmethod
    def _trig_argument(ch, u, t):
        """u = 8 tanh(t): inside |x| <= 10, where sin's and cos's bounds hold (docs/design.md)."""
        ch.emit(f"tl.tanh({u}, {t})")
        ch.emit(f"tl.mul({u}, {u}, 8.0)")

    def step_binary(self, ch, t):
        rng = self.rng
        op = rng.choice(("add", "sub", "mul", "max", "min", "div", "pow"))
        u = ch.tile()
        if op == "pow":   # a base in [0.25, 8]: |p log2 x| <= 10 for every p drawn, where pow's bound holds
            ch.emit(f"tl.abs({u}, {t})")
            ch.emit(f"tl.add({u}, {u}, 0.25)")
            ch.emit(f"tl.min({u}, {u}, 8.0)")
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
        """A row, column or whole-tile reduction (with or without an accumulator) broadcast back over the tile (a
        whole tile's: along either axis)."""
        rng = self.rng
        over = rng.choice(("row", "col", "tile"))
        axis = rng.choice(("rows", "cols")) if over == "tile" else f"{over}s"
        red = rng.choice(("max", "min", "sum"))
        v = ch.vec(axis)
        pre = "row" if axis == "rows" else "col"
        if rng.random() < 0.5:
            acc = ch.vec(axis)
            ch.emit(f"tl.fill({acc}, {rng.choice(('0.0', '1.0', 's'))})" if rng.random() < 0.8 else f"tl.zero({acc})")
            ch.emit(f"tl.{over}_{red}({v}, {t}, {acc})")
        else:
            ch.emit(f"tl.{over}_{red}({v}, {t})")
        if red == "sum":
            ch.emit(f"tl.mul({v}, {v}, {1.0 / (4096 if over == 'tile' else 64)})")
        return self._broadcast(ch, t, v, pre)

    def _broadcast(self, ch, t, v, pre):
        """t with v added, subtracted, multiplied or divided along pre ("row" or "col"); a divisor is kept >= 1."""
        op = self.rng.choice(("add", "sub", "mul", "div"))
        if op == "div":
            d = ch.vec("rows" if pre == "row" else "cols")
            ch.emit(f"tl.abs({d}, {v})")
            ch.emit(f"tl.add({d}, {d}, 1.0)")
            v = d
        u = ch.tile()
        ch.emit(f"tl.{op}_{pre[:3]}({u}, {t}, {v})")
        return u

    def step_vector(self, ch, t):
        """A vector from a reduction or a global, maps on it (unary, binary with a scalar or a second vector, where
        on a vector comparison), a conversion to 16 bits and back, a round trip through a shared vector, maybe a
        store to V, then broadcast back over the tile."""
        rng = self.rng
        axis = rng.choice(("rows", "cols"))
        pre = "row" if axis == "rows" else "col"
        v = ch.vec(axis)
        if rng.random() < 0.3:   # from a global: a cols vector from W's row 0 (broadcast_over), a rows one from Z
            if axis == "cols" and rng.random() < 0.5:
                sv = ch.shared_vec("C")
                ch.emit(f"tl.load({sv}, W, (bc,))")
                ch.emit(f"tl.load({v}, {sv})")
            else:
                ch.emit(f"tl.load({v}, W, (bc,))" if axis == "cols" else f"tl.load({v}, Z, (bc, br))")
        else:
            ch.emit(f"tl.{pre}_{rng.choice(('max', 'min', 'sum'))}({v}, {t})")
            ch.emit(f"tl.mul({v}, {v}, 0.125)")
        for _ in range(rng.randint(1, 3)):
            v = rng.choice((self._vec_unary, self._vec_binary, self._vec_where, self._vec_convert,
                            self._vec_shared))(ch, v, axis)
        if not ch.stored_vector and rng.random() < 0.4:   # one block's vector: V[slot, other block index, its run]
            ch.stored_vector = True
            ch.emit(f"tl.store(V, {v}, ({ch.slot}, bc, br))" if axis == "rows" else
                    f"tl.store(V, {v}, ({ch.slot}, br, bc))")
        return self._broadcast(ch, t, v, pre)

    def _vec_unary(self, ch, v, axis):
        u = ch.vec(axis)
        op = self.rng.choice(("abs", "neg", "tanh", "sigmoid", "silu", "gelu", "relu", "erf", "sin"))
        if op == "sin":
            self._trig_argument(ch, u, v)
            v = u
        ch.emit(f"tl.{op}({u}, {v})")
        return u

    def _vec_binary(self, ch, v, axis):
        u = ch.vec(axis)
        op = self.rng.choice(("add", "sub", "mul", "max", "min"))
        if self.rng.random() < 0.5:
            ch.emit(f"tl.{op}({u}, {v}, {self.rng.choice(('s', '0.5', '-2'))})")
        else:
            w = ch.vec(axis)
            ch.emit(f"tl.tanh({w}, {v})")
            ch.emit(f"tl.{op}({u}, {v}, {w})")
        return u

    def _exact_vec(self, ch, axis):
        """A vector of exact values (a fresh load: past the end of the global, zeros) to compare: a mask from a
        computed vector could flip where backends round it differently."""
        x = ch.vec(axis)
        ch.emit(f"tl.load({x}, W, (bc,))" if axis == "cols" else f"tl.load({x}, Z, (bc, br))")
        return x

    def _vec_where(self, ch, v, axis):
        x = self._exact_vec(ch, axis)
        m, u = ch.vec(axis), ch.vec(axis)
        ch.emit(f"tl.{self.rng.choice(('lt', 'ge', 'ne'))}({m}, {x}, {self.rng.choice(('0.0', 's'))})")
        ch.emit(f"tl.where({u}, {m}, {v}, {self.rng.choice(('s', '1.0', x))})")
        return u

    def _vec_convert(self, ch, v, axis):
        dt = self.rng.choice(("bf16", "f16"))
        h, u = ch.vec(axis, dt), ch.vec(axis)
        ch.emit(f"tl.copy({h}, {v})")
        ch.emit(f"tl.copy({u}, {h})")
        ch.lower(dt)
        return u

    def _vec_shared(self, ch, v, axis):
        sv, u = ch.shared_vec("R" if axis == "rows" else "C"), ch.vec(axis)
        ch.emit(f"tl.store({sv}, {v})")
        ch.emit(f"tl.load({u}, {sv})")
        return u

    def step_logsumexp2(self, ch, t):
        """Online-softmax partials of t (a max and the sum of 2^(x - max) under it, per row or column), some emptied
        (s = 0 where exact data is below 1/4: padded rows among them), merged by logsumexp2 and subtracted."""
        rng = self.rng
        axis = rng.choice(("rows", "cols"))
        pre = "row" if axis == "rows" else "col"
        m, sm, lse = ch.vec(axis), ch.vec(axis), ch.vec(axis)
        e = ch.tile()
        ch.emit(f"tl.{pre}_max({m}, {t})")
        ch.emit(f"tl.sub_{pre[:3]}({e}, {t}, {m})")
        ch.emit(f"tl.exp2({e}, {e})")
        ch.emit(f"tl.{pre}_sum({sm}, {e})")
        if rng.random() < 0.5:
            x = self._exact_vec(ch, axis)
            mask = ch.vec(axis)
            ch.emit(f"tl.ge({mask}, {x}, 0.25)")
            ch.emit(f"tl.where({sm}, {mask}, {sm}, 0.0)")
        ch.emit(f"tl.logsumexp2({lse}, {m}, {sm})")
        ch.emit(f"tl.max({lse}, {lse}, -64.0)")   # every pair empty: -inf, kept finite for the steps after
        u = ch.tile()
        ch.emit(f"tl.sub_{pre[:3]}({u}, {t}, {lse})")
        return u

    def step_dropout(self, ch, t):
        """Philox dropout of the block's elements at their global coordinates (the same mask on every backend)."""
        u = ch.tile()
        p = self.rng.choice(("0.0", "0.125", "0.5", "0.875"))
        ch.emit(f"tl.dropout({u}, {t}, {p}, seed, {self.rng.choice(('0', '7', 'nk'))}, br * R, bc * C)")
        return u

    def step_mask(self, ch, t):
        rng = self.rng
        u = ch.tile()
        fill = rng.choice(("0.0", "-1.0", "s"))
        if rng.random() < 0.5:
            rows = rng.choice(("X.rows - br * R", "tl.minimum(X.rows - br * R, R // 2 + 1)"))
            cols = rng.choice(("X.cols - bc * C", "tl.maximum(X.cols - bc * C - 3, 1)"))
            ch.emit(f"tl.bounds_mask({u}, {t}, {rows}, {cols}, {fill})")
        else:
            ch.emit(f"tl.causal_mask({u}, {t}, br * R, bc * C, {fill})")
        return u

    def step_convert(self, ch, t):
        """A copy to 16 bits or fp8 (e4m3 saturates at 448) and back; the narrow tile's columns maybe swapped."""
        dt = self.rng.choices(("bf16", "f16", self.f8), (2, 2, 1))[0]
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
             step_convert, step_swap, step_vector, step_logsumexp2, step_dropout)
    # step_layout in one kernel of 10: CUDA refuses column layouts


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


_TILE = re.compile(r"\b[tvs](\d+)_\d+\b")   # a generated tile's name: t<slot>_<n> (vectors v, shared s)


def _run(backend, case: Case, chains, data: dict) -> dict:
    """Run the kernel of these chains on a backend from copies of data; every argument by name, after."""
    args = {p: a.copy() if isinstance(a, np.ndarray) else a for p, a in data.items()}
    params = case.params(chains)
    testing.run(backend, load(case, chains), *(args[p] for p in params), **case.consts)
    return args


def accepted(case: Case, chains, target: str, data: dict) -> list:
    """The chains the verifier accepts for a target: all when the kernel traces for it, else each that traces
    alone (fp8 on a target without it: those chains go, the rest still run there)."""
    def traces(chs):
        try:
            load(case, chs).trace([data[p] for p in case.params(chs)], target, **case.consts)
        except TileError:
            return False
        return True
    return list(chains) if traces(chains) else [c for c in chains if traces([c])]


def check(case: Case, backends, chains=None, data_seed: int = 0, ref_nan=None):
    """Run one case everywhere: (per-backend outcome, findings); an outcome is ('ok' or 'refused' or 'finding',
    the number of chains not run there). Each backend runs the chains its target accepts (`accepted`, less any
    whose tile its planner refuses) against the reference run of the same chains. With ref_nan (the reference
    outputs' NaN masks of the unshrunk case, per chain), a variant whose reference output has other NaNs reads a
    tile nothing wrote (a removal broke it) and counts as not failing."""
    chains = case.chains if chains is None else chains
    data = case.arrays(np.random.default_rng(data_seed), len(case.chains))
    refs: dict = {}

    def reference(chs):
        key = tuple(_keys(case, chs))
        if key not in refs:
            refs[key] = _run(registry.get("reference"), case, chs, data)
        return refs[key]

    try:
        full = reference(chains)
    except TileError:
        return {"reference": ("refused", 0)}, []   # the generator made something the verifier refuses: skip it
    if ref_nan is not None and (np.isnan(full["G"]).any() or any(
            (np.isnan(full[o][c]) != ref_nan[c][i]).any() for c in _keys(case, chains) for i, o in enumerate("YV"))):
        return {"reference": ("broken", 0)}, []
    outcomes, findings = {"reference": ("ok", 0)}, []
    for b in backends:
        chs = accepted(case, chains, b.target, data)
        got = None
        while chs and got is None:
            try:
                got = _run(b, case, chs, data)
            except TileError as e:   # a rule only the backend knows; where it names a tile, that tile's chain goes
                m = _TILE.search(str(e))
                keep = [c for c in chs if m is None or _keys(case, [c])[0] != int(m.group(1))]
                chs = keep if len(keep) < len(chs) else []
            except Exception as e:  # noqa: BLE001 - a crash or a compile failure of a verified kernel is a finding
                outcomes[b.name] = ("finding", len(chains) - len(chs))
                findings.append(Finding(b.name, f"{type(e).__name__}: {str(e)[:2000]}", case.source(chs),
                                        case.shapes, case.consts))
                break
        if got is None:
            outcomes.setdefault(b.name, ("refused", len(chains)))
            continue
        ref, slots = reference(chs), _keys(case, chs)
        problems = [f"{o}[{i}]: {p}" for i in slots for o in "YVS"
                    if (p := _compare(got[o][i], ref[o][i], case.tol[i]))]
        if got["L"].any():
            problems.append("L (store_sum's counters): not left at zero")
        if p := _compare(got["G"], ref["G"], max(case.tol[i] for i in slots)):
            problems.append(f"G (atomic_add): {p}")
        outcomes[b.name] = ("finding" if problems else "ok", len(chains) - len(chs))
        if problems:
            findings.append(Finding(b.name, "; ".join(problems), case.source(chs), case.shapes, case.consts))
    return outcomes, findings


def _keys(case: Case, chains) -> list:
    """Each chain's index in the unshrunk case: the slot its reference output had there (by its store)."""
    return [int(c[-1].split("(Y, ")[1].split(",")[1].split("(")[1]) for c in chains]


def reference_nan(case: Case, data_seed: int = 0) -> list:
    """Per chain, the NaN masks of its slices of Y and V in the reference run of the whole case."""
    out = _run(registry.get("reference"), case, case.chains, case.arrays(np.random.default_rng(data_seed),
                                                                          len(case.chains)))
    return [(np.isnan(out["Y"][i]), np.isnan(out["V"][i])) for i in range(len(case.chains))]


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
    refused: dict = dataclasses.field(default_factory=dict)   # backend -> kernels not run at all (TileError)
    dropped: dict = dataclasses.field(default_factory=dict)   # backend -> chains of run kernels refused there
    findings: list = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        lines = [f"{self.kernels} kernels ({self.chains} chains) generated"]
        for b, n in self.runs.items():
            lines.append(f"  {b:<16} {n} run and compared ({self.dropped.get(b, 0)} chains of them refused there), "
                         f"{self.refused.get(b, 0)} refused whole with a TileError")
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
        if outcomes.get("reference") != ("ok", 0):
            continue
        rep.kernels += 1
        rep.chains += len(case.chains)
        for name, (o, dropped) in outcomes.items():
            if name == "reference":
                continue
            bucket = rep.refused if o == "refused" else rep.runs
            bucket[name] = bucket.get(name, 0) + 1
            if o != "refused":
                rep.dropped[name] = rep.dropped.get(name, 0) + dropped
        for f in found:
            small = shrink(case, registry.get(f.backend), shrink_budget) or f
            rep.findings.append(small)
            log(str(small))
    return rep
