"""A small Llama-style decoder in plain torch, written after Hugging Face's LlamaForCausalLM: token embedding,
pre-norm blocks of RMSNorm -> grouped-query attention with half-split rotary embeddings (rotate_half) -> residual,
RMSNorm -> SwiGLU MLP -> residual, a final RMSNorm and an untied LM head; no biases.

`Llama(config, tiles=True)` (or `model.use_tiles(True)`) swaps its attention, RMSNorm and rotary for tiles.torch's
ops; everything else (the linear layers, embedding, SiLU, loss) stays torch's. With tiles=False it is the stock
model: scaled_dot_product_attention (flash or cuDNN on a GPU), RMSNorm and rotary as Hugging Face computes them.
The test of the ops in a model (tests/test_torch_model.py, .ci/gpu_torch.py) trains both from one seed.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from . import ops


_SDPA_GQA = tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 5)   # SDPA's enable_gqa


@dataclass
class Config:
    vocab: int = 256
    dim: int = 256
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 688            # SwiGLU hidden size (Llama: about 8/3 dim)
    max_seq: int = 256
    rope_theta: float = 10000.0
    eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, model: "Llama"):
        super().__init__()
        self.weight, self.eps, self._model = nn.Parameter(torch.ones(dim)), eps, [model]

    def forward(self, x: Tensor) -> Tensor:
        if self._model[0].tiles:
            return ops.rmsnorm(x, self.weight.to(x.dtype), eps=self.eps)
        # Hugging Face's LlamaRMSNorm: the statistics in float32, x̂ rounded to x's dtype before the weight
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight.to(x.dtype) * xf.to(x.dtype)


def rotate_half(x: Tensor) -> Tensor:
    a, b = x.chunk(2, -1)
    return torch.cat((-b, a), -1)


class Attention(nn.Module):
    def __init__(self, c: Config, model: "Llama"):
        super().__init__()
        self.c, self._model = c, [model]
        self.q = nn.Linear(c.dim, c.heads * c.head_dim, bias=False)
        self.k = nn.Linear(c.dim, c.kv_heads * c.head_dim, bias=False)
        self.v = nn.Linear(c.dim, c.kv_heads * c.head_dim, bias=False)
        self.o = nn.Linear(c.heads * c.head_dim, c.dim, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        b, n, _ = x.shape
        c = self.c
        q = self.q(x).view(b, n, c.heads, c.head_dim).transpose(1, 2)       # (B, H, N, D), strided
        k = self.k(x).view(b, n, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v(x).view(b, n, c.kv_heads, c.head_dim).transpose(1, 2)
        if self._model[0].tiles:
            q, k = ops.rotary(q, k, cos, sin)
            o = ops.attention(q, k, v, causal=True)
        else:   # Hugging Face: cos and sin repeated over both halves, applied in the activations' dtype
            cos2, sin2 = (torch.cat((t, t), -1).to(q.dtype) for t in (cos, sin))
            q, k = q * cos2 + rotate_half(q) * sin2, k * cos2 + rotate_half(k) * sin2
            if c.heads != c.kv_heads and not _SDPA_GQA:   # torch before 2.5: the kv heads repeated
                k, v = (t.repeat_interleave(c.heads // c.kv_heads, 1) for t in (k, v))
            gqa = {"enable_gqa": True} if c.heads != c.kv_heads and _SDPA_GQA else {}
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
        return self.o(o.transpose(1, 2).reshape(b, n, c.heads * c.head_dim))


class MLP(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.gate = nn.Linear(c.dim, c.ffn, bias=False)
        self.up = nn.Linear(c.dim, c.ffn, bias=False)
        self.down = nn.Linear(c.ffn, c.dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, c: Config, model: "Llama"):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(c.dim, c.eps, model), Attention(c, model)
        self.mlp_norm, self.mlp = RMSNorm(c.dim, c.eps, model), MLP(c)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(self, c: Config, tiles: bool = False):
        super().__init__()
        self.c, self.tiles = c, tiles
        self.embed = nn.Embedding(c.vocab, c.dim)
        self.blocks = nn.ModuleList(Block(c, self) for _ in range(c.layers))
        self.norm = RMSNorm(c.dim, c.eps, self)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)
        inv = c.rope_theta ** (-torch.arange(0, c.head_dim, 2, dtype=torch.float64) / c.head_dim)
        ang = torch.arange(c.max_seq, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos().float(), persistent=False)   # (max_seq, D/2)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        for m in self.modules():   # Llama's initialization: normal(0, 0.02)
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def use_tiles(self, on: bool = True) -> "Llama":
        self.tiles = on
        return self

    def forward(self, tokens: Tensor, targets: Tensor | None = None):
        """Logits (B, N, vocab) for tokens (B, N); with targets, (logits, mean cross-entropy)."""
        n = tokens.shape[1]
        x = self.embed(tokens)
        cos, sin = self.cos[:n].to(x.dtype), self.sin[:n].to(x.dtype)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        logits = self.head(self.norm(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
