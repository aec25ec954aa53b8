"""The versioned file formats of docs/certificates.md: readers that validate every
field (errors name the file and the JSON path) and canonical writers.

Readers live in the checker because a parsing slip is a soundness bug: what
the verifier reads is what it proves things about.
"""
from __future__ import annotations

import hashlib
import json
from json.decoder import WHITESPACE, JSONArray, JSONObject
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from flint import fmpq

from tfcert.verify.errors import InputError
from tfcert.verify.numbers import (LIMITS, MAX_DIGITS, FloatLiteral, NonFinite, Vec, fmt, key, parse_number,
                                   parse_vector, show)

DATASET_FORMAT = "tfcert.dataset/1"
MODEL_FORMAT = "tfcert.model/1"
CERTIFICATE_FORMAT = "tfcert.certificate/1"
MAX_DIMENSION = 100_000


# ---------------------------------------------------------------- data

@dataclass(frozen=True)
class Pair:
    index: int  # position in the file's "pairs" list: how reports name a sequence
    input: tuple[Vec, ...]
    output: tuple[Vec, ...]


@dataclass(frozen=True)
class Dataset:
    d: int
    pairs: tuple[Pair, ...]
    warnings: tuple[str, ...] = ()

    @property
    def total_outputs(self) -> int:
        """Σ m_j, the quantity the theorems' bounds are stated in."""
        return sum(len(p.output) for p in self.pairs)


@dataclass(frozen=True)
class LowRank:
    """scale·I + Σ u vᵀ, the form in which attention matrices are stored."""
    scale: fmpq
    terms: tuple[tuple[Vec, Vec], ...] = ()


@dataclass(frozen=True)
class FF:
    """x ↦ η x + W σ(U x + b); ``U`` rows, ``W`` rows (W is d × d')."""
    eta: fmpq
    U: tuple[Vec, ...]
    b: Vec
    W: tuple[Vec, ...]

    @property
    def width(self) -> int:
        return len(self.U)

    @cached_property
    def sparse(self) -> tuple[tuple, tuple]:
        """U's and W's rows as their non-zero (index, entry) pairs: a zero
        entry adds an exact 0, so the replay skips it."""
        return tuple(nonzero(r) for r in self.U), tuple(nonzero(r) for r in self.W)


def nonzero(row: Vec) -> tuple[tuple[int, fmpq], ...]:
    """A row's non-zero entries as (index, entry) pairs, for layers.sparse_dot: a zero entry adds an exact 0."""
    return tuple((j, v) for j, v in enumerate(row) if v)


@dataclass(frozen=True)
class SA:
    """x_i ↦ ρ x_i + V Σ_l π_il x_l with scores ⟨A x_i, x_l⟩."""
    rho: fmpq
    A: LowRank
    V: LowRank


@dataclass(frozen=True)
class Block:
    ff: FF
    sa: SA


@dataclass(frozen=True)
class Model:
    d: int
    attention: str  # "hardmax" | "softmax"
    blocks: tuple[Block, ...]
    temperature: fmpq | None = None


