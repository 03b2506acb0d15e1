"""Does a tune=True search's order hold when its candidates are timed again? The search for docs/examples.md's
linear_silu at 4096x14336x4096 (its candidates, each timed as the search times it), then the winner, the runner-up
and the default timed again with a longer budget, forward and then in reverse order, in the same process (12-04:
the tuned configuration ran 856 us where the default ran 784, in scripts/gpu_examples.py).

    python3 scripts/search_vs_bench.py [MxNxK [BACKEND]]"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_examples import namespace  # noqa: E402

from tiles import backend, bench  # noqa: E402
from tiles.testing import poisoned, random_array  # noqa: E402
from tiles.tune.search import clock_for, search  # noqa: E402


def main() -> None:
    m, n, k = (int(d) for d in (sys.argv[1] if len(sys.argv) > 1 else "4096x14336x4096").split("x"))
    kfn, b = namespace()["linear_silu"], backend.get(sys.argv[2] if len(sys.argv) > 2 else "cuda")
    host = [poisoned((m, n), "bf16"), random_array((m, k), "bf16"), random_array((k, n), "bf16"),
            random_array((n,), "f32")]
    r = search(kfn, b, host, {})
    timed = sorted((c for c in r.candidates if c.time_s), key=lambda c: c.time_s)
    for c in timed:
        print(f"search  {c.time_s * 1e6:8.1f} us  {c.label()}", flush=True)
    again = timed[:2] + [c for c in timed[2:] if c.default]
    sets = bench.input_sets(sum(a.nbytes for a in host))
    copies = [[b.asarray(a.copy()) for a in host] for _ in range(sets)]
    for order in (again, again[::-1]):
        for c in order:
            t = bench.measure(lambda i: b.launch(kfn, copies[i], tune=False, **c.config), sets=sets,
                              clock=clock_for(b), budget_s=1.5).median_s
            print(f"again   {t * 1e6:8.1f} us  {c.label()}", flush=True)


if __name__ == "__main__":
    main()
