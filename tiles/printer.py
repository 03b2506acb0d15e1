"""The IR printer: a kernel as text, one statement per line."""
from __future__ import annotations

from . import ir
from .types import GL


def _arg(x) -> str:
    if x is None:
        return "_"
    if isinstance(x, ir.Expr):
        return ir.fmt(x)
    return x.name


def format_op(op: ir.Op) -> str:
    attrs = dict(op.attrs)
    idx = attrs.pop("idx", None)
    name = op.name
    if name == "mma":
        name = f"mma_{'At' if attrs.pop('trans_a') else 'A'}{'Bt' if attrs.pop('trans_b') else 'B'}"
    srcs = [_arg(s) for s in op.srcs]
    dst = _arg(op.dst)
    if idx is not None:
        where = f"[{', '.join(ir.fmt(i) for i in idx)}]" if idx else ""
        if isinstance(op.dst, GL):
            dst += where
        else:
            srcs[0] += where
    extra = "".join(f", {k}={v}" for k, v in attrs.items())
    return f"{name} {dst}" + (f" <- {', '.join(srcs)}" if srcs else "") + extra


def format_kernel(k: ir.Kernel) -> str:
    params = ", ".join(f"{p.name}: {p.type_str()}" if isinstance(p, GL) else f"{p.name}: {p.dtype}"
                       for p in k.params)
    consts = ", ".join(f"{n}={v}" for n, v in k.consts.items())
    lines = [f"kernel {k.name}({params}) {{{consts}}}"]
    if k.options:
        lines.append("  options " + ", ".join(f"{n}={v}" for n, v in k.options.items()))
    group = f", group={ir.fmt(k.group)}" if k.group is not None else ""
    lines.append(f"  grid ({', '.join(ir.fmt(g) for g in k.grid)}{group})")
    for c in k.checks:
        lines.append(f"  check {ir.fmt(c.a)} {c.op} {ir.fmt(c.b)}")
    for t in k.tiles:
        lines.append(f"  {t.name}: {t.type_str()}")

    def body(stmts, depth):
        for s in stmts:
            pad = "  " * depth
            if isinstance(s, ir.Loop):
                stages = f" stages={s.stages}" if s.stages else ""
                lines.append(f"{pad}{s.kind} {s.var.name} < {ir.fmt(s.count)}{stages}:")
                body(s.body, depth + 1)
            else:
                lines.append(pad + format_op(s))
    body(k.body, 1)
    return "\n".join(lines)
