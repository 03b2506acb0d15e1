"""The on-disk compile caches every backend shares: $TILES_CACHE (default ~/.cache/tiles), a folder per kind
("cuda" cubins, "hip" code objects, "emu" host builds), files named by a digest of everything that made them."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable


def folder(kind: str) -> Path:
    root = Path(os.environ.get("TILES_CACHE") or Path.home() / ".cache" / "tiles")
    d = root / kind
    d.mkdir(parents=True, exist_ok=True)
    return d


def key(*parts) -> str:
    """A file name for the JSON-serializable parts (source, header digest, options, compiler versions, ...)."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def cached(path: Path, build: Callable[[], bytes]) -> Path:
    """path, built once: written whole under a temporary name and renamed, so that concurrent processes never
    load half a file."""
    if not path.is_file():
        data = build()
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path
