"""Export a tfcert model to PyTorch (saved without pickle, loaded in a notebook) or to ONNX
(``tfcert.export.onnxgraph``), and measure how far a float run lands from the exact output (docs/export.md).

    import tfcert.export as tx
    module = tx.load("model.pt")                      # a torch.nn.Module, eval mode, on the CPU
    outputs = module([[[0, 1], [2, 3]], ...])         # a list of sequences -> a list of (n, d) tensors
    tx.max_deviation(module, "model.json", "dataset.json")   # max-norm distance to the exact replay

Importing this package does not import torch; the functions that need it do (ImportError → the CLI's
one ``error:`` line).
"""
from __future__ import annotations

import math
import os
import tempfile
from fractions import Fraction
from pathlib import Path

from tfcert.errors import InputError
from tfcert.export.rounding import DTYPES, as_fraction, round_to

NEED_TORCH = "export needs PyTorch: pip install torch==2.13.0 (the CPU build; any torch >= 2.1 works)"
ROUNDING = "nearest-even from the exact rationals"

__all__ = ["to_torch", "parameters", "save", "load", "encode", "rounded_array", "max_deviation", "exact_outputs",
           "certified_bound", "round_to", "NEED_TORCH"]


def _torch():
    try:
        import torch
    except ImportError:
        raise InputError(NEED_TORCH) from None
    return torch


def _dtype_name(dtype) -> str:
    if isinstance(dtype, str):
        if dtype in DTYPES:
            return dtype
        raise InputError(f"--dtype: expected float64, float32, float16 or bfloat16, got {dtype!r}")
    from tfcert.export.module import dtype_name
    return dtype_name(dtype)


def _read_model(model):
    if isinstance(model, (str, Path)):
        from tfcert.verify.formats import load_document, read_model
        doc = load_document(model)
        return read_model(doc), doc.sha256
    return model, None


def _rounded(values, dtype: str, where: str) -> list[float]:
    out = []
    for i, x in enumerate(values):
        try:
            out.append(round_to(x, dtype))
        except OverflowError:
            raise InputError(f"{where}[{i}]: {x} overflows {dtype}") from None
    return out


def parameters(model, dtype="float64", name: str = "model", sha256: str | None = None):
    """``model``'s parameters, each exact rational rounded once to the nearest number of ``dtype`` (ties to
    even), as float64 numpy arrays (exact: every such number is a float64): ``(blocks, temperature, meta)``
    with ``blocks[k]`` keyed ``ff.eta``, ``ff.U``, … (the module's state_dict names without ``blocks.k.``),
    ``temperature`` a 0-d array (softmax) or None, and ``meta`` the export file's ``__metadata__``. The torch
    and ONNX exports both start here; a parameter that overflows is an InputError naming it."""
    import numpy as np

    if isinstance(model, (str, Path)):
        name = str(model)
    model, file_sha = _read_model(model)
    sha256 = sha256 or file_sha
    dt = _dtype_name(dtype)
    d = model.d

    def tensor(values, shape, where):
        return np.array(_rounded(values, dt, f"{name}: {where}"), dtype=np.float64).reshape(shape)

    def matrix(rows, cols, where):
        return tensor([x for r in rows for x in r], (len(rows), cols), where)

    blocks = []
    for k, block in enumerate(model.blocks):
        ff, sa = block.ff, block.sa
        w = f"$.blocks[{k}]"
        t = {"ff.eta": tensor([ff.eta], (), f"{w}.ff.eta"),
             "ff.U": matrix(ff.U, d, f"{w}.ff.U"),
             "ff.b": tensor(ff.b, (len(ff.b),), f"{w}.ff.b"),
             "ff.W": matrix(ff.W, len(ff.U), f"{w}.ff.W"),
             "sa.rho": tensor([sa.rho], (), f"{w}.sa.rho")}
        for key, m in (("A", sa.A), ("V", sa.V)):
            t[f"sa.{key}_scale"] = tensor([m.scale], (), f"{w}.sa.{key}.scale")
            t[f"sa.{key}_u"] = matrix([u for u, _ in m.terms], d, f"{w}.sa.{key}.low_rank[*].u")
            t[f"sa.{key}_v"] = matrix([v for _, v in m.terms], d, f"{w}.sa.{key}.low_rank[*].v")
        blocks.append(t)
    meta = {"format": "tfcert.torch/1", "dtype": dt, "d": str(d), "attention": model.attention,
            "blocks": str(len(model.blocks))}
    temperature = None
    if model.attention == "softmax":
        from tfcert.verify.numbers import fmt
        meta["temperature"] = fmt(model.temperature)
        temperature = tensor([model.temperature], (), "$.temperature")
    if sha256:
        meta["model_sha256"] = sha256
    meta["rounding"] = ROUNDING
    return blocks, temperature, meta


