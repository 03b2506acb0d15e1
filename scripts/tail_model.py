"""How evenly a grid's blocks share the SMs when their work differs (causal attention's tiles): the makespan of a
grid of tiles against the ideal (total work / SMs), for the two ways the CUDA backend runs a grid.

    python scripts/tail_model.py [--sms 132] [--overhead 2]

- a plain grid: the hardware hands each SM the next block as one finishes (list scheduling, in launch order);
- a persistent grid: one block per SM walks the tiles in rounds, taking tile r * SMS + b in even rounds and
  r * SMS + SMS - 1 - b in odd ones (tc::persistent_tile): a static assignment.

A tile costs the key (or query) blocks it walks plus `overhead` (its prologue and epilogue, in the same units).
The model leaves out memory: an order that puts many heads in flight at once also moves their operands out of
L2 (docs/benchmarks.md, 2026-12-06: the backward's kv blocks by bn across every head, 1.7-2x slower), so compare
orders that keep about as few heads in flight. It printed the predictions of docs/benchmarks.md's "Session of
2026-12-06 (09:24 UTC-)": the backward's grouped order, and the forward's walk in either direction.
"""
from __future__ import annotations

import argparse
import heapq
import math


def plain(costs: list[float], sms: int) -> float:
    """Makespan when each block goes to the SM that frees first, in launch order."""
    free = [0.0] * sms
    for c in costs:
        heapq.heappush(free, heapq.heappop(free) + c)
    return max(free)


def persistent(costs: list[float], sms: int) -> float:
    """Makespan of the persistent walk: block b takes round r's tile r * sms + b, reversed on odd rounds."""
    blocks = min(sms, len(costs))
    load = [0.0] * blocks
    for t, c in enumerate(costs):
        r, i = divmod(t, blocks)
        load[blocks - 1 - i if r & 1 else i] += c
    return max(load)


def grouped(heads: int, n: int, group: int) -> list[tuple[int, int]]:
    """(head, block) in tl.grid(heads, n, group=group)'s launch order: column by column within groups of heads."""
    return [(h, j) for h0 in range(0, heads, group) for j in range(n) for h in range(h0, min(heads, h0 + group))]


def efficiency(makespan, costs, sms) -> float:
    return sum(costs) / min(sms, len(costs)) / makespan


def backward(heads: int, n_kv: int, bm_per_bn: int, overhead: float, sms: int):
    """Causal backward: kv block bn walks n_kv * bm_per_bn - bn * bm_per_bn query blocks. Head order against
    groups of about a wave of blocks, longest first (attention_bwd's longest_first)."""
    cost = lambda bn: (n_kv - bn) * bm_per_bn + overhead  # noqa: E731
    head_order = [cost(bn) for _ in range(heads) for bn in range(n_kv)]
    groups = [cost(bn) for _, bn in grouped(heads, n_kv, max(1, 128 // n_kv))]
    return {o: efficiency(plain(c, sms), c, sms) for o, c in (("head order", head_order), ("grouped", groups))}


def forward(heads: int, n_q: int, kv_per_q: float, overhead: float, sms: int):
    """Causal forward on the persistent grid: query block bm walks ceil((bm + 1) * kv_per_q) key blocks. Each
    head's blocks longest first (attention_fwd's longest_first) against in order."""
    cost = lambda bm: math.ceil((bm + 1) * kv_per_q) + overhead  # noqa: E731
    longest = [cost(n_q - 1 - j) for _ in range(heads) for j in range(n_q)]
    ascending = [cost(j) for _ in range(heads) for j in range(n_q)]
    return {o: efficiency(persistent(c, sms), c, sms) for o, c in (("longest first", longest),
                                                                 ("in order", ascending))}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sms", type=int, default=132)
    p.add_argument("--overhead", type=float, default=2.0, help="a tile's prologue and epilogue, in key blocks")
    a = p.parse_args(argv)
    print(f"fraction of the ideal makespan ({a.sms} SMs, {a.overhead:g} blocks of overhead a tile)")
    for name, heads, n_kv, per in (("backward 8x16x2048x128 causal (BN 128, BM 64)", 128, 16, 2),
                                   ("backward 16x16x4096x64 causal", 256, 32, 2),
                                   ("backward 4x32x8192x128 causal", 128, 64, 2)):
        print(f"  {name}: " + ", ".join(f"{o} {e:.3f}" for o, e in backward(heads, n_kv, per, a.overhead,
                                                                          a.sms).items()))
    for name, heads, n_q, per in (("forward 4x32x8192x128 causal, persistent (BM = BN = 128)", 128, 64, 1),
                                  ("forward 2x32x16384x128 causal, persistent", 64, 128, 1),
                                  ("forward 8x16x2048x128 causal, persistent", 128, 16, 1),
                                  ("forward 16x16x4096x64 causal, persistent (BM 192)", 256, 22, 1.5)):
        print(f"  {name}: " + ", ".join(f"{o} {e:.3f}" for o, e in forward(heads, n_q, per, a.overhead,
                                                                         a.sms).items()))


if __name__ == "__main__":
    main()
