"""tiles.torch: the shipped kernels as PyTorch operators, with autograd, torch.compile and CUDA graphs.

    import tiles.torch as tt
    o = tt.attention(q, k, v, causal=True)          # q (B, H, N, D); k, v (B, H_kv, N, D)

Each op is a torch operator in the "tiles" namespace (torch.ops.tiles.*) and runs where its tensors
live: CUDA tensors on the cuda backend (hip under torch for ROCm), mps tensors on metal, CPU tensors on the
reference interpreter (slow: for tests), or the backend given as backend= or $TILES_TORCH_BACKEND.
docs/torch.md lists the ops, their dtypes and limits. `import tiles` never imports torch; this module does.

Your own kernel as a torch op (docs/tutorial.md, section 7): an `op` (custom_op's surface, a lighter dispatch:
library.py) whose body allocates with `empty`,
launches with `launch` and is wrapped in `replayed` (a repeat with the same signature is one prepared launch a
kernel).
"""
from .dispatch import backend_name, empty, launch, resolve
from .library import op
from .ops import attention, layernorm, matmul, matmul_fp8, rmsnorm, rotary, softmax
from .replay import keep, replayed

__all__ = ["attention", "layernorm", "matmul", "matmul_fp8", "rmsnorm", "rotary", "softmax", "backend_name", "resolve",
           "empty", "keep", "launch", "op", "replayed"]