def to_torch(model, dtype="float64", name: str = "model", sha256: str | None = None):
    """A ``torch.nn.Module`` computing ``model`` (a ``tfcert.verify.formats.Model`` or a model.json path)
    in ``dtype`` (float64 / float32, a name or a torch dtype). Every parameter is the exact rational rounded
    once to the nearest number of the dtype (ties to even); one that overflows is an InputError naming it."""
    torch = _torch()
    from tfcert.export.module import TORCH_DTYPES, Transformer

    dt = _dtype_name(dtype)
    blocks, temperature, meta = parameters(model, dt, name, sha256)
    tdt = TORCH_DTYPES[dt]

    def tensor(array):
        return torch.from_numpy(array).to(tdt)  # exact: every value is already a number of the dtype

    blocks = [{key: tensor(a) for key, a in t.items()} for t in blocks]
    temperature = None if temperature is None else tensor(temperature)
    return Transformer(int(meta["d"]), meta["attention"], blocks, temperature, meta).eval()


def encode(sequence, dtype="float64", device=None):
    """One sequence as an (n, d) tensor of ``dtype`` on ``device``. A tensor or a float array is converted
    by torch (float64 → float32 rounds once, to nearest); nested lists of exact numbers (int, Fraction,
    fmpq, number strings such as "7/12") are rounded exactly, like the parameters."""
    torch = _torch()
    import numpy as np

    from tfcert.export.module import TORCH_DTYPES

    tdt = dtype if isinstance(dtype, torch.dtype) else TORCH_DTYPES[_dtype_name(dtype)]
    if isinstance(sequence, torch.Tensor):
        return sequence.to(device=device, dtype=tdt)
    if isinstance(sequence, np.ndarray) and sequence.dtype.kind in "fiu":
        return torch.as_tensor(sequence).to(device=device, dtype=tdt)
    flat = rounded_array(sequence, _dtype_name(tdt))
    return torch.from_numpy(flat).to(device=device, dtype=tdt)


def rounded_array(sequence, dtype: str):
    """One sequence of exact numbers as an (n, d) float64 numpy array whose entries are the numbers rounded
    once to ``dtype`` (so converting it to ``dtype`` is exact)."""
    import numpy as np

    rows = [[round_to(x, dtype) for x in token] for token in sequence]
    width = len(rows[0]) if rows else 0
    return np.array(rows, dtype=np.float64).reshape(len(rows), width)


# ---------------------------------------------------------------- files

def _module_bytes(module) -> bytes:
    torch = _torch()
    from tfcert.export.fileformat import pack

    from tfcert.export.module import dtype_name

    dt = dtype_name(module.dtype)  # the tensors' dtype, even after module.to(torch.float32)
    meta = dict(module.meta, dtype=dt)
    if module.meta.get("dtype") != dt:  # converted by torch after export: no longer rounded once
        meta["rounding"] = f"{module.meta.get('dtype')} converted to {dt} by torch"
    tensors = [(key, t.detach().cpu().to(torch.float64).numpy()) for key, t in module.state_dict().items()]
    return pack(meta, tensors, dt)


def save(module_or_model, path, dtype=None) -> None:
    """Write an exported module — or a Model / model.json path, exported first in ``dtype`` (default
    float64) — to ``path`` (docs/export.md: the safetensors layout, no pickle), atomically."""
    module = module_or_model
    if not hasattr(module, "state_dict"):
        module = to_torch(module_or_model, dtype or "float64")
    elif dtype is not None and _dtype_name(dtype) != module.meta["dtype"]:
        raise InputError(f"{path}: the module is {module.meta['dtype']}; export the model again for {dtype}")
    write_atomic(path, _module_bytes(module))


