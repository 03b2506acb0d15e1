"""The main loop of gfx9 (CDNA3/CDNA4) assembly, counted per MFMA, and the unit that bounds it.

`analyse(asm, target)` reads clang's `-S` output (ours, or any other kernel's) and finds by itself:

* **the main loop**: LLVM annotates every block with its loop (``Loop Header: Depth=N``, ``in Loop:
  Header=BB0_7``, ``Parent Loop ...``). The loop holding the most MFMAs (nested loops included) is
  taken, then its child loop as long as one holds all of them: the innermost loop with every MFMA. If
  that loop moves no tile (no global load, no barrier: an MFMA loop stepping through K), the loop around
  it that does. A file without MFMAs in any loop reports the loop with the most instructions.
* **its hot path**: one iteration, from the header back to it. At a two-way branch inside the loop each
  side is scored by its best way back to the header (nested loops' back edges left out), comparing, in
  this order: more MFMAs; no per-lane code (exec masks, vector compares, sub-dword global loads: the edge
  tiles' checks and element-wise fallbacks, so the full-tile side); more memory moves: global loads, global
  stores and atomics, LDS writes (the next tile issued, not the last iteration skipping its prefetch; a
  tile's results written, not a flag's never-taken skip of them); fewer instructions; else the
  fall-through. Exits are never taken and no block is visited twice: a nested loop on the path runs its
  trip count where clang left one of its two partial-unroll shapes (trips()), else once, named in the
  report as unknown.

Along that path it counts, per MFMA: LDS reads and writes by instruction and bytes per lane, global
loads by instruction and whether they go straight to LDS, waits with their counters, VALU, SALU,
barriers, branches and instructions; and it bounds the loop with the per-CU rates of
tiles/targets.py (CU_RATES): matrix-core clocks of the MFMAs against LDS bandwidth and the
scheduler's issue limits. Latency, dependencies and waits are not modelled: the bound is the least
time any unit needs, so a loop far above it is limited by something the counts show (waits).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar

from tiles import targets

# ---------------------------------------------------------------- parsing


@dataclass
class Block:
    name: str                      # "BB0_26" for .LBB0_26, "bb.27" for a "; %bb.27:" fall-through block
    lines: list[str] = field(default_factory=list)
    note: str = ""                 # the block's comments (LLVM's loop annotations)
    succ: list[str] = field(default_factory=list)
    loop: str | None = None        # header of the innermost loop holding it
    mfma: int = 0


@dataclass
class Function:
    name: str
    blocks: dict[str, Block]       # in layout order
    parent: dict[str, str | None]  # loop header -> the header of the loop around it

    def loops_of(self, b: Block) -> list[str]:
        """The headers of the loops holding b, innermost first."""
        out, h = [], b.loop
        while h is not None:
            out.append(h)
            h = self.parent.get(h)
        return out

    def members(self, header: str) -> list[str]:
        return [n for n, b in self.blocks.items() if header in self.loops_of(b)]


_LABEL = re.compile(r"^\.L(BB\d+_\d+):(.*)$")
_FALL = re.compile(r"^; %(bb\.\d+):(.*)$")
_FUNC = re.compile(r"^([A-Za-z_$][\w.$]*):\s*(;.*)?$")


def parse(asm: str) -> list[Function]:
    """The functions of an assembly file, their blocks, successors and loops."""
    funcs, cur, blk = [], None, None
    kernels = set(re.findall(r"^\s*\.type\s+([\w.$]+),\s*@function", asm, re.M))
    for raw in asm.splitlines():
        line = raw.rstrip()
        m = _LABEL.match(line) or _FALL.match(line)
        if cur is None:
            f = _FUNC.match(line)
            if f and f.group(1) in kernels:
                cur, blk = Function(f.group(1), {}, {}), Block("entry")
                cur.blocks["entry"] = blk
            continue
        if line.startswith(".Lfunc_end"):
            funcs.append(_finish(cur))
            cur = None
            continue
        if m:
            blk = Block(m.group(1), note=m.group(2))
            cur.blocks[blk.name] = blk
            continue
        s = line.strip()
        if s.startswith(";"):
            if not blk.lines:          # annotations sit right under the label
                blk.note += " " + s
            continue
        s = s.split(";")[0].strip()
        if s and not s.startswith(".") and not s.endswith(":"):
            blk.lines.append(s)
    return funcs


def _finish(f: Function) -> Function:
    names = list(f.blocks)
    for i, (name, b) in enumerate(f.blocks.items()):
        nxt = names[i + 1] if i + 1 < len(names) else None
        b.succ = _successors(b.lines, nxt)
        b.mfma = sum(classify(ln)[0] == "mfma" for ln in b.lines)
        head = re.search(r"Loop Header: Depth=(\d+)", b.note)
        if head:
            b.loop = name
            depth = int(head.group(1))
            outer = dict((int(d), h) for h, d in re.findall(r"Parent Loop (BB\d+_\d+) Depth=(\d+)", b.note))
            f.parent[name] = outer.get(depth - 1)
        else:
            inner = re.search(r"in Loop: Header=(BB\d+_\d+)", b.note)
            b.loop = inner.group(1) if inner else None
    return f


def _successors(lines: list[str], nxt: str | None) -> list[str]:
    def target(ins):
        return ins.split()[1].removeprefix(".L") if len(ins.split()) > 1 else None
    last = lines[-1].split()[0] if lines else ""
    if last in ("s_endpgm", "s_setpc_b64", "s_trap"):
        return []
    if last == "s_branch":
        prev = lines[-2] if len(lines) > 1 else ""
        return ([target(prev)] if prev.startswith("s_cbranch") else []) + [target(lines[-1])]
    if last.startswith("s_cbranch"):
        return [target(lines[-1])] + ([nxt] if nxt else [])
    return [nxt] if nxt else []


# ---------------------------------------------------------------- what each instruction is

def _bits(mn: str, pattern: str) -> int:
    m = re.search(pattern, mn)
    return int(m.group(1)) // 8 if m else 0


def lds_bytes(mn: str) -> int:
    """Bytes per lane an LDS instruction moves (ds_read2_* two elements; tr variants by their b64/b96)."""
    n = _bits(mn, r"^ds_\w*?(?:read|write|load|store)2?(?:st64)?_(?:addtid_)?[bui](\d+)") or _bits(mn, r"_b(\d+)$")
    return n * (2 if re.match(r"ds_(?:read|write|load|store)2", mn) else 1)


_GLOBAL_BYTES = {"dword": 4, "dwordx2": 8, "dwordx3": 12, "dwordx4": 16, "b32": 4, "b64": 8, "b96": 12, "b128": 16,
                 **dict.fromkeys(("ushort", "sshort", "short", "short_d16", "short_d16_hi"), 2),
                 **dict.fromkeys(("ubyte", "sbyte", "byte", "ubyte_d16", "ubyte_d16_hi", "sbyte_d16", "sbyte_d16_hi",
                                  "byte_d16_hi"), 1)}


def global_bytes(mn: str) -> int:
    """Bytes per lane of a buffer/global/flat load, store or atomic (buffer_atomic_add_f32: 4; a packed pair,
    buffer_atomic_pk_add_bf16: 4)."""
    m = re.match(r"(?:buffer|global|flat)_(?:load|store|atomic)_(?:lds_)?(\w+)", mn)
    if not m:
        return 0
    return (_GLOBAL_BYTES.get(m.group(1)) or _bits(m.group(1), r"_b?[fuib](\d+)$")) * (2 if "pk_" in m.group(1) else 1)


def mfma_shape(mn: str) -> tuple[int, int, int, str | None] | None:
    """(m, n, k, operand type of targets.CuRates.mfma_flops) of an MFMA mnemonic, or None."""
    m = re.match(r"v_mfma(?:_scale)?_[fi]\d+_(\d+)x(\d+)x(\d+)_?(\w*)", mn)
    if not m:
        return None
    suffix = m.group(4)
    kind = next((k for k, words in (("fp8", ("fp8", "bf8", "f8f6f4", "i8")), ("bf16", ("bf16",)),
                                    ("f16", ("f16",)), ("f32", ("f32",))) if any(w in suffix for w in words)), None)
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), kind


def classify(ins: str) -> tuple[str, str]:
    """(category, key) of one instruction; key is the mnemonic (with ' lds' for loads into LDS), or the
    counters of an s_waitcnt."""
    mn = ins.split()[0]
    if mn.startswith(("v_mfma", "v_smfmac")):
        return "mfma", mn
    if mn.startswith("ds_"):
        if re.match(r"ds_(?:read|load)", mn):
            return "lds_read", mn
        if re.match(r"ds_(?:write|store)", mn):
            return "lds_write", mn
        return "lds_other", mn
    if re.match(r"(?:buffer|global|flat)_load", mn):
        direct = "_lds_" in mn or re.split(r"[\s,]+", ins.strip())[-1] == "lds"
        return "global_load", mn + (" lds" if direct else "")
    if re.match(r"(?:buffer|global|flat)_(?:store|atomic)", mn):
        return "global_store", mn
    if mn.startswith("s_waitcnt"):
        return "wait", " ".join(re.findall(r"\w+cnt\(\d+\)", ins)) or ins
    if mn == "s_barrier":
        return "barrier", mn
    if mn == "s_branch" or mn.startswith("s_cbranch"):
        return "branch", mn
    if mn.startswith("s_"):
        return "salu", mn
    if mn.startswith("v_"):
        return "valu", mn
    return "other", mn


CATEGORIES = ("mfma", "lds_read", "lds_write", "lds_other", "global_load", "global_store", "wait", "valu",
              "salu", "barrier", "branch", "other")


def tally(lines) -> dict[str, Counter]:
    out = {c: Counter() for c in CATEGORIES}
    for ins in lines:
        cat, key = classify(ins)
        out[cat][key] += 1
    return out


# ---------------------------------------------------------------- main loop and hot path

@dataclass
class LoopReport:
    target: str
    function: str
    header: str
    depth: int
    blocks: int                       # in the loop, nested loops included
    path: list[str]                   # the hot path, header first
    inner: dict[str, int | None]      # nested loops on the path: header -> trip count (None: unknown, once)
    decisions: list[str]              # how each two-way branch on the path was decided
    cold: list[str]                   # blocks of the loop left off the path
    cold_instructions: int
    counts: dict[str, Counter]        # along the hot path
    waves_per_simd: int | None = None
    sequence: list[str] = field(default_factory=list, repr=False)   # the path's instructions' categories, in order

    HEADER: ClassVar[tuple[str, ...]] = (
        "kernel", "target", "MFMA in loop", "instr.", "LDS reads", "LDS B/lane", "global loads", "waits", "VALU",
        "SALU", "barriers", "branches", "bound (clk/MFMA)", "MFMAs after work / longest run")

    @property
    def mfma(self) -> int:
        return sum(self.counts["mfma"].values())

    @property
    def instructions(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values())

    def per(self, n: float) -> float:
        return n / (self.mfma or 1)

    def bytes_per_lane(self, cat: str) -> int:
        size = global_bytes if cat.startswith("global") else lds_bytes
        return sum(size(k.split()[0]) * v for k, v in self.counts[cat].items())

    def mfma_runs(self) -> tuple[int, int]:
        """(MFMAs with another instruction issued between them and the previous MFMA of the path, the longest run
        of MFMAs back to back): how far the loop's other work is spread under its MFMAs. Nested loops on the
        path are taken once here."""
        mixed, run, longest, prev = 0, 0, 0, None
        for c in self.sequence:
            if c == "mfma":
                mixed += prev not in (None, "mfma")
                run = run + 1 if prev == "mfma" else 1
                longest = max(longest, run)
            prev = c
        return mixed, longest

    def bound(self) -> dict[str, float] | None:
        """Clocks per MFMA each unit of a SIMD needs, from targets.CU_RATES; None without MFMAs or rates."""
        rates = targets.CU_RATES.get(self.target)
        if rates is None or not self.mfma:
            return None
        c, i = self.counts, rates.issue_interval
        n = {k: sum(v.values()) for k, v in c.items()}
        mfma = 0.0
        for mn, cnt in c["mfma"].items():
            shape = mfma_shape(mn)
            if shape is None or shape[3] is None:
                return None
            mfma += cnt * rates.mfma_clocks(*shape)
        lds_lane_bytes = sum(self.bytes_per_lane(k) for k in ("lds_read", "lds_write", "lds_other")) + \
            sum(global_bytes(k.split()[0]) * v for k, v in c["global_load"].items() if k.endswith(" lds"))
        units = {
            "matrix core": mfma,
            # every SIMD of the CU runs the same loop and shares the LDS
            "LDS bandwidth": rates.simds * 64 * lds_lane_bytes / rates.lds_bytes,
            "VALU issue": i * (n["valu"] + n["mfma"]),
            "LDS issue": i * (n["lds_read"] + n["lds_write"] + n["lds_other"]),
            "VMEM issue": i * (n["global_load"] + n["global_store"]),
            "SALU issue": i * (n["salu"] + n["wait"] + n["barrier"]),
            "branch issue": i * n["branch"],
            # one instruction per wave per visit: W waves of a SIMD issue side by side
            "wave issue": i * self.instructions / (self.waves_per_simd or 1),
        }
        return {k: v / self.mfma for k, v in units.items()}

    def limit(self) -> tuple[str, float] | None:
        b = self.bound()
        return max(b.items(), key=lambda kv: kv[1]) if b else None

    def text(self, title: str = "") -> str:
        """The full report: the loop, the path and why, per-MFMA counts, and the bound."""
        unit = "MFMA" if self.mfma else "iteration"
        per = self.per if self.mfma else (lambda n: n)
        out = [f"{title or self.function} ({self.target}): main loop {self.header}, depth {self.depth}, "
               f"{self.blocks} blocks; MFMA: {_kinds(self.counts['mfma']) or 'none'}",
               "hot path: " + " > ".join(n if n not in self.inner else f"{n} (inner loop x{self.inner[n]})"
                                         if self.inner[n] else f"{n} (inner loop, trip count unknown: once)"
                                         for n in self.path)]
        out += [f"  branch {d}" for d in self.decisions]
        if self.cold:
            out.append(f"left off the path: {', '.join(self.cold)} ({self.cold_instructions} instructions)")
        out.append(f"\nper {unit} along the hot path ({self.mfma} MFMA, {self.instructions} instructions):")
        out.append(f"  {'instructions':14s} {per(self.instructions):7.3f}")
        for label, cat, size in ROWS:
            n = sum(self.counts[cat].values())
            extra = f"   {_kinds(self.counts[cat], size)}" if n and label not in ("VALU", "SALU") else ""
            if n and size:
                extra += f"; {per(self.bytes_per_lane(cat)):.2f} B/lane per {unit}"
            out.append(f"  {label:14s} {per(n):7.3f}{extra}")
        if self.mfma:
            mixed, longest = self.mfma_runs()
            out.append(f"  MFMAs after other work {mixed} of {self.mfma}, longest run back to back {longest}")
        b = self.bound()
        if b:
            name, clk = self.limit()
            w = f"{self.waves_per_simd} waves/SIMD" if self.waves_per_simd else "1 wave/SIMD assumed"
            out.append(f"\nbound, clocks per MFMA on one SIMD (tiles/targets.py CU_RATES[{self.target!r}], {w}):")
            out.append("  " + " | ".join(f"{k} {v:.1f}" for k, v in b.items()))
            share = 100 * b["matrix core"] / clk
            busy = f"; the matrix core busy at most {share:.0f}%" if name != "matrix core" else ""
            out.append(f"  limited by {name}: {clk:.1f} clocks per MFMA{busy} (latency and waits not modelled)")
        return "\n".join(out)

    def row(self, name: str) -> tuple[str, ...]:
        """One row per kernel and target: the per-MFMA numbers of HEADER."""
        def p(cat):
            return f"{self.per(sum(self.counts[cat].values())):.2f}"

        def kinds(cat):
            c = self.counts[cat]
            return " + ".join(f"{self.per(v):.2f} {k.removeprefix('ds_').removeprefix('buffer_')}"
                              for k, v in c.most_common()) or "0"
        lim, (mixed, longest) = self.limit(), self.mfma_runs()
        lds = sum(self.bytes_per_lane(k) for k in ("lds_read", "lds_write", "lds_other"))
        return (name, self.target, _kinds(self.counts["mfma"]) or "none", f"{self.per(self.instructions):.2f}",
                kinds("lds_read"), f"{self.per(lds):.1f}", kinds("global_load"), p("wait"), p("valu"), p("salu"),
                p("barrier"), p("branch"),
                f"{lim[1]:.1f} {lim[0]}" if lim else "-", f"{mixed}/{self.mfma} / {longest}" if self.mfma else "-")


def main_loop(f: Function) -> str | None:
    """Header of the innermost loop holding all the MFMAs of the loop nest with the most (see module doc)."""
    heads = [n for n, b in f.blocks.items() if b.loop == n]
    if not heads:
        return None

    def mfma(h):
        return sum(f.blocks[m].mfma for m in f.members(h))
    if not any(mfma(h) for h in heads):
        return max(heads, key=lambda h: sum(len(f.blocks[m].lines) for m in f.members(h)))
    best = max(heads, key=lambda h: (mfma(h), -len(f.loops_of(f.blocks[h]))))
    while True:
        child = next((h for h in heads if f.parent.get(h) == best and mfma(h) == mfma(best)), None)
        if child is None:
            break
        best = child
    # an MFMA loop that moves no tile (no global load, no barrier) steps through K inside the tile loop:
    # the tile loop around it is the main loop, the MFMA loop an inner loop on its path
    while f.parent.get(best) and not any(classify(ln)[0] in ("global_load", "barrier")
                                         for m in f.members(best) for ln in f.blocks[m].lines):
        best = f.parent[best]
    return best


def _constant(lines: list[str], pattern: str) -> int | None:
    """The number the first line matching pattern gives, or None."""
    return next((int(m.group(1)) for m in (re.match(pattern, ln) for ln in lines) if m), None)


def trips(f: Function, header: str, preheader: str) -> int | None:
    """Trip count of a nested loop in the two shapes clang leaves after partial unrolling, else None:
    a flag (set to -1 before the loop, cleared in it, tested by s_and_b64 vcc, exec: two trips) or a
    scalar counter (s_mov_b32 sN, A before; s_add_i32 sN, sN, S in it; s_cmp_lg_u32 sN, B closing it)."""
    body = [ln for m in f.members(header) for ln in f.blocks[m].lines]
    before = f.blocks[preheader].lines
    for ln in body:
        m = re.match(r"s_and_b64 vcc, exec, (s\[\d+:\d+\])", ln)
        if m and f"s_mov_b64 {m.group(1)}, 0" in body and f"s_mov_b64 {m.group(1)}, -1" in before:
            return 2
    for ln in body:
        m = re.match(r"s_cmp_lg_u32 (s\d+), (-?\d+)$", ln)
        if m:
            r, end = m.group(1), int(m.group(2))
            step = _constant(body, rf"s_add_[iu]32 {r}, {r}, (-?\d+)$")
            start = _constant(before, rf"s_mov_b32 {r}, (-?\d+)$")
            if step and start is not None and (end - start) % step == 0 and (end - start) // step > 0:
                return (end - start) // step
    return None


def hot_path(f: Function, header: str) -> tuple[list[str], list[str]]:
    """The blocks of one iteration of loop `header` along its hot path, and how each branch was decided."""
    inside = set(f.members(header))
    path, decisions, cur = [header], [], header
    while True:
        succ = [s for s in f.blocks[cur].succ if s in inside and (s == header or s not in path)]
        body = [s for s in succ if s != header]
        if header in succ:
            # the back edge ends the iteration, unless the other side still has MFMAs to run ('continue')
            if not body or not sum(f.blocks[n].mfma for n in _reach(f, inside, header, path, body[0])):
                return path, decisions
            hot = body[0]
            decisions.append(f"{cur} -> {hot} over the back edge (more MFMAs)")
        elif not body:
            return path, decisions
        elif len(body) == 1:
            hot = body[0]
        else:
            hot, why = _pick(f, inside, header, path, body[0], body[1], fall=f.blocks[cur].succ[-1])
            decisions.append(f"{cur} -> {hot} over {body[0] if hot == body[1] else body[1]} ({why})")
        path.append(hot)
        cur = hot


def _reach(f, inside, header, path, start) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        n = todo.pop()
        if n in seen or n == header or n not in inside or n in path:
            continue
        seen.add(n)
        todo += f.blocks[n].succ
    return seen


def per_lane(ins: str) -> bool:
    """Code that only edge tiles and ragged rows run: exec masking (a lane-dependent branch), integer vector
    compares (bounds checks: rows and columns are integers; a float compare is data, e.g. the NaN test of a bf16
    rounding on gfx942) and sub-dword global loads (element-wise fallbacks). A uniform branch reads exec
    (s_and_b64 vcc, exec, ...), it does not write it."""
    mn, ops = ins.split()[0], ins.split()[1:]
    return ("saveexec" in mn or (mn.startswith("s_") and ops and ops[0].rstrip(",") == "exec")
            or mn.startswith(("v_cmp", "v_cmpx")) and re.search(r"_[iu](16|32|64)(_e32|_e64)?$", mn) is not None
            or 0 < global_bytes(mn) < 4 and classify(ins)[0] == "global_load")


def _score(b: Block) -> tuple[int, int, int, int]:
    """What a path gains from block b, compared lexicographically: MFMAs; no per-lane code (full tiles); global
    loads, stores and LDS writes (the next tile issued, results written); fewer instructions."""
    t = tally(b.lines)
    moves = sum(sum(t[c].values()) for c in ("global_load", "global_store", "lds_write"))
    return b.mfma, -sum(map(per_lane, b.lines)), moves, -len(b.lines)


def _best(f, inside, header, path, start, memo, stack=()) -> tuple[tuple[int, ...], list[str]]:
    """The best-scoring way from start back to the header (or out of the loop) that avoids the path so far;
    edges back into the walk (nested loops' back edges) are left out. A depth-first walk with its own stack, not
    Python's: a loop of many blocks (per-lane edge code of a deep unroll, layernorm's one-pass rows at 16 a
    block on gfx942) is deeper than the interpreter's recursion limit."""
    if start in memo:
        return memo[start]
    on = set(stack)
    frames = []   # (block, its successors left to walk, the best ways from those walked)

    def enter(n):
        on.add(n)
        succ = [s for s in f.blocks[n].succ if s in inside and s != header and s not in path and s not in on]
        frames.append((n, iter(succ), []))
    enter(start)
    while frames:
        n, todo, got = frames[-1]
        for s in todo:
            if s not in memo:
                enter(s)
                break
            got.append(memo[s])
        else:
            frames.pop()
            on.discard(n)
            tail = max(got, default=((0, 0, 0, 0), []))
            memo[n] = tuple(x + y for x, y in zip(_score(f.blocks[n]), tail[0])), [n, *tail[1]]
            if frames:
                frames[-1][2].append(memo[n])
    return memo[start]


