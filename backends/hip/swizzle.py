"""Pick each LDS tile's swizzle from a bank model of the read it serves.

The swizzle (tiles_hip/shared.hpp) XORs the G-byte granule index within a row with
``(row >> S) & MASK``. For the MFMA operand read a tile serves (each lane reads E consecutive K elements
of one row, lanes l % M walking down rows, l / M across K) the model lays out the 64 lanes' addresses,
splits them into the phases the LDS serves together (banks * 4 bytes per phase: a ds_read_b128 serves
8 lanes per phase on gfx942, 16 on gfx950), and counts the cycles a phase takes (the most distinct
words that fall in one bank). Lanes of a phase are taken as consecutive: the hardware's exact phase
membership for gfx950 ds_read_b128 (non-contiguous, per DESIGN.md) is not modelled.
"""
from __future__ import annotations

from functools import lru_cache

from tiles import targets


def granule(target: str, read_bytes: int) -> int:
    """gfx950's direct global->LDS loads write 16 bytes per lane, so its granule is 16; gfx942 can follow the read."""
    return 16 if target == "gfx950" else max(4, min(16, read_bytes))


def offset(r: int, byte: int, row_bytes: int, g: int, s: int, mask: int) -> int:
    return r * row_bytes + (((byte // g) ^ ((r >> s) & mask)) * g) + byte % g


def cycles(target: str, addrs: list[int], width: int) -> int:
    """LDS cycles for one instruction whose lanes read `width` bytes at `addrs`."""
    t = targets.target(target)
    per_phase = max(1, min(len(addrs), t.banks * t.bank_bytes // max(width, 4)))
    total = 0
    for p in range(0, len(addrs), per_phase):
        banks: dict[int, set] = {}
        for a in addrs[p:p + per_phase]:
            for w in range(a // 4, (a + max(width, 4) - 1) // 4 + 1):
                banks.setdefault(w % t.banks, set()).add(w)
        total += max(len(v) for v in banks.values())
    return total


def operand_read(m: int, e: int, elem: int) -> list[tuple[int, int]]:
    """(row, byte in row) of every lane of an MFMA operand read: row l % m, K-run e * (l // m)."""
    return [(lane % m, e * (lane // m) * elem) for lane in range(64)]


@lru_cache(maxsize=None)
def choose(target: str, rows: int, row_bytes: int, m: int, e: int, elem: int,
           paired: bool = False) -> tuple[int, int, int]:
    """(G, S, MASK) with the fewest modelled cycles for the operand read along the rows; ties go to the simplest.
    `paired`: rows and row_bytes are the stored ones of a tiles_hip::paired tile, each lane reading the words of
    its row's pair (twice the bytes of its run)."""
    k = 2 if paired else 1
    width = min(16, k * e * elem)
    g = granule(target, width)
    units = row_bytes // g
    if units < 2 or row_bytes % g:
        return (g if row_bytes % g == 0 else 4, 0, 0)
    lanes = [(r // k % rows, k * b) for r, b in operand_read(m, e, elem)]
    best = None
    for mask in (0, 1, 3, 7, 15):
        if mask >= units:
            break
        for s in range(4):
            c = cycles(target, [offset(r, b, row_bytes, g, s, mask) for r, b in lanes], width)
            if best is None or c < best[0]:
                best = (c, (g, s, mask))
    return best[1]