@dataclass(frozen=True)
class Document:
    """A file as read: its exact bytes (for sha256) and its JSON value."""
    path: str
    raw: bytes
    value: object = field(repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()


# ---------------------------------------------------------------- JSON

class _HugeInt(str):
    """A bare JSON integer too long to be a number (Python's int() refuses
    more than 4300 digits and json.loads would raise ValueError without a
    path): kept as text, so parse_number rejects it with its JSON path."""


def _parse_int(text: str) -> int | str:
    return int(text) if len(text) <= MAX_DIGITS else _HugeInt(text)


class _Object(dict):
    """A JSON object that remembers a key it saw twice (readers disagree on
    which value wins, so such a file is refused)."""
    duplicate: str | None = None


def _object(pairs: list[tuple[str, object]]) -> _Object:
    out = _Object()
    for name, value in pairs:
        if name in out and out.duplicate is None:
            out.duplicate = name
        out[name] = value
    return out


def _duplicate_path(value: object) -> str | None:
    """JSON path of the first object with a repeated key (iterative: any depth).
    Walked only when parsing saw one: most files have none."""
    stack = [(value, "$")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Object) and item.duplicate is not None:
            return f"{path}: duplicate key {show(repr(item.duplicate))}"
        children = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        stack.extend(reversed([(v, f"{path}[{k}]" if isinstance(k, int) else f"{path}.{k}" if k.isidentifier()
                                else f"{path}[{show(json.dumps(k))}]") for k, v in children]))  # $.pairs[0], $["a b"]
    return None


def load_document(path: str | Path) -> Document:
    """Read a JSON file exactly (floats keep their source text), at most
    ``LIMITS.file_bytes`` bytes."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(LIMITS.file_bytes + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > LIMITS.file_bytes:
        raise InputError(f"{path}: larger than the limit file_bytes={LIMITS.file_bytes}")
    return parse_document(str(path), raw)


def parse_document(name: str, raw: bytes) -> Document:
    """Parse bytes that are (or will be) the file ``name``."""
    repeated: list[_Object] = []  # objects with a key seen twice

    def hook(pairs: list[tuple[str, object]]) -> _Object:
        out = _object(pairs)
        if out.duplicate is not None:
            repeated.append(out)
        return out
    options = dict(parse_float=FloatLiteral, parse_constant=NonFinite, parse_int=_parse_int, object_pairs_hook=hook)
    try:
        value = _loads(raw.decode("utf-8"), options)
    except UnicodeDecodeError:
        raise InputError(f"{name}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: malformed JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg.removesuffix(' at')}") from None  # json's "Invalid control character at"
    except RecursionError:
        raise InputError(f"{name}: JSON nested too deeply") from None
    if repeated:
        raise InputError(f"{name}: {_duplicate_path(value)}")
    return Document(name, raw, value)


def _loads(text: str, options: dict):
    """json.loads(text, **options), but a top-level object's arrays read one
    element at a time, an element written exactly as the object or array
    before it taken as that same value: its brackets end it where its text
    does (not so a number: 12 starts 123). A model's equal blocks are then
    one value (and one Block: read_model), not one copy each."""
    start = WHITESPACE.match(text).end()
    if not text.startswith("{", start):
        return json.loads(text, **options)
    scan, last = json.JSONDecoder(**options).scan_once, ["", None]  # the last element's text and value

    def element(s: str, i: int):
        if last[0] and s.startswith(last[0], i):
            return last[1], i + len(last[0])
        value, end = scan(s, i)
        last[:] = (s[i:end] if isinstance(value, (dict, list)) else ""), value
        return value, end

    def member(s: str, i: int):
        last[:] = "", None
        return JSONArray((s, i + 1), element) if s.startswith("[", i) else scan(s, i)
    value, end = JSONObject((text, start + 1), True, member, None, options["object_pairs_hook"])
    if WHITESPACE.match(text, end).end() != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def number(value: object, where: str, digits: int | None = None) -> fmpq:
    """A number of a model or certificate (``digits``: LIMITS.digits) or a dataset (MAX_DIGITS)."""
    return parse_number(value, where, LIMITS.digits if digits is None else digits)


def vector(value: object, d: int, where: str, digits: int | None = None) -> Vec:
    return parse_vector(value, d, where, LIMITS.digits if digits is None else digits)


def obj(value: object, where: str, keys: tuple[str, ...]) -> dict:
    """A JSON object that must carry ``keys``."""
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected an object")
    for name in keys:
        if name not in value:
            raise InputError(f"{where}: missing field {name!r}")
    return value


def fields(value: object, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """A JSON object with every ``required`` key and no key outside
    ``required + optional``: a field the checker does not read is refused,
    never silently ignored."""
    item = obj(value, where, required)
    for name in item:
        if name not in required and name not in optional:
            raise InputError(f"{where}: unknown field {show(repr(name))} (expected {', '.join(required + optional)})")
    return item


def array(value: object, where: str) -> list:
    if not isinstance(value, list):
        raise InputError(f"{where}: expected a list")
    return value


def integer(value: object, where: str, low: int, high: int) -> int:
    if isinstance(value, _HugeInt):
        raise InputError(f"{where}: number too large ({len(value)} characters)")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: expected an integer")
    if not low <= value <= high:
        raise InputError(f"{where}: {value} is out of range [{low}, {high}]")
    return value


def check_format(top: dict, expected: str, name: str) -> None:
    if top.get("format") != expected:
        raise InputError(f"{name}: $.format: expected {expected!r}, got {show(repr(top.get('format')))}")


# ---------------------------------------------------------------- dataset

def read_dataset(doc: Document) -> Dataset:
    """Parse a dataset and check the dataset's assumptions (docs/certificates.md)."""
    name = doc.path
    top = fields(doc.value, f"{name}: $", ("format", "d", "pairs"))
    check_format(top, DATASET_FORMAT, name)
    d = integer(top["d"], f"{name}: $.d", 2, MAX_DIMENSION)
    raw_pairs = array(top["pairs"], f"{name}: $.pairs")
    if not raw_pairs:
        raise InputError(f"{name}: $.pairs: the dataset has no pairs")
    tokens = sum(len(p["input"]) for p in raw_pairs if isinstance(p, dict) and isinstance(p.get("input"), list))
    if tokens > LIMITS.tokens:
        raise InputError(f"{name}: $.pairs: {tokens} input tokens, over the limit tokens={LIMITS.tokens}")
    pairs = []
    for j, raw in enumerate(raw_pairs):
        where = f"{name}: $.pairs[{j}]"
        item = fields(raw, where, ("input", "output"))
        seqs, sets = [], []
        for side in ("input", "output"):
            tokens = array(item[side], f"{where}.{side}")
            if not tokens:
                raise InputError(f"{where}.{side}: empty sequence")
            seq = tuple(vector(t, d, f"{where}.{side}[{i}]", MAX_DIGITS) for i, t in enumerate(tokens))
            seen: dict[tuple, int] = {}
            for i, token_key in enumerate(map(key, seq)):
                if token_key in seen:
                    raise InputError(
                        f"{where}.{side}[{i}]: token repeats {side}[{seen[token_key]}]; "
                        f"tokens within a sequence must be pairwise distinct")
                seen[token_key] = i
            seqs.append(seq)
            sets.append(frozenset(seen))
        if len(seqs[1]) > len(seqs[0]):
            raise InputError(f"{where}.output: {len(seqs[1])} output tokens exceed the "
                             f"{len(seqs[0])} input tokens (m_j ≤ n_j is required)")
        pairs.append((Pair(j, seqs[0], seqs[1]), *sets))
    return _drop_duplicates(name, d, pairs)


def _drop_duplicates(name: str, d: int, pairs: list[tuple[Pair, frozenset, frozenset]]) -> Dataset:
    """Equal input sets must have equal output sets (a permutation-equivariant map cannot
    tell them apart); exact duplicates are dropped with a warning. ``pairs``: each pair with
    its input and output sets of token keys."""
    first: dict[frozenset, tuple[Pair, frozenset]] = {}
    kept, warnings = [], []
    for pair, inputs, outputs in pairs:
        if inputs not in first:
            first[inputs] = pair, outputs
            kept.append(pair)
            continue
        other, other_outputs = first[inputs]
        if other_outputs != outputs:
            raise InputError(
                f"{name}: $.pairs[{pair.index}]: same input set as $.pairs[{other.index}] but a "
                f"different output set; no permutation-equivariant map (no transformer) can "
                f"interpolate both")
        warnings.append(f"{name}: $.pairs[{pair.index}] duplicates $.pairs[{other.index}]; dropped")
    return Dataset(d, tuple(kept), tuple(warnings))


def _low_rank(value: object, d: int, where: str) -> LowRank:
    item = fields(value, where, ("scale", "low_rank"))
    terms = []
    for k, term in enumerate(array(item["low_rank"], f"{where}.low_rank")):
        t = fields(term, f"{where}.low_rank[{k}]", ("u", "v"))
        terms.append((vector(t["u"], d, f"{where}.low_rank[{k}].u"),
                      vector(t["v"], d, f"{where}.low_rank[{k}].v")))
    return LowRank(number(item["scale"], f"{where}.scale"), tuple(terms))


def _ff(value: object, d: int, where: str) -> FF:
    item = fields(value, where, ("eta", "U", "b", "W"))
    U = tuple(vector(row, d, f"{where}.U[{i}]") for i, row in enumerate(array(item["U"], f"{where}.U")))
    width = len(U)
    b = vector(item["b"], width, f"{where}.b")
    W_rows = array(item["W"], f"{where}.W")
    if len(W_rows) != d:
        raise InputError(f"{where}.W: expected {d} rows (W is d × d'), got {len(W_rows)}")
    W = tuple(vector(row, width, f"{where}.W[{i}]") for i, row in enumerate(W_rows))
    return FF(number(item["eta"], f"{where}.eta"), U, b, W)


def _sa(value: object, d: int, where: str) -> SA:
    item = fields(value, where, ("rho", "A", "V"))
    return SA(number(item["rho"], f"{where}.rho"), _low_rank(item["A"], d, f"{where}.A"),
              _low_rank(item["V"], d, f"{where}.V"))


def read_model(doc: Document) -> Model:
    name = doc.path
    top = obj(doc.value, f"{name}: $", ("format", "d", "attention", "blocks"))
    check_format(top, MODEL_FORMAT, name)
    d = integer(top["d"], f"{name}: $.d", 1, MAX_DIMENSION)
    attention = top["attention"]
    if attention not in ("hardmax", "softmax"):
        raise InputError(f"{name}: $.attention: expected 'hardmax' or 'softmax', got {show(repr(attention))}")
    fields(top, f"{name}: $", ("format", "d", "attention", "blocks"), ("temperature",) if attention == "softmax" else ())
    temperature = None
    if attention == "softmax":
        if "temperature" not in top:
            raise InputError(f"{name}: $: a softmax model must carry 'temperature'")
        temperature = number(top["temperature"], f"{name}: $.temperature")
        if temperature <= 0:
            raise InputError(f"{name}: $.temperature: must be > 0")
    blocks: list[Block] = []
    raw_blocks = array(top["blocks"], f"{name}: $.blocks")
    for k, raw in enumerate(raw_blocks):
        if k and raw is raw_blocks[k - 1]:  # the same text as the block before (parse_document): the same block
            blocks.append(blocks[-1])
            continue
        where = f"{name}: $.blocks[{k}]"
        item = fields(raw, where, ("ff", "sa"))
        blocks.append(Block(_ff(item["ff"], d, f"{where}.ff"), _sa(item["sa"], d, f"{where}.sa")))
    return Model(d, attention, tuple(blocks), temperature)


def model_json(model: Model) -> dict:
    def vec(v: Vec) -> list[str]:
        return [fmt(x) for x in v]

    def low_rank(m: LowRank) -> dict:
        return {"scale": fmt(m.scale), "low_rank": [{"u": vec(u), "v": vec(v)} for u, v in m.terms]}

    out: dict = {"format": MODEL_FORMAT, "d": model.d, "attention": model.attention}
    if model.temperature is not None:
        out["temperature"] = fmt(model.temperature)
    out["blocks"] = [
        {"ff": {"eta": fmt(b.ff.eta), "U": [vec(r) for r in b.ff.U], "b": vec(b.ff.b),
                "W": [vec(r) for r in b.ff.W]},
         "sa": {"rho": fmt(b.sa.rho), "A": low_rank(b.sa.A), "V": low_rank(b.sa.V)}}
        for b in model.blocks]
    return out