_WHY = ("more MFMAs", "no per-lane code (exec masks, vector compares, sub-dword loads): full tiles",
        "more global loads, stores and LDS writes: the next tile issued, results written", "fewer instructions")


def _pick(f, inside, header, path, a, b, fall) -> tuple[str, str]:
    memo = {}
    sa, sb = _best(f, inside, header, path, a, memo)[0], _best(f, inside, header, path, b, memo)[0]
    for i, why in enumerate(_WHY):
        if sa[i] != sb[i]:
            return (a if sa[i] > sb[i] else b), why
    return fall, "fall-through"


def analyse(asm: str, target: str, waves_per_simd: int | None = None) -> LoopReport | None:
    """The main-loop report of the function with the most MFMAs in a loop; None if no function has a loop."""
    best = None
    for f in parse(asm):
        h = main_loop(f)
        if h is None:
            continue
        path, decisions = hot_path(f, h)
        inner = {n: trips(f, n, path[i - 1]) for i, n in enumerate(path) if n != h and f.blocks[n].loop == n}

        def times(n):       # how often block n runs per iteration: the product of its inner loops' trips
            out = 1
            for loop in f.loops_of(f.blocks[n]):
                if loop == h:
                    return out
                out *= inner.get(loop) or 1
            return out
        counts = {c: Counter() for c in CATEGORIES}
        for n in path:
            for c, kinds in tally(f.blocks[n].lines).items():
                for k, v in kinds.items():
                    counts[c][k] += v * times(n)
        members = f.members(h)
        cold = [n for n in members if n not in path]
        r = LoopReport(target, f.name, h, len(f.loops_of(f.blocks[h])), len(members), path, inner, decisions, cold,
                       sum(len(f.blocks[n].lines) for n in cold), counts, waves_per_simd,
                       [classify(ln)[0] for n in path for ln in f.blocks[n].lines])
        if best is None or (r.mfma, r.instructions) > (best.mfma, best.instructions):
            best = r
    return best


# ---------------------------------------------------------------- text

def _kinds(c: Counter, size=None) -> str:
    return ", ".join(f"{k} {v}" + (f" ({size(k.split()[0])} B)" if size else "") for k, v in c.most_common())


ROWS = (("LDS reads", "lds_read", lds_bytes), ("LDS writes", "lds_write", lds_bytes),
        ("LDS other", "lds_other", lds_bytes), ("global loads", "global_load", global_bytes),
        ("global stores", "global_store", global_bytes), ("waits", "wait", None), ("VALU", "valu", None),
        ("SALU", "salu", None), ("barriers", "barrier", None), ("branches", "branch", None))
