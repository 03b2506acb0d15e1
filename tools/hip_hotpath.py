#!/usr/bin/env python3
"""hip_hotpath.py FILE.s: per-MFMA totals of the main loop's hot path in clang's AMDGPU assembly.

The main loop is the loop whose own blocks hold the most MFMAs. Its hot path is, of the paths from the
header back to it (nested loops left out), the one with the most MFMAs, then no per-lane (exec-masked)
code, no element-wise global loads and no compares (full tiles: the edge paths' checks skipped), then the
most global loads and LDS writes (the next tile issued), then the fewest instructions. Printed as
/work/shared/hk-compare/loopstat.py --path prints it. The numbers of docs/backends/hip.md come from it:
    python -m tiles inspect gemm --emit asm --target gfx950 --shape 4096x4096x4096,bt > g.s
    python tools/hip_hotpath.py g.s
(a stop-gap until the product's loop report, backends/hip/loopreport.py, finds hot paths itself)."""
import os, re, sys
sys.path.insert(0, os.environ.get("HK_COMPARE", "/work/shared/hk-compare"))
import loopstat as L  # noqa: E402
f = sys.argv[1]
blocks = L.parse_blocks(f)
names = list(blocks)
heads = [n for n, b in blocks.items() if b["header"]]
def members(h): return L.loop_members(blocks, h)
h = max(heads, key=lambda h: sum(L.block_stats(blocks[n])["MFMA"] for n in members(h) if blocks[n]["loop"] == h))
mem = set(members(h)); own = {n for n in mem if blocks[n]["loop"] == h}
def succ(n):
    i = names.index(n); lines = blocks[n]["lines"]; last = lines[-1] if lines else ""
    out = []
    for line in lines[-2:]:   # a conditional branch may be followed by an unconditional one
        m = re.match(r"s_(c?branch)\w*\s+\.L(BB\d+_\d+)", line)
        if m: out.append(m.group(2))
    if not last.startswith("s_branch") and i + 1 < len(names): out.append(names[i + 1])
    return out
def bscore(n):
    t = "\n".join(blocks[n]["lines"])
    narrow = len(re.findall(r"buffer_load_(ushort|ubyte|sshort|sbyte)", t))
    return (t.count("v_mfma"), -t.count("saveexec"), -narrow, -t.count("v_cmp"), t.count("buffer_load"),
            t.count("ds_write"), -len(blocks[n]["lines"]))
def add(a, b): return tuple(x + y for x, y in zip(a, b))
# the loop's blocks minus the edges back to the header form a DAG (nested loops are not own blocks):
# the best path by the lexicographic sum of block scores, by dynamic programming from the header
order, state = [], {}
def topo(n):   # reverse postorder from the header, edges back to the header (or up the DFS stack) dropped
    state[n] = 1
    for s2 in succ(n):
        if s2 in own and s2 != h and s2 not in state: topo(s2)
    state[n] = 2
    order.append(n)
sys.setrecursionlimit(100000)
topo(h)
order.reverse()
pos = {n: i for i, n in enumerate(order)}
best_to = {h: (bscore(h), [h])}
ends = []
for n in order:
    if n not in best_to: continue
    sc, path = best_to[n]
    for s2 in succ(n):
        if s2 == h: ends.append((sc, path))
        elif s2 in pos and pos[s2] > pos[n]:
            cand = (add(sc, bscore(s2)), path + [s2])
            if s2 not in best_to or cand[0] > best_to[s2][0]: best_to[s2] = cand
best = max(ends)
spec = ",".join(best[1])
print("loop", h, "path", spec)
sys.argv = ["loopstat", f, "--path", spec]
L.main()
