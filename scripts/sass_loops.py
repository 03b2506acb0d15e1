"""The loops of a kernel's SASS, read offline: per loop its static instruction count, an opcode histogram and the
order of the instructions that shape a pipelined wgmma loop (HGMMA, its waits, barriers, mbarrier waits and
arrivals, MUFU, shuffles), runs of one kind folded into one line.

    python scripts/sass_loops.py FILE.sass [--function REGEX] [--min-hgmma 1] [--constructs]

FILE.sass is cuobjdump -sass output (tiles.backends.cuda.toolchain.disassemble) or nvdisasm's (`nvdisasm
FILE.cubin`: functions as `.text.NAME:` sections, branch targets as `.L_x_N` labels). A loop is the span from a
conditional backward branch's target to the branch, listed outermost first; its counts leave out what forward
branches inside it skip (masks applied to some blocks only), so they are what every iteration issues.
--constructs also sorts those counts by the source construct the opcodes come from (CONSTRUCTS), to set two
kernels' loops side by side.
"""
from __future__ import annotations

import argparse
import collections
import re

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)([^;]*);")
# what the event list keeps: opcode prefix -> short label
EVENTS = (("HGMMA", "HGMMA"), ("WARPGROUP.DEPBAR", "DEPBAR"), ("WARPGROUP.ARRIVE", "ARRIVE"),
          ("BAR.SYNC", "BAR.SYNC"), ("BAR.ARV", "BAR.ARV"), ("BAR.RED", "BAR.RED"),
          ("SYNCS.PHASECHK", "MBAR.WAIT"), ("SYNCS.ARRIVE", "MBAR.ARRIVE"), ("MUFU.EX2", "EX2"),
          ("MUFU", "MUFU"), ("SHFL", "SHFL"), ("FMNMX", "FMNMX"), ("USETMAXREG", "SETMAXNREG"),
          ("UTMALDG", "TMA.LOAD"), ("LDG", "LDG"), ("STG", "STG"), ("LDS", "LDS"), ("STS", "STS"))


FUNCTION = re.compile(r"Function : (\S+)|^\.text\.(\S+):")  # cuobjdump's header, nvdisasm's section label
LABEL = re.compile(r"^(\.L\w+):")  # nvdisasm: a branch target, the address of the next instruction
TARGET = re.compile(r"`\((\.L\w+)\)")
# opcode (first part) -> the construct of a pipelined wgmma loop it comes from; the first match wins
CONSTRUCTS = (("wgmma: HGMMA, arrive, waits", r"HGMMA|WARPGROUP|NOP"),
              ("wgmma descriptors and other uniform-datapath ops", r"U[A-Z0-9]+|R2UR|S2UR"),
              ("mbarrier waits and arrivals", r"SYNCS"), ("named barriers", r"BAR"), ("MUFU (ex2)", r"MUFU"),
              ("FFMA", r"FFMA"), ("FMUL", r"FMUL"), ("FADD", r"FADD"), ("FMNMX (row max)", r"FMNMX"),
              ("SHFL (row reductions)", r"SHFL"), ("F2FP (f32 -> bf16 pairs)", r"F2FP"),
              ("FSETP, VOTE (a warp-uniform test)", r"FSETP|VOTEU?"),
              ("integer: index math, masks' predicates, loop",
               r"IMAD|VIADD|IADD3|LOP3|ISETP|SHF|LEA|LDC|S2R|SEL|MOV|PLOP3"),
              ("branches", r"BRA"))


def construct(op: str) -> str:
    base = op.split(".")[0]
    return next((name for name, rx in CONSTRUCTS if re.fullmatch(rx, base)), base)


def functions(text: str) -> dict[str, list[tuple[int, str, str, str]]]:
    """{name: [(address, predicate, opcode, operands)]}, nvdisasm's branch labels replaced by their addresses."""
    out, cur, labels, pending = {}, None, {}, []
    for ln in text.splitlines():
        m = FUNCTION.search(ln)
        if m:
            cur = out.setdefault(m.group(1) or m.group(2), [])
            continue
        m = LABEL.match(ln)
        if m:
            pending.append(m.group(1))
            continue
        m = LINE.search(ln)
        if m and cur is not None:
            a = int(m.group(1), 16)
            labels.update((name, a) for name in pending)
            pending = []
            cur.append((a, (m.group(2) or "").strip(), m.group(3), m.group(4).strip()))
    return {name: [(a, pred, op, TARGET.sub(lambda t: hex(labels.get(t.group(1), -1)), args))
                   for a, pred, op, args in code] for name, code in out.items()}


