"""Result rows of `tiles compare` / `tiles demo`: the table, the JSON file, merging files, the plot."""
from __future__ import annotations

import datetime
import json
import math
import platform
from dataclasses import asdict, dataclass, fields

# How a row was produced; `time` is meaningful only for "device" and "library".
KINDS = ("reference", "emulator", "device", "library", "compile-only", "skipped")


@dataclass
class Row:
    kernel: str
    shape: str
    backend: str              # "reference", "hip-emu:gfx942", "cuda", "cuBLAS (torch.matmul)", "sm_90a (nvrtc)"
    kind: str                 # one of KINDS
    device: str = ""
    target: str = ""
    max_abs: float | None = None   # max |out - ref| over the outputs
    rel_err: float | None = None   # max over outputs of ‖out - ref‖ / ‖ref‖
    ok: bool | None = None         # every output within its dtype's tolerance; None: not checked
    time_s: float | None = None
    tflops: float | None = None
    gbs: float | None = None       # memory-bound kernels: GB/s of the least traffic
    peak_pct: float | None = None  # of the device's dense matrix peak for the input dtype, or of its bandwidth
    vs_lib: float | None = None    # library time / our time (above 1: ours is faster); on our row against the
                                   # fastest library of the run, on a library row against that library
    copy_pct: float | None = None  # memory-bound kernels: of the device-to-device copy measured in the same run
    note: str = ""                 # static resources of compile-only rows, why a row was skipped, what failed
    machine: str = ""


def _num(x, fmt: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _time(r: Row) -> str:
    if r.kind in ("reference", "emulator") and r.ok is not None:
        return "emulated"
    if r.time_s is None:
        return "-"
    return f"{r.time_s * 1e6:.1f} us" if r.time_s < 1e-3 else f"{r.time_s * 1e3:.3f} ms"


def _check(r: Row) -> str:
    if r.ok is None:
        return "-"
    return "ok" if r.ok else "FAIL"


COLUMNS = (
    ("kernel", lambda r: r.kernel), ("shape", lambda r: r.shape), ("backend", lambda r: r.backend),
    ("device", lambda r: r.device), ("target", lambda r: r.target),
    ("max err", lambda r: _num(r.max_abs, ".2e")), ("rel err", lambda r: _num(r.rel_err, ".2e")),
    ("check", _check), ("time", _time), ("TFLOP/s", lambda r: _num(r.tflops, ".1f")),
    ("GB/s", lambda r: _num(r.gbs, ".0f")), ("% peak", lambda r: _num(r.peak_pct, ".1f")),
    ("% copy", lambda r: _num(r.copy_pct, ".1f")),
    ("vs lib", lambda r: _num(r.vs_lib, ".2f") + ("x" if r.vs_lib else "")),
    ("machine", lambda r: r.machine), ("notes", lambda r: r.note),
)


def line(r: Row) -> str:
    """One row on one line, its known cells named: a log that shows each row as soon as it is made."""
    cells = [(n, get(r)) for n, get in COLUMNS if n not in ("machine", "notes")]
    head = [c for n, c in cells[:5] if c]
    return "  ".join(head + [f"{n} {c}" for n, c in cells[5:] if c not in ("-", "")])


def table(rows: list[Row], drop_empty: bool = True) -> str:
    """Rows as an aligned text table; columns with nothing but '-' (or one machine only) are left out."""
    cols = []
    for name, get in COLUMNS:
        cells = [get(r) for r in rows]
        if name == "machine" and len(set(cells)) <= 1:
            continue
        if drop_empty and name not in ("kernel", "backend") and all(c in ("-", "") for c in cells):
            continue
        cols.append((name, cells))
    widths = [max(len(n), *(len(c) for c in cells)) for n, cells in cols]
    out = ["  ".join(n.ljust(w) for (n, _), w in zip(cols, widths)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    for i in range(len(rows)):
        out.append("  ".join(cells[i].ljust(w) for (_, cells), w in zip(cols, widths)).rstrip())
    return "\n".join(out)


def machine() -> str:
    return platform.node() or "unknown"


def save(rows: list[Row], path: str) -> None:
    from . import __version__
    doc = {"tiles": __version__, "machine": machine(), "date": datetime.datetime.now(datetime.timezone.utc)
           .isoformat(timespec="seconds"), "rows": [asdict(r) for r in rows]}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, allow_nan=True)


def load(path: str) -> list[Row]:
    """The rows of one saved file, each labelled with the machine it came from."""
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or "rows" not in doc:
        raise ValueError(f"{path}: not a file written by `tiles compare --json`")
    known = {f.name for f in fields(Row)}
    rows = []
    for d in doc["rows"]:
        r = Row(**{k: v for k, v in d.items() if k in known})
        r.machine = r.machine or doc.get("machine", path)
        rows.append(r)
    return rows


def merge(paths: list[str]) -> list[Row]:
    """Rows of several files in one list; of identical (machine, kernel, shape, backend) rows the last wins."""
    seen: dict[tuple, Row] = {}
    for p in paths:
        for r in load(p):
            seen[(r.machine, r.kernel, r.shape, r.backend, r.target)] = r
    return list(seen.values())


def plot(rows: list[Row], path: str) -> int:
    """Grouped bars: % of peak per (kernel, shape), one bar per device for tiles and one for its vendor
    library. Returns the number of bars drawn."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("--plot needs matplotlib: pip install 'tiles[plot]'") from None
    timed = [r for r in rows if r.peak_pct is not None]
    if not timed:
        raise RuntimeError("nothing to plot: no row has a % of peak (those come from runs on a GPU)")

    def series_of(r: Row) -> str:   # per device: tiles, and whichever library that vendor's baseline is
        return f"{r.device}: {'vendor library' if r.kind == 'library' else 'tiles'}"
    groups = list(dict.fromkeys(f"{r.kernel} {r.shape}" for r in timed))
    series = list(dict.fromkeys(series_of(r) for r in timed))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(groups) * max(1, len(series) / 3)), 4.5))
    for j, name in enumerate(series):
        xs, ys = [], []
        for i, g in enumerate(groups):
            for r in timed:
                if f"{r.kernel} {r.shape}" == g and series_of(r) == name:
                    xs.append(i + (j - (len(series) - 1) / 2) * width)
                    ys.append(r.peak_pct)
        ax.bar(xs, ys, width, label=name)
    ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
    ax.set_ylabel("% of the device's peak\n(dense matrix FLOP/s, or memory bandwidth)")
    ax.set_title("tiles compare: % of peak per vendor")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return len(timed)
