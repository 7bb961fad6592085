"""Read a `.safetensors` file into NumPy arrays without the `safetensors` package.

The format is an 8-byte little-endian header length, a JSON header mapping each tensor
name to its dtype, shape and byte range, then the raw little-endian data. Reading it by
hand keeps the tests' real embedding model free of any dependency beyond numpy; the
file is memory-mapped so the 90 MB of weights are paged in, not copied.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}


def read_safetensors(path: str | Path) -> dict[str, Any]:
    """Return every tensor in `path` as a read-only NumPy array (views on one memmap)."""
    import numpy as np

    path = Path(path)
    with path.open("rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    tensors: dict[str, Any] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        array = np.frombuffer(data, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize,
                              offset=start)
        tensors[name] = array.reshape(info["shape"])
    return tensors