def write_atomic(path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``."""
    target = Path(path)
    if target.is_dir():
        raise InputError(f"{path}: is a directory")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None


def load(path, device=None):
    """The module saved at ``path`` (in eval mode, on ``device``, default the CPU)."""
    torch = _torch()
    from tfcert.export.fileformat import unpack
    from tfcert.export.module import FF_NAMES, SA_NAMES, TORCH_DTYPES, Transformer

    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    meta, arrays = unpack(raw, str(path))
    try:
        d, count = int(meta["d"]), int(meta["blocks"])
        attention = meta["attention"]
    except (KeyError, ValueError):
        raise InputError(f"{path}: __metadata__ needs integer d and blocks, and attention") from None
    if attention not in ("hardmax", "softmax") or d < 1 or count < 0:
        raise InputError(f"{path}: __metadata__: bad attention, d or blocks")
    tdt = TORCH_DTYPES[meta["dtype"]]

    def take(key, shape_check):
        if key not in arrays:
            raise InputError(f"{path}: missing tensor {key}")
        a = arrays.pop(key)
        if not shape_check(a.shape):
            raise InputError(f"{path}: {key}: unexpected shape {list(a.shape)}")
        return torch.from_numpy(a).to(tdt)

    scalar = lambda s: s == ()  # noqa: E731
    rows_d = lambda s: len(s) == 2 and s[1] == d  # noqa: E731
    blocks = []
    for k in range(count):
        p = f"blocks.{k}."
        t = {f"ff.{n}": take(p + f"ff.{n}", check) for n, check in
             zip(FF_NAMES, (scalar, rows_d, lambda s: len(s) == 1, lambda s: len(s) == 2 and s[0] == d))}
        if t["ff.b"].shape[0] != t["ff.U"].shape[0] or t["ff.W"].shape[1] != t["ff.U"].shape[0]:
            raise InputError(f"{path}: {p}ff: U, b and W disagree on the width")
        for n in SA_NAMES:
            t[f"sa.{n}"] = take(p + f"sa.{n}", scalar if n in ("rho", "A_scale", "V_scale") else rows_d)
        for m in ("A", "V"):
            if t[f"sa.{m}_u"].shape != t[f"sa.{m}_v"].shape:
                raise InputError(f"{path}: {p}sa.{m}: u and v disagree on the rank")
        blocks.append(t)
    temperature = take("temperature", scalar) if attention == "softmax" else None
    if arrays:
        raise InputError(f"{path}: unexpected tensor {sorted(arrays)[0]}")
    module = Transformer(d, attention, blocks, temperature, meta).eval()
    return module.to(device) if device is not None else module


# ---------------------------------------------------------------- deviation

def _dataset(dataset):
    if isinstance(dataset, (str, Path)):
        from tfcert.verify.formats import load_document, read_dataset
        dataset = read_dataset(load_document(dataset))
    if hasattr(dataset, "pairs"):
        return [p.input for p in dataset.pairs]
    return [tuple(tuple(as_fraction(x) for x in t) for t in seq) for seq in dataset]


def exact_outputs(model, sequences) -> list:
    """The exact replay's final tokens (verify/evaluate.py), flat: points, or softmax enclosures."""
    from flint import fmpq

    from tfcert.verify.evaluate import Replay

    model, _ = _read_model(model)
    seqs = [tuple(tuple(x if isinstance(x, fmpq) else fmpq(x.numerator, x.denominator) for x in t)
                  for t in s) for s in sequences]
    replay = Replay(model, seqs)
    for _ in replay.steps():
        pass
    return list(replay.tokens)


def max_deviation(module, model, dataset, exact: bool = False):
    """max over every output token of every input sequence of ‖module(x) − exact(x)‖_∞.

    ``model``: the Model (or model.json path) the module was exported from; ``dataset``: a Dataset, a
    dataset.json path, or a list of sequences of exact numbers. ``module`` is a torch module or an
    onnxruntime ``InferenceSession`` of an ONNX export (run one sequence at a time). Inputs are rounded to
    the module's dtype exactly. The exact output is the verifier's replay; where it is a softmax enclosure rather than a point,
    the distance to the farthest point of the enclosure is taken (an upper bound). The result is computed
    in exact rationals and rounded *up* to a float (``exact=True``: the Fraction itself), so
    ``max_deviation(...) <= bound`` implies the exact deviation is within ``bound``; inf when an output is
    not finite."""
    from flint import fmpq

    from tfcert.verify.enclose import coordinate_range, is_point

    sequences = _dataset(dataset)
    finals = exact_outputs(model, sequences)
    if hasattr(module, "get_inputs"):  # an onnxruntime InferenceSession
        from tfcert.export.onnxgraph import run_session
        flat = [row for s in sequences for row in run_session(module, s)]
    else:
        torch = _torch()
        with torch.no_grad():
            outputs = module([encode(s, module.dtype, module.device) for s in sequences])
        flat = [row for out in outputs for row in out.detach().cpu().to(torch.float64).tolist()]
    assert len(flat) == len(finals)
    worst = fmpq(0)
    for got, want in zip(flat, finals):
        for i, f in enumerate(got):
            if not math.isfinite(f):
                return math.inf
            g = fmpq(*f.as_integer_ratio())
            if is_point(want):
                dev = abs(g - want[i])
            else:
                lo, hi = coordinate_range(want, i)
                dev = max(abs(g - lo), abs(g - hi))
            if dev > worst:
                worst = dev
    result = Fraction(int(worst.p), int(worst.q))
    if exact:
        return result
    try:
        up = float(result)
    except OverflowError:
        return math.inf
    return up if Fraction(up) >= result else math.nextafter(up, math.inf)


def certified_bound(certificate, dtype="float64") -> Fraction | None:
    """The bound of the certificate's ``float`` claim for ``dtype`` (float64 ↔ binary64, float32 ↔
    binary32), or None when it carries none. ``certificate``: a path, bytes, or the parsed JSON. This only
    *reads* the claim: ``tfcert verify`` is what proves it."""
    import json

    if isinstance(certificate, (str, Path)):
        certificate = Path(certificate).read_bytes()
    if isinstance(certificate, bytes):
        certificate = json.loads(certificate)
    fmt = DTYPES[_dtype_name(dtype)]
    bounds = [as_fraction(claim["bound"]) for phase in certificate.get("phases", [])
              for claim in phase.get("claims", [])
              if claim.get("kind") == "float" and claim.get("format") == fmt and "bound" in claim]
    return min(bounds) if bounds else None
