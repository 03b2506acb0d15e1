"""torch operators with a lighter dispatch than torch.library.custom_op, and the same surface.

    @op("tiles::rmsnorm")                 # the schema from the type hints, as custom_op infers it
    def rmsnorm_fwd(x: Tensor, w: Tensor, eps: float, backend: str) -> tuple[Tensor, Tensor]: ...

    @rmsnorm_fwd.register_fake            # shape inference for torch.compile, FakeTensor, meta
    def _(x, w, eps, backend): ...

    rmsnorm_fwd.register_autograd(backward, setup_context=setup)

A custom_op call runs three Python layers under the dispatcher (an autograd kernel, a redispatch below
autograd, a backend kernel that checks the outputs for aliasing under dynamo's guard): ~11 us a call on this VM
and ~45 on the H100's host (docs/torch.md, "Host time"). Here the body is the op's one kernel for every device
(CompositeExplicitAutograd) and the autograd kernel is a single Python function that calls the op again below
autograd unless some input requires grad, when an autograd.Function records it: ~6 us on this VM; called from
Python with no input requiring grad (outside torch.compile's tracing), the op goes below autograd at once, ~2 us
less. An op without a formula gets the same kernel with a backward that raises, so a gradient never silently
skips it.
"""
from __future__ import annotations

import torch

from tiles.dsl import TileError

_LIBRARIES: dict[str, torch.library.Library] = {}   # "ns::name" -> the library holding its registrations

try:
    _infer_schema = torch.library.infer_schema
except AttributeError:   # torch 2.4
    from torch._library.infer_schema import infer_schema as _infer_schema


def _recorded(args) -> bool:
    """Whether autograd would record a call on these arguments."""
    return torch.is_grad_enabled() and torch._C._any_requires_grad(*args)


def _library(qualname: str) -> torch.library.Library:
    """A library of its own for the op, whose earlier definition (a notebook cell run again) it replaces, as
    custom_op does."""
    if qualname in _LIBRARIES:
        _LIBRARIES.pop(qualname)._destroy()
    lib = _LIBRARIES[qualname] = torch.library.Library(qualname.split("::")[0], "FRAGMENT")
    return lib


class Op:
    """A torch operator "ns::name" (torch.ops.ns.name): call it as the function it wraps."""

    def __init__(self, qualname: str, body):
        namespace, self.name = qualname.split("::")
        self.qualname, self.lib = qualname, _library(qualname)
        self.lib.define(self.name + _infer_schema(body, mutates_args=()),
                        tags=(torch.Tag.pt2_compliant_tag,))
        self.lib.impl(self.name, body, "CompositeExplicitAutograd")
        self.overload = getattr(getattr(torch.ops, namespace), self.name).default
        # the dispatcher drops trailing arguments equal to their defaults; the autograd kernel puts them back
        self._defaults = [a.default_value for a in self.overload._schema.arguments]
        self.__doc__, self.__wrapped__ = body.__doc__, body   # __wrapped__: the body, without the dispatcher
        self._backward = self._setup_context = None
        self.lib.impl(self.name, self._autograd_kernel(), "Autograd")

    def __call__(self, *args, **kwargs):
        if torch.compiler.is_compiling() or _recorded(args):
            return self.overload(*args, **kwargs)
        with torch._C._AutoDispatchBelowAutograd():   # what the autograd kernel would do, without entering it
            return self.overload(*args, **kwargs)

    def register_fake(self, fake):
        torch.library.register_fake(self.qualname, fake, lib=self.lib)
        return fake

    def register_autograd(self, backward, *, setup_context=None):
        """backward(ctx, *output_grads) -> a gradient per input (None where there is none); setup_context(ctx,
        inputs, output) saves what it needs: custom_op's contract. Without one, a gradient through the op raises."""
        self._backward, self._setup_context = backward, setup_context

    def _autograd_kernel(self):
        op, defaults = self.overload, self._defaults

        def forward(ctx, *args):
            with torch._C._AutoDispatchBelowAutograd():
                out = op(*args)
            if self._setup_context is not None:
                self._setup_context(ctx, args, out)
            return out

        def backward(ctx, *grads):
            if self._backward is None:
                raise TileError(f"{self.qualname} has no backward: detach its inputs or run it under torch.no_grad()")
            return self._backward(ctx, *grads)

        function = type(f"{self.name}_autograd", (torch.autograd.Function,),
                        {"forward": staticmethod(forward), "backward": staticmethod(backward)})

        def autograd_kernel(*args):
            if len(args) < len(defaults):
                args = (*args, *defaults[len(args):])
            if _recorded(args):
                return function.apply(*args)
            with torch._C._AutoDispatchBelowAutograd():
                return op(*args)
        return autograd_kernel


def op(qualname: str):
    """Decorator: the function as the torch operator `qualname` ("namespace::name"), an Op. Functional ops only
    (custom_op's mutates_args=()): an op that writes its inputs needs torch's in-place bookkeeping, which
    torch.library.custom_op registers."""
    return lambda body: Op(qualname, body)
