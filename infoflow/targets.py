"""Targets as comparison trees.

A target is a tree of nodes (docs/infoflow.md, "Targets"):

* ``Score(name, args)``: a leaf, a score of the tokens named by ``args`` (variables bound by the
  reductions above it, or fixed positions ``1..T`` when positional encoding is on);
* ``Reduce(op, over, of, rank, key_dim, name)``: min or max over the tokens (one variable) or the
  unordered tuples of distinct tokens (several) that ``over`` binds, keeping the ``rank``-th best;
* ``Combine(op, of)``: the sum, min or max of its children's values;
* ``Comparison(name, order, rank, key_dim, reduce)``: the flat comparison of the first format,
  ``reduce`` over all ``order``-tuples of distinct tokens of one score.

The first format (a root that combines comparisons) is still read: ``Target(name, comparisons)``.
β' (order) is the most tokens one reduction compares at once, β1 (dimension) the number of
reductions the root combines, the comparison number the count of token tuples compared.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from math import comb, perm
from pathlib import Path

from tfcert.errors import InputError

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
READOUT = "y"  # the fact the readout writes at T+1: no reduction may take its name
MAX_TREE_DEPTH = 64     # nesting of tree nodes a file may use
MAX_TREE_NODES = 20000  # nodes after the comparisons are expanded
MAX_POSITION = 10**9    # a fixed position must be a token index we can print
MAX_ORDER = 32          # tokens one comparison compares (it expands into that many reductions)


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
class Score:
    """A leaf: a score of the tokens at ``args`` (bound variables or fixed positions)."""

    name: str
    args: tuple[str | int, ...]

    def to_json(self) -> dict:
        return {"op": "score", "name": self.name, "args": list(self.args)}


@dataclass(frozen=True)
class Reduce:
    """min/max over the tokens ``over`` binds (distinct from each other and from the free
    variables of the reduction), keeping the ``rank``-th best."""

    op: str
    over: tuple[str, ...]
    of: "Node"
    rank: int = 1
    key_dim: int = 1
    name: str | None = None

    def to_json(self) -> dict:
        out = {"op": self.op, "over": list(self.over) if len(self.over) > 1 else self.over[0]}
        if self.name is not None:
            out["name"] = self.name
        if self.rank != 1:
            out["rank"] = self.rank
        if self.key_dim != 1:
            out["key_dim"] = self.key_dim
        out["of"] = self.of.to_json()
        return out


@dataclass(frozen=True)
class Combine:
    """sum, min or max of the children's values (no token is bound)."""

    op: str
    of: tuple["Node", ...]

    def to_json(self) -> dict:
        return {"op": self.op, "of": [c.to_json() for c in self.of]}


def _comparison_node_json(c: Comparison) -> dict:
    return {"op": "comparison", **c.to_json()}


Node = Score | Reduce | Combine | Comparison


@dataclass(frozen=True)
class Target:
    """A named comparison tree. ``Target(name, comparisons)`` is the first, flat format: the
    root ``combine``s the comparisons; ``tree`` gives any tree instead."""

    name: str
    comparisons: tuple[Comparison, ...] = ()
    combine: str = "sum"
    tree: Node | None = field(default=None)

    def __post_init__(self) -> None:
        if self.tree is None and not self.comparisons:
            raise InputError(f"target {self.name!r}: no comparisons and no tree")

    @property
    def root(self) -> Node:
        """The source tree (the flat format is a Combine over its comparisons)."""
        if self.tree is not None:
            return self.tree
        if len(self.comparisons) == 1:
            return self.comparisons[0]
        return Combine(self.combine, self.comparisons)

    @property
    def flat(self) -> bool:
        return self.tree is None

    @cached_property
    def calc(self):
        """The normalised tree the calculus works on (comparisons expanded, every reduction
        named); see ``tfcert.infoflow.calculus``."""
        from tfcert.infoflow.calculus import normalise
        return normalise(self)

    @property
    def order(self) -> int:
        """β': the most tokens one reduction compares at once."""
        return self.calc.order

    @property
    def dimension(self) -> int:
        """β1: the reductions the root combines (for the flat format, the comparisons)."""
        return self.calc.dimension

    def comparison_number(self, T: int) -> int:
        """How many token tuples the target compares at sequence length T: for each reduction
        of the flattened tree (``flattened``: equivalent trees count alike), the assignments of
        its free variables (ordered distinct tokens) times its candidates."""
        return _count(flattened(self.root), T)

    def min_T(self) -> int:
        """The least T at which every reduction has enough candidates and every fixed position
        exists (the symbolic-T proofs range over T >= min_T)."""
        return self.calc.min_T

    def check_fits(self, T: int) -> None:
        """A reduction over r distinct tokens, or keeping the k-th best, needs enough tokens."""
        _fits(self.root, 0, T, self.name)

    def to_json(self) -> dict:
        if self.flat:
            return {"name": self.name, "combine": self.combine,
                    "comparisons": [c.to_json() for c in self.comparisons]}
        return {"name": self.name, "tree": _source_json(self.tree)}


