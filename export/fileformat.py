"""The export file: the safetensors layout, written and read here without the
safetensors package and without pickle (so loading runs no code).

    8 bytes        N, little-endian unsigned 64-bit: the header's length
    N bytes        a JSON object (UTF-8, padded with spaces to a multiple of 8):
                     "__metadata__": {"format": "tfcert.torch/1",
                                      "dtype": "float64" | "float32" | "float16" | "bfloat16",
                                      "d": "<int>", "attention": "hardmax" | "softmax",
                                      "blocks": "<int>", "temperature": "<exact rational>" (softmax),
                                      "model_sha256": "<hex>" (when exported from a file),
                                      "rounding": "nearest-even from the exact rationals"}
                     "<name>": {"dtype": "F64" | "F32" | "F16" | "BF16", "shape": [...],
                                "data_offsets": [begin, end]}, …
    the data       every tensor's values, row-major, little-endian, back to back in header order

Tensor names are the module's state_dict keys: ``temperature`` (softmax, shape []), and for every
block k ``blocks.k.ff.{eta [], U [w, d], b [w], W [d, w]}`` and
``blocks.k.sa.{rho [], A_scale [], A_u [r, d], A_v [r, d], V_scale [], V_u [r', d], V_v [r', d]}``
(row i of A_u / A_v is the pair (u_i, v_i) of A = scale·I + Σ u vᵀ). The bytes depend only on the model
and the dtype. ``safetensors.torch.load_file`` reads the same file.
"""
from __future__ import annotations

import json
import struct

import numpy as np

from tfcert.errors import InputError

FORMAT = "tfcert.torch/1"
CODES = {"float64": ("F64", "<f8"), "float32": ("F32", "<f4"), "float16": ("F16", "<f2"), "bfloat16": ("BF16", "<u2")}
MAX_HEADER = 1 << 30


def _bfloat16_bits(array: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns of numbers that are bfloat16 numbers: the top half of their binary32 bits."""
    flat = np.asarray(array, dtype=np.float32).reshape(-1)  # 1-d: numpy shifts a 0-d array into a scalar
    return (flat.view(np.uint32) >> 16).astype(np.uint16).reshape(np.shape(array))


def _bfloat16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32).reshape(-1) << 16).view(np.float32).reshape(bits.shape)


def pack(meta: dict[str, str], tensors: list[tuple[str, np.ndarray]], dtype: str) -> bytes:
    """The file's bytes; ``tensors`` hold numbers of ``dtype`` (in any wider numpy dtype: converted exactly)."""
    code, np_dtype = CODES[dtype]
    header: dict = {"__metadata__": meta}
    chunks, offset = [], 0
    for name, array in tensors:
        if dtype == "bfloat16":
            array = _bfloat16_bits(array)
        data = np.ascontiguousarray(array, dtype=np_dtype).tobytes()
        header[name] = {"dtype": code, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def unpack(raw: bytes, name: str) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """The metadata and the tensors of a file's bytes: numpy arrays of float64, float32, float16, or (for
    bfloat16, which numpy lacks) float32 holding the bfloat16 values."""
    if len(raw) < 8:
        raise InputError(f"{name}: not a tfcert export (too short)")
    (size,) = struct.unpack("<Q", raw[:8])
    if size > min(len(raw) - 8, MAX_HEADER):
        raise InputError(f"{name}: not a tfcert export (header length {size} exceeds the file)")
    try:
        header = json.loads(raw[8:8 + size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise InputError(f"{name}: not a tfcert export (the header is not JSON)") from None
    if not isinstance(header, dict) or not isinstance(header.get("__metadata__"), dict):
        raise InputError(f"{name}: not a tfcert export (no __metadata__)")
    meta = header.pop("__metadata__")
    if meta.get("format") != FORMAT:
        raise InputError(f"{name}: __metadata__.format: expected {FORMAT!r}, got {meta.get('format')!r}")
    if meta.get("dtype") not in CODES:
        raise InputError(f"{name}: __metadata__.dtype: expected one of {', '.join(CODES)}, got {meta.get('dtype')!r}")
    code, np_dtype = CODES[meta["dtype"]]
    data = memoryview(raw)[8 + size:]
    tensors = {}
    for key, info in header.items():
        where = f"{name}: {key}"
        if not isinstance(info, dict) or info.get("dtype") != code:
            raise InputError(f"{where}: expected dtype {code}")
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if (not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape)
                or not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) for o in offsets)):
            raise InputError(f"{where}: malformed shape or data_offsets")
        begin, end = offsets
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end <= len(data) or end - begin != count * np.dtype(np_dtype).itemsize:
            raise InputError(f"{where}: data_offsets {offsets} do not fit shape {shape} in the file")
        array = np.frombuffer(data[begin:end], dtype=np_dtype).reshape(shape).astype(np_dtype[1:])
        tensors[key] = _bfloat16_values(array) if meta["dtype"] == "bfloat16" else array
    return meta, tensors
