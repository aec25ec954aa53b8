"""The calculus over a normalised comparison tree: facts, the rules that derive them, their costs.

Shared by the z3 search (``search.py``) and the witness builder. The independent checker
(``check.py``) re-implements these rules from docs/infoflow.md and imports none of this.

Normalisation: a flat comparison ``c`` of order r and rank 1 becomes r nested one-variable
reductions named ``c``, ``g_c``, ``g2_c``, … (outermost first) over a score ``c`` of the r
variables ``c#1..c#r``; of rank k >= 2 (order >= 2) it stays one reduction over unordered
r-tuples (a k-th best over tuples does not decompose); of order 1 it is one reduction. A
rank-1 reduction over several variables is expanded the same way. Unnamed reductions are named
``r1``, ``r2``, … in preorder, skipping names in use.

Facts per position class (``tok``: every input token t, by permutation symmetry; ``out``: the
readout T+1): ``R(t)`` at tok for a reduction R with one free variable (anchored at t); ``R``
at tok or out for a closed reduction; ``1..T`` (full information); ``x(p)`` (the token at the
fixed position p is known; positional encoding only).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Callable, Iterable

from tfcert.errors import InputError
from tfcert.infoflow.costs import CostTerm, decode_all, decode_tokens, kth_retrieval

CLASSES = ("tok", "out")
SHOW = {"tok": "t", "out": "T+1"}
ALL = "1..T"
MODES = ("off", "max", "kth", "global", "pos")
ROLES = ("anchor", "resolve", "copy")
Key = tuple[str, str]  # (fact, class)
MAX_DEPTH = 64  # levels of the normalised tree (what a witness file carries and check reads)


def position_fact(p: int) -> str:
    return f"x({p})"


@dataclass(frozen=True)
class CNode:
    """One node of the normalised tree; ``children`` are node ids (a reduction has one)."""

    id: int
    kind: str                 # "score" | "reduce" | "combine"
    op: str                   # score: "score"; reduce: min/max; combine: sum/min/max
    name: str                 # score and reduction names; "" for a combine
    over: tuple[str, ...]     # variables a reduction binds
    args: tuple[str | int, ...]  # a score's arguments
    children: tuple[int, ...]
    rank: int
    key_dim: int
    free: frozenset[str]      # free variables
    w: int                    # tokens the value is a function of (Theorem 3's T0), see docs
    positions: frozenset[int]  # fixed positions read below

    @property
    def fact(self) -> bool:
        """A reduction whose value a position can hold: at most one free variable."""
        return self.kind == "reduce" and len(self.free) <= 1

    @property
    def retrievable(self) -> bool:
        """A fact one retrieval can compute: one bound variable."""
        return self.fact and len(self.over) == 1

    @property
    def fact_name(self) -> str:
        return f"{self.name}(t)" if self.free else self.name

    @property
    def classes(self) -> tuple[str, ...]:
        return ("tok",) if self.free else CLASSES

    @property
    def mode(self) -> str:
        return "max" if self.rank == 1 else "kth"

    @property
    def role(self) -> str:
        return "anchor" if self.free else "resolve"


@dataclass(frozen=True)
class Tree:
    nodes: tuple[CNode, ...]
    root: int
    order: int
    dimension: int
    min_T: int

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(sorted(self.nodes[self.root].positions))

    def reductions(self) -> list[CNode]:
        return [n for n in self.nodes if n.kind == "reduce"]

    def by_name(self) -> dict[str, CNode]:
        return {n.name: n for n in self.nodes if n.kind == "reduce"}

    def to_json(self, nid: int | None = None) -> dict:
        """The normalised tree in the target format (what a witness file carries)."""
        n = self.nodes[self.root if nid is None else nid]
        if n.kind == "score":
            return {"op": "score", "name": n.name, "args": list(n.args)}
        if n.kind == "combine":
            return {"op": n.op, "of": [self.to_json(c) for c in n.children]}
        return {"op": n.op, "over": list(n.over), "name": n.name, "rank": n.rank,
                "key_dim": n.key_dim, "of": self.to_json(n.children[0])}

    def render(self, nid: int, subst: dict[str, str]) -> str:
        """A node as text, variables renamed by ``subst`` (``t``, ``s``, ``T+1``)."""
        n = self.nodes[nid]
        if n.kind == "score":
            return f"{n.name}(" + ", ".join(f"@{a}" if isinstance(a, int) else subst.get(a, a)
                                            for a in n.args) + ")"
        if n.kind == "combine":
            parts = [self.render(c, subst) for c in n.children]
            return " + ".join(parts) if n.op == "sum" else f"{n.op}(" + ", ".join(parts) + ")"
        if n.fact:
            return n.name + ("" if not n.free else f"({subst.get(next(iter(n.free)), 't')})")
        return f"{n.op}_{{{','.join(n.over)}}} {self.render(n.children[0], subst)}"


def normalise(target) -> Tree:
    """Expand comparisons, name every reduction, compute free variables, w and positions."""
    from tfcert.infoflow.targets import Comparison, Reduce, Score

    recs: list[dict] = []

    def add(**kw) -> int:
        recs.append(kw)
        return len(recs) - 1

    def chain(op: str, over: tuple[str, ...], body: int, key_dim: int, name: str | None) -> int:
        ids = []
        for j in range(len(over) - 1, -1, -1):
            body = add(kind="reduce", op=op, over=(over[j],), children=(body,), rank=1,
                       key_dim=key_dim, name=None, derive=j)
            ids.append(body)
        outer = ids[-1]
        recs[outer]["name"] = name
        for j, i in enumerate(reversed(ids)):
            recs[i]["outer"] = outer
        return outer

    def build(node) -> int:
        if isinstance(node, Comparison):
            vs = tuple(f"{node.name}#{i}" for i in range(1, node.order + 1))
            leaf = add(kind="score", op="score", name=node.name, args=vs, children=())
            if node.order == 1 or node.rank > 1:
                return add(kind="reduce", op=node.reduce, over=vs, children=(leaf,),
                           rank=node.rank, key_dim=node.key_dim, name=node.name)
            return chain(node.reduce, vs, leaf, node.key_dim, node.name)
        if isinstance(node, Score):
            return add(kind="score", op="score", name=node.name, args=node.args, children=())
        if isinstance(node, Reduce):
            body = build(node.of)
            if len(node.over) == 1 or node.rank > 1:
                return add(kind="reduce", op=node.op, over=node.over, children=(body,),
                           rank=node.rank, key_dim=node.key_dim, name=node.name)
            return chain(node.op, node.over, body, node.key_dim, node.name)
        return add(kind="combine", op=node.op, name="", children=tuple(build(c) for c in node.of))

    root = build(target.root)
    # names: explicit ones (and the g_ names they imply) first, then r1, r2, … in preorder
    order: list[int] = []
    stack = [root]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(recs[i]["children"]))

    def derived(i: int) -> str | None:
        r = recs[i]
        if "derive" not in r or r["derive"] == 0:
            return r["name"]
        base = recs[r["outer"]]["name"]
        if base is None:
            return None
        return f"g_{base}" if r["derive"] == 1 else f"g{r['derive']}_{base}"

    used = {derived(i) for i in order if recs[i]["kind"] == "reduce"} - {None}
    counter = 0
    for i in order:
        r = recs[i]
        if r["kind"] == "reduce" and r.get("derive", 0) == 0 and r["name"] is None:
            counter += 1
            while f"r{counter}" in used:
                counter += 1
            r["name"] = f"r{counter}"
            used.add(r["name"])
    seen: set[str] = set()
    for i in order:
        if recs[i]["kind"] == "reduce":
            recs[i]["name"] = derived(i)
            if recs[i]["name"] in seen:
                raise InputError(f"target {target.name!r}: the reduction name "
                                 f"{recs[i]['name']!r} is used twice")
            seen.add(recs[i]["name"])

    nodes: list[CNode] = []
    for i, r in enumerate(recs):  # children always have smaller ids
        kids = [nodes[c] for c in r["children"]]
        if r["kind"] == "score":
            free = frozenset(a for a in r["args"] if isinstance(a, str))
            w, pos = len(r["args"]), frozenset(a for a in r["args"] if isinstance(a, int))
        elif r["kind"] == "reduce":
            free = kids[0].free - set(r["over"])
            w, pos = kids[0].w, kids[0].positions
        else:
            free = frozenset().union(*(k.free for k in kids))
            w, pos = max(k.w for k in kids), frozenset().union(*(k.positions for k in kids))
        nodes.append(CNode(i, r["kind"], r["op"], r["name"], tuple(r.get("over", ())),
                           tuple(r.get("args", ())), tuple(r["children"]), r.get("rank", 1),
                           r.get("key_dim", 1), free, w, pos))

    depth = [0] * len(nodes)
    for n in nodes:  # children first
        depth[n.id] = 1 + max((depth[c] for c in n.children), default=0)
    if depth[root] > MAX_DEPTH:
        raise InputError(f"target {target.name!r}: with its comparisons expanded the tree is "
                         f"{depth[root]} levels deep, more than {MAX_DEPTH}")
    reductions = [n for n in nodes if n.kind == "reduce"]
    order_ = max((len(n.free) + len(n.over) for n in reductions), default=0)
    top = 0
    stack = [root]
    while stack:
        n = nodes[stack.pop()]
        if n.kind == "reduce":
            top += 1
        else:
            stack.extend(n.children)
    return Tree(tuple(nodes), root, order_, top, _min_T(nodes))


def _min_T(nodes: list[CNode]) -> int:
    least = 1
    for n in nodes:
        if n.kind == "score":
            least = max(least, *(a for a in n.args if isinstance(a, int)), 1)
        elif n.kind == "reduce":
            k, r = len(n.free), len(n.over)
            if r == 1:
                least = max(least, k + n.rank)
            else:  # the least T with C(T - k, r) >= rank: doubling, then bisection
                lo, hi = k + r, k + r
                while comb(hi - k, r) < n.rank:
                    lo, hi = hi + 1, 2 * hi
                while lo < hi:
                    mid = (lo + hi) // 2
                    lo, hi = (mid + 1, hi) if comb(mid - k, r) < n.rank else (lo, mid)
                least = max(least, lo)
    return least


# ---------------------------------------------------------------- rules


class Rules:
    """The rule table for one tree, token dimension d, embedding E and positional flag."""

    def __init__(self, tree: Tree, d: int, E: int, positional: bool) -> None:
        self.tree, self.d, self.E, self.positional = tree, d, E, positional
        self.nodes = tree.nodes
        self.retrievals: list[tuple[int, str]] = [(n.id, c) for n in tree.nodes if n.retrievable
                                                  for c in n.classes]
        keys: list[Key] = [(n.fact_name, c) for n in tree.nodes if n.fact for c in n.classes]
        keys += [(ALL, c) for c in CLASSES]
        if positional:
            keys += [(position_fact(p), c) for p in tree.positions for c in CLASSES]
        self.keys = keys
        self.node_of = {n.fact_name: n for n in tree.nodes if n.fact}
        self.closed = [f for f, c in keys if c == "out"]  # what a retrieval at T+1 can bring over
        self.uses_positions = positional and bool(tree.positions)

    # costs -------------------------------------------------------------------------------
    def retrieve_terms(self, nid: int) -> tuple[CostTerm, ...]:
        n = self.nodes[nid]
        terms = (decode_tokens(n.w, self.d, self.E),)
        return terms + ((kth_retrieval(n.rank, n.key_dim),) if n.rank > 1 else ())

    def transfer_terms(self, fact: str) -> tuple[CostTerm, ...]:
        n = self.node_of.get(fact)
        return () if n is None else (decode_tokens(n.w, self.d, self.E),)

    def decode_terms(self) -> tuple[CostTerm, ...]:
        return (decode_all(self.d, self.E),)

    def readout_terms(self) -> tuple[CostTerm, ...]:
        return (decode_tokens(self.nodes[self.tree.root].w, self.d, self.E),)

    def all_terms(self) -> list[CostTerm]:
        out = list(self.decode_terms()) + list(self.readout_terms())
        for n, _ in self.retrievals:
            out += self.retrieve_terms(n)
        for f in self.closed:
            out += self.transfer_terms(f)
        return out

    def decodable(self, fact: str) -> bool:
        """From full information: any fact, but a fixed position is only identifiable with
        positional encoding."""
        if fact == ALL:
            return False
        n = self.node_of.get(fact)
        return self.positional or n is None or not n.positions

    # premises ----------------------------------------------------------------------------
    def avail(self, nid: int, cls: str, own: str | None, lg):
        """The value of node nid is known at class ``cls`` (own variable ``own``) from facts."""
        n = self.nodes[nid]
        if not n.free <= ({own} if own else set()):
            return lg.false()
        if n.kind == "score":
            return lg.all([lg.lit((position_fact(p), cls)) for p in n.args if isinstance(p, int)])
        if n.kind == "combine":
            return lg.all([self.avail(c, cls, own, lg) for c in n.children])
        if not n.fact:
            return lg.false()
        return lg.lit((n.fact_name, cls))

    def score(self, nid: int, cls: str, u: str | None, v: str, lg):
        """Node nid is computable by a head at class ``cls`` (variable u) scoring a candidate
        token (variable v): from what the attender knows and what the candidate knows."""
        n = self.nodes[nid]
        if not n.free <= {u, v}:
            return lg.false()
        sides = [self.avail(nid, cls, u, lg), self.avail(nid, "tok", v, lg)]
        if n.kind == "score":
            sides.append(lg.all([lg.any([lg.lit((position_fact(p), cls)),
                                         lg.lit((position_fact(p), "tok"))])
                                 for p in n.args if isinstance(p, int)]))
        elif n.kind == "combine":
            sides.append(lg.all([self.score(c, cls, u, v, lg) for c in n.children]))
        return lg.any(sides)

    def retrieval_premises(self, nid: int, cls: str, lg):
        n = self.nodes[nid]
        u = next(iter(n.free)) if n.free else None
        return self.score(n.children[0], cls, u, n.over[0], lg)

    def goal(self, lg):
        return self.avail(self.tree.root, "out", None, lg)

    # forward -----------------------------------------------------------------------------
    def step(self, prev: set[Key], layer: dict,
             allowed: Callable[[tuple[CostTerm, ...]], bool]) -> set[Key]:
        """The facts after one layer that does what ``layer`` says (``ret``: set of (node,
        class) retrievals; ``copy``, ``glob``, ``pos``: bools), rules outside ``allowed`` off."""
        cur = set(prev)
        lg = SetLogic(prev)
        for nid, c in sorted(layer["ret"]):
            if allowed(self.retrieve_terms(nid)) and \
                    self.retrieval_premises(nid, c, lg) is not None:
                cur.add((self.nodes[nid].fact_name, c))
        if layer["copy"] or any(c == "out" for _, c in layer["ret"]):
            cur |= {(f, "out") for f in self.closed
                    if (f, "tok") in prev and allowed(self.transfer_terms(f))}
        if layer["glob"]:
            cur |= {(ALL, c) for c in CLASSES}
        if layer["pos"]:
            cur |= {(position_fact(p), c) for p in self.tree.positions for c in CLASSES}
        if allowed(self.decode_terms()):  # full information: any value, at Theorem 3 for T
            for c in CLASSES:
                if (ALL, c) in cur:
                    cur |= {(f, k) for f, k in self.keys if k == c and self.decodable(f)}
        return cur

    def forward(self, plan: list[dict], allowed) -> list[set[Key]]:
        have: list[set[Key]] = [set()]
        for layer in plan:
            have.append(self.step(have[-1], layer, allowed))
        return have

    def unlimited(self) -> dict:
        """A layer with every use available: for the depth closure (with cheap rules only, a
        global head gives 1..T but nothing can be decoded from it)."""
        return {"ret": set(self.retrievals), "copy": True, "glob": True,
                "pos": self.uses_positions}


class SetLogic:
    """Premise sets: a literal holds if ``have`` has it; ``all`` unites, ``any`` takes the
    first alternative that holds (attender side, then candidate side, then structure)."""

    def __init__(self, have: set[Key]) -> None:
        self.have = have

    def lit(self, key: Key):
        return frozenset({key}) if key in self.have else None

    def all(self, parts: Iterable):
        out: frozenset = frozenset()
        for p in parts:
            if p is None:
                return None
            out |= p
        return out

    def any(self, parts: Iterable):
        return next((p for p in parts if p is not None), None)

    def false(self):
        return None


def cheap(terms: tuple[CostTerm, ...]) -> bool:
    """A T-bounded step: no cost term grows with T."""
    return not any(t.grows for t in terms)


def depth_closure(rules: Rules, limit: int = 100_000) -> tuple[int | None, int]:
    """(least L with a T-bounded derivation when every layer may use every cheap rule, or
    None; the state after which the derivable facts stop growing). A state's successor
    depends on the state only, so once two states agree every later one does."""
    have: set[Key] = set()
    for L in range(1, limit + 1):
        nxt = rules.step(have, rules.unlimited(), cheap)
        if rules.goal(SetLogic(nxt)) is not None and cheap(rules.readout_terms()):
            return L, L
        if nxt == have:
            return None, L - 1
        have = nxt
    raise AssertionError("the closure did not stabilise")  # facts are finitely many