def loops(code) -> list[tuple[int, int]]:
    """(first, last) indices of every span closed by a conditional backward branch, widest first. (An unconditional
    one is the way back from an mbarrier's retry block, which ptxas puts at the end of the function.)"""
    index = {a: i for i, (a, *_) in enumerate(code)}
    spans = set()
    for i, (a, pred, op, args) in enumerate(code):
        m = re.match(r"(0x[0-9a-f]+)", args)
        if op.startswith("BRA") and pred and m and int(m.group(1), 16) < a and int(m.group(1), 16) in index:
            spans.add((index[int(m.group(1), 16)], i))
    return sorted(spans, key=lambda s: s[0] - s[1])


def skipped(code, first: int, last: int) -> set[int]:
    """Indices inside the loop that a forward branch inside it jumps over (a mask applied to some blocks only):
    what is left is the path every iteration runs, a lower bound of what one issues."""
    index = {a: i for i, (a, *_) in enumerate(code)}
    out = set()
    for i in range(first, last + 1):
        a, _, op, args = code[i]
        m = re.match(r"(0x[0-9a-f]+)", args)
        if op.startswith("BRA") and m and a < int(m.group(1), 16) <= code[last][0]:
            out.update(range(i + 1, index[int(m.group(1), 16)]))
    return out


def label(op: str, args: str) -> str | None:
    for prefix, name in EVENTS:
        if op.startswith(prefix):
            if name == "HGMMA":
                return f"HGMMA.{op.split('.')[1]}" + (" gsb0" if "gsb0" in args else "") + \
                    (" A:regs" if re.match(r"R\d+, R\d+", args) else "")
            if name == "DEPBAR":
                return f"DEPBAR.LE {args.split(',')[-1].strip()}"
            return name
    return None


def events(code, first: int, last: int) -> list[str]:
    """The loop's shaping instructions in order, a run of one label as 'label xN'."""
    out: list[list] = []
    for _, pred, op, args in code[first:last + 1]:
        lab = label(op, args)
        if lab is None:
            continue
        lab = f"{pred} {lab}" if pred and not lab.startswith(("EX2", "HGMMA")) else lab
        if out and out[-1][0] == lab:
            out[-1][1] += 1
        else:
            out.append([lab, 1])
    return [f"{lab} x{n}" if n > 1 else lab for lab, n in out]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass")
    ap.add_argument("--function", default="", help="regex on the (mangled) function name")
    ap.add_argument("--min-hgmma", type=int, default=1, help="list loops holding at least this many HGMMA")
    ap.add_argument("--constructs", action="store_true", help="also the path's counts by source construct")
    a = ap.parse_args(argv)
    for name, code in functions(open(a.sass).read()).items():
        if not re.search(a.function, name):
            continue
        hist = collections.Counter(op.split(".")[0] for _, _, op, _ in code)
        print(f"== {name}: {len(code)} instructions; "
              f"setmaxnreg: {[args for _, _, op, args in code if op.startswith('USETMAXREG')]}")
        print("   whole kernel: " + ", ".join(f"{k} {v}" for k, v in hist.most_common(12)))
        for first, last in loops(code):
            body = code[first:last + 1]
            n_hgmma = sum(op.startswith("HGMMA") for _, _, op, _ in body)
            if n_hgmma < a.min_hgmma:
                continue
            skip = skipped(code, first, last)
            path = [code[i] for i in range(first, last + 1) if i not in skip]
            h = collections.Counter(op.split(".")[0] for _, _, op, _ in path)
            full = collections.Counter(op for _, _, op, _ in path)
            print(f"-- loop {code[first][0]:#06x}..{code[last][0]:#06x}: {len(body)} instructions, "
                  f"{len(path)} outside forward-branched spans ({n_hgmma} HGMMA, {full['MUFU.EX2']} MUFU.EX2): "
                  f"counts of those")
            print("   " + ", ".join(f"{k} {v}" for k, v in h.most_common(24)))
            print("   order: " + " | ".join(events(code, first, last)))
            if a.constructs:
                by = collections.Counter(construct(op) for _, _, op, _ in path)
                print("   by construct: " + ", ".join(f"{k} {v}" for k, v in by.most_common()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
