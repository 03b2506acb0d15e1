"""Philox 4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11) in
numpy: the counter-based generator that defines `tl.dropout`'s mask, the same on every backend.

The uniform of element (row, col) of a launch, for a seed and an offset:
    counter = (col // 4, row, offset, 0), key = (seed, 0)        (32-bit words)
    u = (philox4x32_10(counter, key)[col % 4] >> 8) * 2**-24      (24 bits: exact in float32, in [0, 1))
Four neighbouring columns share one Philox evaluation, so a lane that holds them computes it once.
"""
from __future__ import annotations

import numpy as np

MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
WEYL = (0x9E3779B9, 0xBB67AE85)  # key increments per round: golden ratio and sqrt(3) - 1, as 32-bit fractions
ROUNDS = 10
_MASK = np.uint64(0xFFFFFFFF)


def philox4x32(counter, key, rounds: int = ROUNDS) -> tuple[np.ndarray, ...]:
    """The four 32-bit output words for counter words (c0, c1, c2, c3) and key words (k0, k1), elementwise
    over arrays (broadcast); uint32 arrays out."""
    c = [np.asarray(x, dtype=np.uint64) & _MASK for x in counter]
    k0, k1 = (np.asarray(x, dtype=np.uint64) & _MASK for x in key)
    m0, m1 = np.uint64(MULTIPLIERS[0]), np.uint64(MULTIPLIERS[1])
    for r in range(rounds):
        p0, p1 = m0 * c[0], m1 * c[2]            # 32 x 32 -> 64-bit products, exact in uint64
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & _MASK, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & _MASK]
        if r + 1 < rounds:
            k0, k1 = (k0 + np.uint64(WEYL[0])) & _MASK, (k1 + np.uint64(WEYL[1])) & _MASK
    return tuple(x.astype(np.uint32) for x in c)


def uniform(seed: int, offset: int, rows, cols) -> np.ndarray:
    """float32 uniforms in [0, 1) for global element indices rows x cols (broadcast), as tl.dropout draws."""
    rows, cols = np.broadcast_arrays(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))
    words = philox4x32((cols // 4, rows, np.full(rows.shape, offset & 0xFFFFFFFF), 0), (seed & 0xFFFFFFFF, 0))
    pick = np.choose(cols % 4, words)
    return ((pick >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)).astype(np.float32)


def keep_mask(seed: int, offset: int, rows, cols, p: float) -> np.ndarray:
    """True where dropout with probability p keeps the element: u >= p, p rounded to float32 first."""
    return uniform(seed, offset, rows, cols) >= np.float32(p)