def _source_json(node: Node) -> dict:
    if isinstance(node, Comparison):
        return _comparison_node_json(node)
    if isinstance(node, Reduce):
        out = node.to_json()
        out["of"] = _source_json(node.of)
        return out
    if isinstance(node, Combine):
        return {"op": node.op, "of": [_source_json(c) for c in node.of]}
    return node.to_json()


def _free(node: Node) -> frozenset[str]:
    if isinstance(node, Comparison):
        return frozenset()
    if isinstance(node, Score):
        return frozenset(a for a in node.args if isinstance(a, str))
    if isinstance(node, Reduce):
        return _free(node.of) - set(node.over)
    return frozenset().union(*(_free(c) for c in node.of))


def flattened(node: Node) -> Node:
    """The tree with nested like reductions merged, for counting: a rank-1 min (max) whose whole
    body is a rank-1 min (max) becomes one reduction over both variable lists (min_t min_s
    f(t, s) compares the same token pairs as min over {t, s}). Combinations compare no tokens
    (their count is their parts'), so a sum of a sum, a min of a min needs no merging."""
    if isinstance(node, Reduce):
        body = flattened(node.of)
        if node.rank == 1 and isinstance(body, Reduce) and body.op == node.op and body.rank == 1:
            return Reduce(node.op, node.over + body.over, body.of, 1, node.key_dim, node.name)
        return Reduce(node.op, node.over, body, node.rank, node.key_dim, node.name)
    if isinstance(node, Combine):
        return Combine(node.op, tuple(map(flattened, node.of)))
    return node


def _count(node: Node, T: int) -> int:
    if isinstance(node, Comparison):
        return comb(T, node.order)
    if isinstance(node, Score):
        return 0
    if isinstance(node, Reduce):
        k = len(_free(node))
        here = perm(T, k) * (T - k if len(node.over) == 1 else comb(max(T - k, 0), len(node.over)))
        return here + _count(node.of, T)
    return sum(_count(c, T) for c in node.of)


def _num(n: int) -> str:
    text = str(n)
    return text if len(text) <= 30 else f"a {len(text)}-digit number"


def _fits(node: Node, _depth: int, T: int, target: str) -> None:
    if isinstance(node, Comparison):
        if node.order > T:
            raise InputError(f"--T: T={T} is smaller than the order {node.order} of "
                             f"comparison {node.name!r} of target {target!r}")
        if node.rank > comb(T, node.order):
            raise InputError(f"--T: comparison {node.name!r} keeps rank {_num(node.rank)} but only "
                             f"{_num(comb(T, node.order))} tuples exist at T={_num(T)}")
        return
    if isinstance(node, Score):
        for a in node.args:
            if isinstance(a, int) and a > T:
                raise InputError(f"--T: T={T} is smaller than the fixed position {a} of score "
                                 f"{node.name!r} of target {target!r}")
        return
    if isinstance(node, Reduce):
        k = len(_free(node))
        r = len(node.over)
        n = (T - k) if r == 1 else comb(max(T - k, 0), r)
        what = node.name or "over " + ",".join(node.over)
        if T - k < r:
            raise InputError(f"--T: T={T} leaves fewer than {r} candidate token(s) for reduction "
                             f"{what!r} of target {target!r}")
        if node.rank > n:
            raise InputError(f"--T: reduction {what!r} keeps rank {_num(node.rank)} but only "
                             f"{_num(n)} candidates exist at T={_num(T)}")
        _fits(node.of, 0, T, target)
        return
    for c in node.of:
        _fits(c, 0, T, target)


