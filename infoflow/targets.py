"""Targets as comparison trees: a root that sums the values of independent comparisons.

Each comparison reduces a score over every tuple of ``order`` distinct tokens, keeping the
``rank``-th best (rank 1 = the extreme, min or max). β' (order) is the largest tuple size,
β1 (dimension) the number of comparisons tracked in parallel, and the comparison number the
count of tuples compared.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from math import comb
from pathlib import Path

from tfcert.errors import InputError

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Comparison:
    """``reduce`` over all ``order``-tuples of distinct tokens of a score; ``key_dim`` is the
    dimension n of the compared keys (Theorem 2)."""

    name: str
    order: int
    rank: int = 1
    key_dim: int = 1
    reduce: str = "min"

    def to_json(self) -> dict:
        return {"name": self.name, "order": self.order, "rank": self.rank,
                "key_dim": self.key_dim, "reduce": self.reduce}


@dataclass(frozen=True)
class Target:
    name: str
    comparisons: tuple[Comparison, ...]

    @property
    def order(self) -> int:
        """β': the most tokens compared at once."""
        return max(c.order for c in self.comparisons)

    @property
    def dimension(self) -> int:
        """β1: independent comparisons the readout must combine."""
        return len(self.comparisons)

    def comparison_number(self, T: int) -> int:
        """How many token tuples the target compares at sequence length T."""
        return sum(comb(T, c.order) for c in self.comparisons)

    def check_fits(self, T: int) -> None:
        """A comparison over r distinct tokens, or keeping the k-th best, needs enough tokens."""
        for c in self.comparisons:
            if c.order > T:
                raise InputError(f"--T: T={T} is smaller than the order {c.order} of "
                                 f"comparison {c.name!r} of target {self.name!r}")
            if c.rank > comb(T, c.order):
                raise InputError(f"--T: comparison {c.name!r} keeps rank {c.rank} but only "
                                 f"{comb(T, c.order)} tuples exist at T={T}")

    def to_json(self) -> dict:
        return {"name": self.name, "combine": "sum",
                "comparisons": [c.to_json() for c in self.comparisons]}


BUILTINS = ("pairwise-min", "kth-largest:k=K[,n=N]", "intrinsic-dim:D=D", "triangle-center")


def _params(spec: str, allowed: tuple[str, ...], required: tuple[str, ...]) -> dict[str, int]:
    """Parse ``name:key=int,key=int``; every error names --target and the bad piece."""
    head, _, rest = spec.partition(":")
    values: dict[str, int] = {}
    for piece in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, raw = piece.partition("=")
        if not eq or key not in allowed:
            raise InputError(f"--target: {spec}: expected {', '.join(k + '=INT' for k in allowed)}"
                             f", got {piece!r}")
        try:
            values[key] = int(raw)
        except ValueError:
            raise InputError(f"--target: {spec}: {key} must be an integer, got {raw!r}") from None
        if values[key] < 1:
            raise InputError(f"--target: {spec}: {key} must be >= 1, got {values[key]}")
    for key in required:
        if key not in values:
            raise InputError(f"--target: {spec}: missing {key}=INT")
    return values


def builtin_target(spec: str) -> Target:
    """The seed's targets: Theorem 1, Theorem 2, the intrinsic-dimension family, order 3."""
    name = spec.partition(":")[0]
    if name == "pairwise-min" and spec == name:
        return Target(spec, (Comparison("pmin", 2),))
    if name == "triangle-center" and spec == name:
        return Target(spec, (Comparison("tri", 3),))
    if name == "kth-largest":
        p = _params(spec, ("k", "n"), ("k",))
        return Target(spec, (Comparison("kth", 1, p["k"], p.get("n", 1), "max"),))
    if name == "intrinsic-dim":
        p = _params(spec, ("D",), ("D",))
        return Target(spec, tuple(Comparison(f"m{i}", 2) for i in range(1, p["D"] + 1)))
    raise InputError(f"--target: unknown target {spec!r} (built-in: {', '.join(BUILTINS)}; "
                     "or a path to a comparison-tree .json file)")


def _int_field(file: str, path: str, obj: dict, key: str, default: int | None) -> int:
    value = obj.get(key, default)
    if value is None:
        raise InputError(f"{file}: {path}: missing required key {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{file}: {path}.{key}: expected an integer >= 1, got {value!r}")
    return value


def _comparison(file: str, path: str, obj: object) -> Comparison:
    if not isinstance(obj, dict):
        raise InputError(f"{file}: {path}: expected an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - {"name", "order", "rank", "key_dim", "reduce"})
    if unknown:
        raise InputError(f"{file}: {path}: unknown key {unknown[0]!r}")
    name = obj.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(f"{file}: {path}.name: expected an identifier, got {name!r}")
    reduce = obj.get("reduce", "min")
    if reduce not in ("min", "max"):
        raise InputError(f"{file}: {path}.reduce: expected \"min\" or \"max\", got {reduce!r}")
    return Comparison(name, _int_field(file, path, obj, "order", None),
                      _int_field(file, path, obj, "rank", 1),
                      _int_field(file, path, obj, "key_dim", 1), reduce)


def target_from_json(file: str, data: object) -> Target:
    """Validate a comparison tree; errors name the file and the JSON path."""
    if not isinstance(data, dict):
        raise InputError(f"{file}: $: expected an object, got {type(data).__name__}")
    unknown = sorted(set(data) - {"name", "combine", "comparisons"})
    if unknown:
        raise InputError(f"{file}: $: unknown key {unknown[0]!r}")
    name = data.get("name", Path(file).stem)
    if not isinstance(name, str) or not name:
        raise InputError(f"{file}: $.name: expected a non-empty string, got {name!r}")
    if data.get("combine", "sum") != "sum":
        raise InputError(f"{file}: $.combine: only \"sum\" is supported, got {data['combine']!r}")
    items = data.get("comparisons")
    if not isinstance(items, list) or not items:
        raise InputError(f"{file}: $.comparisons: expected a non-empty list, got {items!r}")
    comparisons = tuple(_comparison(file, f"$.comparisons[{i}]", o) for i, o in enumerate(items))
    seen: set[str] = set()
    for i, c in enumerate(comparisons):
        if c.name in seen:
            raise InputError(f"{file}: $.comparisons[{i}].name: duplicate name {c.name!r}")
        seen.add(c.name)
    return Target(name, comparisons)


def load_tree(path: str | Path) -> Target:
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{file}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{file}: $: invalid JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}") from None
    return target_from_json(file, data)


def parse_target(spec: str) -> Target:
    """A built-in name, or a path to a comparison-tree JSON file (``*.json``)."""
    return load_tree(spec) if spec.endswith(".json") else builtin_target(spec)
