"""Element types. Numerics of the narrow float types come from ml_dtypes."""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    np: type  # numpy scalar type used to store arrays of this dtype on the host
    bits: int
    is_float: bool = True
    max: float | None = None  # finite range, where conversions saturate (fp8 e4m3 has no infinity)

    def __repr__(self) -> str:
        return self.name

    @property
    def itemsize(self) -> int:
        return self.bits // 8

    def round(self, x) -> np.ndarray:
        """Round float values to this dtype (nearest even), returned as float32 (or the exact value)."""
        x = np.asarray(x, dtype=np.float64)
        if not self.is_float:
            return np.trunc(x).astype(np.int32)
        if self.max is not None:  # saturate instead of producing NaN, as the hardware conversions do
            x = np.where(np.isnan(x), x, np.clip(x, -self.max, self.max))
        return x.astype(self.np).astype(np.float32 if self.bits <= 32 else np.float64)


bf16 = DType("bf16", ml_dtypes.bfloat16, 16)
f16 = DType("f16", np.float16, 16)
f32 = DType("f32", np.float32, 32)
fp8e4m3 = DType("fp8e4m3", ml_dtypes.float8_e4m3fn, 8, max=448.0)
fp8e5m2 = DType("fp8e5m2", ml_dtypes.float8_e5m2, 8)
i32 = DType("i32", np.int32, 32, is_float=False)

ALL = (bf16, f16, f32, fp8e4m3, fp8e5m2, i32)
BY_NAME = {d.name: d for d in ALL}
FLOAT8 = (fp8e4m3, fp8e5m2)


_SEEN: dict = {}   # dtype objects (numpy's, torch's, ...) already looked up: a launch asks for every array's


def of(x) -> DType:
    """The tiles dtype of a DType, a name, a numpy dtype or an array of any framework."""
    if isinstance(x, DType):
        return x
    dt = getattr(x, "dtype", x)
    try:
        return _SEEN[dt]
    except KeyError:   # not seen yet
        d = _SEEN[dt] = _lookup(x)
        return d
    except TypeError:   # not hashable
        return _lookup(x)


def _lookup(x) -> DType:
    if isinstance(x, str) and x in BY_NAME:
        return BY_NAME[x]
    name = x if isinstance(x, str) else str(getattr(x, "dtype", x))
    aliases = {"bfloat16": bf16, "float16": f16, "float32": f32, "int32": i32,
               "float8_e4m3fn": fp8e4m3, "float8_e5m2": fp8e5m2}
    key = name.removeprefix("torch.")
    if key in aliases:
        return aliases[key]
    raise TypeError(f"dtype {name} has no tiles equivalent; supported: {', '.join(BY_NAME)}")