BUILTINS = ("pairwise-min", "kth-largest:k=K[,n=N]", "intrinsic-dim:D=D", "triangle-center",
            "alternation:k=K")


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
            raise InputError(f"--target: {spec}: {key} must be an integer, got {_show(raw)}") from None
        if values[key] < 1:
            raise InputError(f"--target: {spec}: {key} must be >= 1, got {values[key]}")
    for key in required:
        if key not in values:
            raise InputError(f"--target: {spec}: missing {key}=INT")
    return values


def alternation(k: int) -> Node:
    """min_{t1} max_{t2} min_{t3} … over a chain: R_k(t_{k-1}) = opt_{t_k} f_k(t_{k-1}, t_k),
    R_i(t_{i-1}) = opt_{t_i} (f_i(t_{i-1}, t_i) + R_{i+1}(t_i)), y = min_{t1} R_2(t1) (k >= 2);
    k = 1 is min_t f_1(t). Each reduction's body depends on its own and its parent's token."""
    ops = ["min" if i % 2 else "max" for i in range(1, k + 1)]
    if k == 1:
        return Reduce("min", ("t1",), Score("f1", ("t1",)), name="a1")
    body: Node = Score(f"f{k}", (f"t{k - 1}", f"t{k}"))
    node: Node = Reduce(ops[k - 1], (f"t{k}",), body, name=f"a{k}")
    for i in range(k - 1, 1, -1):
        body = Combine("sum", (Score(f"f{i}", (f"t{i - 1}", f"t{i}")), node))
        node = Reduce(ops[i - 1], (f"t{i}",), body, name=f"a{i}")
    return Reduce("min", ("t1",), node, name="a1")


def builtin_target(spec: str) -> Target:
    """The paper's targets (Theorem 1, Theorem 2, intrinsic dimension, order 3) and the min–max
    alternation of depth k."""
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
        if p["D"] > 5000:
            raise InputError(f"--target: {spec}: D must be <= 5000, got {p['D']}")
        return Target(spec, tuple(Comparison(f"m{i}", 2) for i in range(1, p["D"] + 1)))
    if name == "alternation":
        p = _params(spec, ("k",), ("k",))
        if p["k"] > MAX_TREE_DEPTH // 2:
            raise InputError(f"--target: {spec}: k must be <= {MAX_TREE_DEPTH // 2}, got {p['k']}")
        return Target(spec, tree=alternation(p["k"]))
    raise InputError(f"--target: unknown target {spec!r} (built-in: {', '.join(BUILTINS)}; "
                     "or a path to a comparison-tree .json file)")


# ---------------------------------------------------------------- the JSON format

