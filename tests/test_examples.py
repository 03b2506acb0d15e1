"""docs/examples.md runs as written, and each of its tests passes on every backend."""
import functools
import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples.md"


@functools.lru_cache(maxsize=1)
def namespace() -> dict:
    """The page's python blocks, executed in order, each kept at its line in the markdown so that errors and
    the kernels' source locations point into examples.md."""
    text = EXAMPLES.read_text()
    lines = [""] * (text.count("\n") + 1)
    for m in re.finditer(r"```python\n(.*?)```", text, re.S):
        start = text[:m.start(1)].count("\n")
        for i, line in enumerate(m.group(1).splitlines()):
            lines[start + i] = line
    ns = {"__name__": "examples"}
    exec(compile("\n".join(lines) + "\n", str(EXAMPLES), "exec"), ns)
    return ns


TESTS = sorted(re.findall(r"^def (test_\w+)\(backend", EXAMPLES.read_text(), re.M))


def test_the_page_defines_its_kernels_and_tests():
    ns = namespace()
    assert {"linear_silu", "bmm", "swiglu", "add_rmsnorm"} <= ns.keys()
    assert TESTS == ["test_add_rmsnorm", "test_bmm", "test_linear_silu", "test_mlp", "test_swiglu"]


@pytest.mark.parametrize("name", TESTS)
def test_example_on_every_backend(backend, name):
    namespace()[name](backend=backend)


KERNELS = {   # each example kernel with arguments of a model's shapes (Llama 3 8B's hidden 4096, MLP 14336)
    "linear_silu": lambda a: [a((512, 4096)), a((512, 1024)), a((1024, 4096)), a((4096,), "f32")],
    "bmm": lambda a: [a((8, 256, 512), "f32"), a((8, 256, 128)), a((8, 128, 512))],
    "swiglu": lambda a: [a((512, 1024)), a((512, 4096)), a((4096, 1024)), a((4096, 1024))],
    # rows of 4096 and 8192 columns (Llama 3 8B's and 70B's hidden) as (rows, C/64, 64) views (row_tile)
    "add_rmsnorm": lambda a: [a((512, 64, 64))] * 4 + [a((64, 64)), 1e-6],
    "add_rmsnorm_8192": lambda a: [a((512, 128, 64))] * 4 + [a((128, 64)), 1e-6],
}
CONSTS = {"add_rmsnorm": dict(TR=64, K=64), "add_rmsnorm_8192": dict(TR=128, K=64)}


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "gfx942", "gfx950", "apple"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_example_compiles_for_every_target_without_spills(name, target):
    """What the verifier accepts compiles in the target's own compiler at the configured block shape, with no
    register spills (NVRTC/ptxas, clang for AMDGPU, the MSL host check for Apple)."""
    from tiles import toolchains
    from tiles import tune
    from tiles.tune import Shaped
    why = toolchains.cannot_compile(target)
    if why and target != "apple":
        pytest.skip(why)
    kfn = namespace()[name.split("_8192")[0]]
    args = KERNELS[name](lambda shape, dtype="bf16": Shaped(shape, dtype))
    st = toolchains.static(kfn, args, target, **tune.defaults(kfn, target, args, CONSTS.get(name, {})))
    assert st.spill_bytes in (0, None), st.summary()