def _show(value: object) -> str:
    """A value for an error message, cut short (a 5000-digit number stays one short line)."""
    text = repr(str(value) if isinstance(value, str) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def _int_field(file: str, path: str, obj: dict, key: str, default: int | None) -> int:
    value = obj.get(key, default)
    if value is None:
        raise InputError(f"{file}: {path}: missing required key {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{file}: {path}.{key}: expected an integer >= 1, got {_show(value)}")
    return value


def _object(file: str, path: str, obj: object, keys: set[str]) -> dict:
    if not isinstance(obj, dict):
        raise InputError(f"{file}: {path}: expected an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - keys)
    if unknown:
        raise InputError(f"{file}: {path}: unknown key {_show(unknown[0])}")
    return obj


def _identifier(file: str, path: str, value: object) -> str:
    if type(value) is not str or not _NAME.match(value):
        raise InputError(f"{file}: {path}: expected an identifier, got {_show(value)}")
    return value


def _comparison(file: str, path: str, obj: object, extra: set[str] = frozenset()) -> Comparison:
    obj = _object(file, path, obj, {"name", "order", "rank", "key_dim", "reduce"} | extra)
    name = _identifier(file, f"{path}.name", obj.get("name"))
    reduce = obj.get("reduce", "min")
    if reduce not in ("min", "max"):
        raise InputError(f"{file}: {path}.reduce: expected \"min\" or \"max\", got {_show(reduce)}")
    order = _int_field(file, path, obj, "order", None)
    if order > MAX_ORDER:
        raise InputError(f"{file}: {path}.order: at most {MAX_ORDER}, got {order}")
    return Comparison(name, order,
                      _int_field(file, path, obj, "rank", 1),
                      _int_field(file, path, obj, "key_dim", 1), reduce)


class _TreeReader:
    """Reads a tree node by node; tracks scope, depth and size, and names every error by file
    and JSON path."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.nodes = 0

    def fail(self, path: str, message: str) -> InputError:
        return InputError(f"{self.file}: {path}: {message}")

    def node(self, path: str, obj: object, scope: tuple[str, ...], depth: int) -> Node:
        if depth > MAX_TREE_DEPTH:
            raise self.fail(path, f"the tree is nested deeper than {MAX_TREE_DEPTH} levels")
        self.nodes += 1
        if self.nodes > MAX_TREE_NODES:
            raise self.fail(path, f"the tree has more than {MAX_TREE_NODES} nodes")
        if not isinstance(obj, dict):
            raise self.fail(path, f"expected an object, got {type(obj).__name__}")
        op = obj.get("op")
        if op == "comparison":
            c = _comparison(self.file, path, obj, {"op"})
            self.nodes += 2 * c.order
            return c
        if op == "score":
            return self.score(path, _object(self.file, path, obj, {"op", "name", "args"}), scope)
        if op in ("min", "max") and "over" in obj:
            return self.reduce(path, _object(self.file, path, obj, {"op", "over", "of", "rank",
                                                                   "key_dim", "name"}),
                               scope, depth)
        if op in ("sum", "min", "max"):
            obj = _object(self.file, path, obj, {"op", "of"})
            items = obj.get("of")
            if not isinstance(items, list) or not items:
                raise self.fail(f"{path}.of", f"expected a non-empty list of nodes, got {_show(items)}")
            return Combine(op, tuple(self.node(f"{path}.of[{i}]", o, scope, depth + 1)
                                     for i, o in enumerate(items)))
        raise self.fail(f"{path}.op", "expected \"score\", \"min\", \"max\", \"sum\" or "
                                      f"\"comparison\", got {_show(op)}")

    def score(self, path: str, obj: dict, scope: tuple[str, ...]) -> Score:
        name = _identifier(self.file, f"{path}.name", obj.get("name"))
        args = obj.get("args")
        if not isinstance(args, list) or not args:
            raise self.fail(f"{path}.args", f"expected a non-empty list, got {_show(args)}")
        out: list[str | int] = []
        for i, a in enumerate(args):
            where = f"{path}.args[{i}]"
            if isinstance(a, bool) or not isinstance(a, (str, int)):
                raise self.fail(where, f"expected a variable or a position, got {_show(a)}")
            if isinstance(a, int):
                if not 1 <= a <= MAX_POSITION:
                    raise self.fail(where, f"a fixed position must be in 1..{MAX_POSITION}, "
                                           f"got {_show(a)}")
            elif type(a) is not str:  # a number the loader kept as text (too long, NaN, a float)
                raise self.fail(where, f"expected a variable or a position, got {_show(a)}")
            elif a not in scope:
                raise self.fail(where, f"variable {_show(a)} is not bound by a reduction above")
            if a in out:
                raise self.fail(where, f"{_show(a)} appears twice in one score")
            out.append(a)
        return Score(name, tuple(out))

    def reduce(self, path: str, obj: dict, scope: tuple[str, ...], depth: int) -> Reduce:
        over = obj["over"]
        names = [over] if isinstance(over, str) else over
        if not isinstance(names, list) or not names:
            raise self.fail(f"{path}.over", f"expected a variable or a non-empty list of "
                                            f"variables, got {_show(over)}")
        for i, v in enumerate(names):
            _identifier(self.file, f"{path}.over" + ("" if isinstance(over, str) else f"[{i}]"), v)
            if v in scope or v in names[:i]:
                raise self.fail(f"{path}.over", f"variable {v!r} is already bound")
        name = obj.get("name")
        if name is not None:
            _identifier(self.file, f"{path}.name", name)
            if name == READOUT:
                raise self.fail(f"{path}.name", f"{READOUT!r} is reserved: it names the readout")
        if "of" not in obj:
            raise self.fail(path, "missing required key 'of'")
        body = self.node(f"{path}.of", obj["of"], scope + tuple(names), depth + 1)
        unused = [v for v in names if v not in _free(body)]
        if unused:
            raise self.fail(f"{path}.over", f"variable {unused[0]!r} is bound but no score "
                                            "below reads it")
        return Reduce(obj["op"], tuple(names), body, _int_field(self.file, path, obj, "rank", 1),
                      _int_field(self.file, path, obj, "key_dim", 1), name)


def target_from_json(file: str, data: object) -> Target:
    """Validate a comparison tree; errors name the file and the JSON path."""
    if not isinstance(data, dict):
        raise InputError(f"{file}: $: expected an object, got {type(data).__name__}")
    unknown = sorted(set(data) - {"name", "combine", "comparisons", "tree"})
    if unknown:
        raise InputError(f"{file}: $: unknown key {_show(unknown[0])}")
    name = data.get("name", Path(file).stem)
    if type(name) is not str or not name or len(name) > 200:
        raise InputError(f"{file}: $.name: expected a non-empty string, got {_show(name)}")
    if _is_builtin(name):  # a witness names its target: the name must say which tree it is
        where = "$.name" if "name" in data else "$ (the name defaults to the file's stem)"
        raise InputError(f"{file}: {where}: {_show(name)} is a built-in target's name; "
                         "give the tree another name")
    if "tree" in data:
        if "comparisons" in data or "combine" in data:
            raise InputError(f"{file}: $: give either \"tree\" or \"comparisons\", not both")
        target = Target(name, tree=_TreeReader(file).node("$.tree", data["tree"], (), 0))
    else:
        combine = data.get("combine", "sum")
        if combine not in ("sum", "min", "max"):
            raise InputError(f"{file}: $.combine: expected \"sum\", \"min\" or \"max\", "
                             f"got {_show(combine)}")
        items = data.get("comparisons")
        if not isinstance(items, list) or not items:
            raise InputError(f"{file}: $.comparisons: expected a non-empty list, got {_show(items)}")
        if len(items) > MAX_TREE_NODES // 4:
            raise InputError(f"{file}: $.comparisons: more than {MAX_TREE_NODES // 4} comparisons")
        target = Target(name, tuple(_comparison(file, f"$.comparisons[{i}]", o)
                                    for i, o in enumerate(items)), combine)
    _unique_names(file, target)
    return target


def _is_builtin(spec: str) -> bool:
    try:
        builtin_target(spec)
    except InputError:
        return False
    return True


def _unique_names(file: str, target: Target) -> None:
    seen: dict[str, str] = {}

    def walk(node: Node, path: str) -> None:
        if isinstance(node, (Comparison, Reduce)) and node.name is not None:
            if node.name in seen:
                raise InputError(f"{file}: {path}.name: duplicate name {node.name!r} "
                                 f"(also at {seen[node.name]})")
            seen[node.name] = path
        if isinstance(node, Reduce):
            walk(node.of, f"{path}.of")
        elif isinstance(node, Combine):
            for i, c in enumerate(node.of):
                walk(c, f"{path}.of[{i}]")

    if target.flat:
        for i, c in enumerate(target.comparisons):
            walk(c, f"$.comparisons[{i}]")
    else:
        walk(target.tree, "$.tree")
    target.calc  # names derived from these (g_c, r1, …) are checked when the tree is normalised


def load_tree(path: str | Path) -> Target:
    """Read a comparison-tree file with the verifier's JSON loader (size, depth, encoding and
    number guards: every bad file is one InputError naming the file)."""
    from tfcert.verify.formats import load_document
    file = str(path)
    doc = load_document(file)
    return target_from_json(file, doc.value)


def parse_target(spec: str) -> Target:
    """A built-in name, or a path to a comparison-tree JSON file (``*.json``)."""
    return load_tree(spec) if spec.endswith(".json") else builtin_target(spec)
