"""``tfcert infoflow check FILE``: an independent checker for InfoFlow witness files.

It shares nothing with the search but the file format (docs/infoflow.md, "Witness files"): it
imports no other module of ``tfcert.infoflow``, reads the tree, the heads and the steps itself,
and re-implements the rules, the cost laws and the information-set propagation from the docs.
The only outside code it uses is the verifier's JSON loader (to read the file with its guards)
and, for the unsat queries a file carries, z3's SMT-LIB2 parser.

A witness is valid when: the architecture and the tree fit; every head's mode and uses are
legal; the information sets are those the heads give; every step's rule applies, with its head
doing what the step says and every premise derived by an earlier step at an early enough state;
the readout step reaches the target; no head is idle and no fact is dead (every fact is a
premise of a later step); the per-state fact table is what the steps give; every step's cost
terms are the rule's; the claimed exponent is the maximum of them (not lower, not higher), and a
witness that claims to be T-bounded uses no term that grows with T. Each proof it carries is
re-run and must be unsat; that a query encodes the claim beside it is not checked here (the
queries come from the search's z3 encoding), so a file without a derivation, whose only content
is such claims, is never valid.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from math import comb

from tfcert.errors import InputError

FORMAT = "tfcert.infoflow.witness/1"
MAX_LAYERS, MAX_HEADS, MAX_DEPTH, MAX_NODES = 64, 4096, 64, 40_000
MODES = ("off", "max", "kth", "global", "pos")
ROLES = ("anchor", "resolve", "copy")
RULES = ("retrieve", "transfer", "aggregate", "positional", "decode", "readout")
CLASSES = ("t", "T+1")
EVERYTHING = "1..T"
_FRACTION = re.compile(r"^-?[0-9]{1,400}(/[0-9]{1,400})?$")
PROOF_TIMEOUT_MS = 60_000


@dataclass
class Report:
    valid: bool
    errors: list[str]
    exponent: Fraction | None = None
    bounded: bool | None = None
    proofs: list[tuple[str, str]] = field(default_factory=list)  # (claim, z3's answer)
    summary: str = ""


# ---------------------------------------------------------------- reading (exit 2 on errors)


class _Node:
    def __init__(self, kind: str, op: str, name: str, over=(), args=(), kids=(), rank=1,
                 key_dim=1) -> None:
        self.kind, self.op, self.name = kind, op, name
        self.over, self.args, self.kids = tuple(over), tuple(args), list(kids)
        self.rank, self.key_dim = rank, key_dim
        if kind == "score":
            self.free = frozenset(a for a in args if isinstance(a, str))
            self.w = len(args)
            self.pos = frozenset(a for a in args if isinstance(a, int))
        elif kind == "reduce":
            self.free = kids[0].free - set(over)
            self.w, self.pos = kids[0].w, kids[0].pos
        else:
            self.free = frozenset().union(*(k.free for k in kids))
            self.w = max(k.w for k in kids)
            self.pos = frozenset().union(*(k.pos for k in kids))

    @property
    def holdable(self) -> bool:
        return self.kind == "reduce" and len(self.free) <= 1

    @property
    def fact(self) -> str:
        return self.name + ("(t)" if self.free else "")


class _Reader:
    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.reductions: dict[str, _Node] = {}

    def bad(self, path: str, message: str) -> InputError:
        return InputError(f"{self.name}: {path}: {message}")

    def obj(self, path: str, value: object, required: tuple[str, ...],
            optional: tuple[str, ...] = ()) -> dict:
        if not isinstance(value, dict):
            raise self.bad(path, f"expected an object, got {type(value).__name__}")
        for key in value:
            if key not in required and key not in optional:
                raise self.bad(path, f"unknown key {_short(key)}")
        for key in required:
            if key not in value:
                raise self.bad(path, f"missing required key {key!r}")
        return value

    def list(self, path: str, value: object) -> list:
        if not isinstance(value, list):
            raise self.bad(path, f"expected a list, got {type(value).__name__}")
        return value

    def text(self, path: str, value: object, choices: tuple[str, ...] | None = None) -> str:
        if type(value) is not str or len(value) > 10_000:
            raise self.bad(path, f"expected a string, got {_short(value)}")
        if choices is not None and value not in choices:
            raise self.bad(path, f"expected one of {', '.join(choices)}, got {_short(value)}")
        return value

    def integer(self, path: str, value: object, low: int, high: int | None = None) -> int:
        if type(value) is not int or value < low or (high is not None and value > high):
            bounds = f">= {low}" if high is None else f"in {low}..{high}"
            raise self.bad(path, f"expected an integer {bounds}, got {_short(value)}")
        return value

    def boolean(self, path: str, value: object) -> bool:
        if type(value) is not bool:
            raise self.bad(path, f"expected true or false, got {_short(value)}")
        return value

    def fraction(self, path: str, value: object) -> Fraction:
        if type(value) is not str or not _FRACTION.match(value):
            raise self.bad(path, f"expected an exact number like \"3/2\", got {_short(value)}")
        try:
            return Fraction(value)
        except ZeroDivisionError:
            raise self.bad(path, "division by zero") from None

    def node(self, path: str, value: object, scope: tuple[str, ...], depth: int) -> _Node:
        self.count += 1
        if depth > MAX_DEPTH or self.count > MAX_NODES:
            raise self.bad(path, "the tree is too deep or too large")
        if not isinstance(value, dict):
            raise self.bad(path, f"expected an object, got {type(value).__name__}")
        op = self.text(f"{path}.op", value.get("op"), ("score", "min", "max", "sum"))
        if op == "score":
            v = self.obj(path, value, ("op", "name", "args"))
            args = []
            for i, a in enumerate(self.list(f"{path}.args", v["args"])):
                where = f"{path}.args[{i}]"
                if type(a) is int:
                    self.integer(where, a, 1)
                elif type(a) is not str or a not in scope:
                    raise self.bad(where, f"expected a bound variable or a position, got {_short(a)}")
                if a in args:
                    raise self.bad(where, f"{_short(a)} appears twice")
                args.append(a)
            if not args:
                raise self.bad(f"{path}.args", "a score reads at least one token")
            return _Node("score", op, self.text(f"{path}.name", v["name"]), args=args)
        if "over" in value:
            v = self.obj(path, value, ("op", "over", "name", "rank", "key_dim", "of"))
            over = self.list(f"{path}.over", v["over"])
            if not over:
                raise self.bad(f"{path}.over", "expected at least one variable")
            for i, x in enumerate(over):
                self.text(f"{path}.over[{i}]", x)
                if x in scope or x in over[:i]:
                    raise self.bad(f"{path}.over[{i}]", f"{_short(x)} is already bound")
            name = self.text(f"{path}.name", v["name"])
            if not name or name in self.reductions or name == "y" or name.startswith("x(") \
                    or name == EVERYTHING or name.endswith("(t)"):
                raise self.bad(f"{path}.name", f"{_short(name)} is empty, reserved or used twice")
            body = self.node(f"{path}.of", v["of"], scope + tuple(over), depth + 1)
            if not set(over) <= body.free:
                raise self.bad(f"{path}.over", "a bound variable is never read")
            if op not in ("min", "max"):
                raise self.bad(f"{path}.op", "a reduction is a min or a max")
            n = _Node("reduce", op, name, over=over, kids=[body],
                      rank=self.integer(f"{path}.rank", v["rank"], 1),
                      key_dim=self.integer(f"{path}.key_dim", v["key_dim"], 1))
            self.reductions[name] = n
            return n
        v = self.obj(path, value, ("op", "of"))
        kids = self.list(f"{path}.of", v["of"])
        if not kids:
            raise self.bad(f"{path}.of", "expected at least one node")
        return _Node("combine", op, "", kids=[self.node(f"{path}.of[{i}]", k, scope, depth + 1)
                                              for i, k in enumerate(kids)])


@dataclass
class _Head:
    mode: str
    uses: dict  # class -> (role, node name or None)
    positions: tuple[int, ...]


@dataclass
class _Step:
    index: int
    fact: str
    at: str
    layer: int
    rule: str
    head: int | None
    premises: list[tuple[str, str]]
    costs: list[tuple[str, Fraction]]

    def __str__(self) -> str:
        return f"step {self.index} ({self.fact} at {self.at}, layer {self.layer}, {self.rule})"


@dataclass
class _Witness:
    target: str
    root: _Node
    reductions: dict
    T: int
    d: int
    E: int
    heads: list[int]
    positional: bool
    reachable: bool
    tree: object = None  # the tree as the file gives it, to compare with a built-in's
    cheap: bool = False
    layers: list = field(default_factory=list)
    info: list = field(default_factory=list)
    facts: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    exponent: Fraction | None = None
    dominant: dict = field(default_factory=dict)
    proofs: list = field(default_factory=list)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_witness(name: str, data: object) -> _Witness:
    """The witness as plain data; InputError (exit 2) when it is not a witness document."""
    r = _Reader(name)
    top = ("format", "target", "tree", "architecture", "derivation")
    if not isinstance(data, dict):
        raise r.bad("$", f"expected an object, got {type(data).__name__}")
    reachable = r.boolean("$.derivation", data.get("derivation"))
    body = ("cheap", "layers", "information_sets", "facts", "steps", "exponent", "dominant_cost")
    d = r.obj("$", data, top + (body if reachable else ()), ("proofs",))
    if d["format"] != FORMAT:
        raise r.bad("$.format", f"expected {FORMAT!r}, got {_short(d['format'])}")
    a = r.obj("$.architecture", d["architecture"], ("T", "d", "E", "heads", "positional"))
    heads = r.list("$.architecture.heads", a["heads"])
    if not 1 <= len(heads) <= MAX_LAYERS:
        raise r.bad("$.architecture.heads", f"expected 1..{MAX_LAYERS} layers")
    w = _Witness(r.text("$.target", d["target"]), r.node("$.tree", d["tree"], (), 0),
                 r.reductions, r.integer("$.architecture.T", a["T"], 1),
                 r.integer("$.architecture.d", a["d"], 1), r.integer("$.architecture.E", a["E"], 1),
                 [r.integer(f"$.architecture.heads[{i}]", h, 0, MAX_HEADS)
                  for i, h in enumerate(heads)],
                 r.boolean("$.architecture.positional", a["positional"]), reachable)
    w.tree = d["tree"]
    for i, p in enumerate(r.list("$.proofs", d.get("proofs", []))):
        p = r.obj(f"$.proofs[{i}]", p, ("claim", "smt2"), ("layer", "heads"))
        w.proofs.append((r.text(f"$.proofs[{i}].claim", p["claim"]), _smt2(r, i, p["smt2"])))
    if not reachable:
        return w
    w.cheap = r.boolean("$.cheap", d["cheap"])
    for l, layer in enumerate(r.list("$.layers", d["layers"])):
        path = f"$.layers[{l}]"
        layer = r.obj(path, layer, ("layer", "heads"))
        r.integer(f"{path}.layer", layer["layer"], l + 1, l + 1)
        hs = []
        for h, head in enumerate(r.list(f"{path}.heads", layer["heads"])):
            hp = f"{path}.heads[{h}]"
            head = r.obj(hp, head, ("head", "mode", "at_t", "at_readout"), ("positions",))
            r.integer(f"{hp}.head", head["head"], h + 1, h + 1)
            uses = {}
            for cls, key in (("t", "at_t"), ("T+1", "at_readout")):
                if head[key] is not None:
                    u = r.obj(f"{hp}.{key}", head[key], ("role", "node"))
                    node = u["node"]
                    if node is not None:
                        node = r.text(f"{hp}.{key}.node", node)
                    uses[cls] = (r.text(f"{hp}.{key}.role", u["role"], ROLES), node)
            positions = tuple(r.integer(f"{hp}.positions[{i}]", p, 1)
                              for i, p in enumerate(r.list(f"{hp}.positions",
                                                           head.get("positions", []))))
            hs.append(_Head(r.text(f"{hp}.mode", head["mode"], MODES), uses, positions))
        w.layers.append(hs)
    for l, entry in enumerate(r.list("$.information_sets", d["information_sets"])):
        path = f"$.information_sets[{l}]"
        entry = r.obj(path, entry, ("layer", "I(t,l)", "I(T+1,l)"))
        r.integer(f"{path}.layer", entry["layer"], l, l)
        w.info.append({cls: _info_entry(r, f"{path}.{key}", entry[key])
                       for cls, key in (("t", "I(t,l)"), ("T+1", "I(T+1,l)"))})
    for l, entry in enumerate(r.list("$.facts", d["facts"])):
        path = f"$.facts[{l}]"
        entry = r.obj(path, entry, ("layer", "t", "T+1"))
        r.integer(f"{path}.layer", entry["layer"], l, l)
        w.facts.append({cls: [r.text(f"{path}.{cls}[{i}]", f)
                              for i, f in enumerate(r.list(f"{path}.{cls}", entry[cls]))]
                        for cls in CLASSES})
    for i, s in enumerate(r.list("$.steps", d["steps"])):
        path = f"$.steps[{i}]"
        s = r.obj(path, s, ("fact", "at", "layer", "rule", "head", "premises", "costs"))
        premises = []
        for j, p in enumerate(r.list(f"{path}.premises", s["premises"])):
            p = r.obj(f"{path}.premises[{j}]", p, ("fact", "at"))
            premises.append((r.text(f"{path}.premises[{j}].fact", p["fact"]),
                             r.text(f"{path}.premises[{j}].at", p["at"], CLASSES)))
        costs = []
        for j, c in enumerate(r.list(f"{path}.costs", s["costs"])):
            c = r.obj(f"{path}.costs[{j}]", c, ("law", "value"))
            costs.append((r.text(f"{path}.costs[{j}].law", c["law"]),
                          r.fraction(f"{path}.costs[{j}].value", c["value"])))
        head = None if s["head"] is None else r.integer(f"{path}.head", s["head"], 1)
        w.steps.append(_Step(i + 1, r.text(f"{path}.fact", s["fact"]),
                             r.text(f"{path}.at", s["at"], CLASSES),
                             r.integer(f"{path}.layer", s["layer"], 0),
                             r.text(f"{path}.rule", s["rule"], RULES), head, premises, costs))
    w.exponent = r.fraction("$.exponent", d["exponent"])
    dom = r.obj("$.dominant_cost", d["dominant_cost"],
                ("law", "formula", "where", "value", "float", "grows_with_T"))
    number = dom["float"]
    try:
        if type(number) is bool or not isinstance(number, (int, float, str)):
            raise ValueError
        number = float(number) if len(str(number)) <= 100 else None
    except ValueError:
        number = None
    if number is None or number != number:
        raise r.bad("$.dominant_cost.float", f"expected a number, got {_short(dom['float'])}")
    w.dominant = {"law": r.text("$.dominant_cost.law", dom["law"]),
                  "formula": r.text("$.dominant_cost.formula", dom["formula"]),
                  "where": r.obj("$.dominant_cost.where", dom["where"], (), ("d", "E", "k", "n")),
                  "value": r.fraction("$.dominant_cost.value", dom["value"]),
                  "grows": r.boolean("$.dominant_cost.grows_with_T", dom["grows_with_T"]),
                  "float": number}
    for key, v in w.dominant["where"].items():
        r.integer(f"$.dominant_cost.where.{key}", v, 1)
    return w


def _smt2(r: _Reader, i: int, value: object) -> str:
    if type(value) is not str or len(value) > 50_000_000:
        raise r.bad(f"$.proofs[{i}].smt2", "expected an SMT-LIB2 query as a string")
    return value


def _info_entry(r: _Reader, path: str, value: object):
    """An explicit set (a list of position terms) or ``{"union": [...]}``: I(c,l) as the union
    of I(c,l-1) and the sets of the positions its heads read."""
    if isinstance(value, dict):
        v = r.obj(path, value, ("union",))
        items = [r.text(f"{path}.union[{i}]", x)
                 for i, x in enumerate(r.list(f"{path}.union", v["union"]))]
        return ("union", frozenset(items), len(items))
    items = [r.text(f"{path}[{i}]", x) for i, x in enumerate(r.list(path, value))]
    return ("set", frozenset(items), len(items))


# ---------------------------------------------------------------- the rules, re-implemented


def _decode(T0, w: _Witness) -> tuple:
    """Theorem 3: decoding T0 tokens from an E-dim embedding costs eps^(1 - T0 d/E).
    A term is (law, value at T, grows with T, formula, parameters)."""
    where = {"d": w.d, "E": w.E}
    if T0 == "T":
        return ("Theorem 3, T0 = T", max(Fraction(0), Fraction(w.T * w.d, w.E) - 1), True,
                "max(0, T*d/E - 1)", where)
    return (f"Theorem 3, T0 = {T0}", max(Fraction(0), Fraction(T0 * w.d, w.E) - 1), False,
            f"max(0, {T0}*d/E - 1)", where)


def _kth(k: int, n: int, w: _Witness) -> tuple:
    """Theorem 2: the k-th largest of n-dimensional keys costs eps^-((T-k-1)/(n+1))."""
    return (f"Theorem 2, k = {k}", max(Fraction(0), Fraction(w.T - k - 1, n + 1)), True,
            "max(0, (T-k-1)/(n+1))", {"k": k, "n": n})


def _known(n: _Node, cls: str, own: str | None, have: set) -> bool:
    """n's value is available at class cls (own variable ``own``) from the facts ``have``."""
    if not n.free <= ({own} if own else set()):
        return False
    if n.kind == "score":
        return all((f"x({p})", cls) in have for p in n.pos)
    if n.kind == "combine":
        return all(_known(k, cls, own, have) for k in n.kids)
    return n.holdable and (n.fact, cls) in have


def _scorable(n: _Node, cls: str, u: str | None, v: str, have: set) -> bool:
    """A head at cls (variable u) can score candidate tokens (variable v) by n's value."""
    if not n.free <= {u, v}:
        return False
    if _known(n, cls, u, have) or _known(n, "t", v, have):
        return True
    if n.kind == "score":
        return all((f"x({p})", cls) in have or (f"x({p})", "t") in have for p in n.pos)
    if n.kind == "combine":
        return all(_scorable(k, cls, u, v, have) for k in n.kids)
    return False


def _rename(term: str, position: str) -> str:
    if term == EVERYTHING:
        return term
    return position if term == "t" else term.replace("(t)", f"({position})")


def _propagate(w: _Witness) -> tuple[list, list]:
    """Per state and class: the explicit information set (None from the state where one set
    would pass 4096 terms on), and its union form: I(c,l-1) and the sets of the positions read."""
    cur: dict | None = {"t": frozenset({"t"}), "T+1": frozenset({"T+1"})}
    sets: list = [cur]
    gens: list = [dict(cur)]
    for l, heads in enumerate(w.layers, 1):
        sources: dict = {c: [] for c in CLASSES}
        for h, head in enumerate(heads, 1):
            for cls in CLASSES:
                if head.mode == "global":
                    sources[cls].append(EVERYTHING)
                elif head.mode == "pos":
                    sources[cls] += [str(p) for p in head.positions]
                elif cls in head.uses:
                    sources[cls].append(f"s{l}.{h}({cls})")
        gens.append({c: frozenset({f"I({c},{l - 1})"} | {
            EVERYTHING if src == EVERYTHING else f"I({src},{l - 1})" for src in sources[c]})
            for c in CLASSES})
        if cur is not None:
            new = {}
            for c in CLASSES:
                if EVERYTHING in sources[c] or EVERYTHING in cur[c]:
                    new[c] = frozenset({EVERYTHING} | ({"T+1"} if c == "T+1" else set()))
                elif len(cur[c]) + len(sources[c]) * len(cur["t"]) > 4096:
                    new = None  # each source adds a renamed copy of I(t, l-1): too many terms
                    break
                else:
                    new[c] = frozenset(cur[c]).union(*({_rename(x, src) for x in cur["t"]}
                                                       for src in sources[c]))
            cur = new
        sets.append(cur)
    return sets, gens


class _Checker:
    def __init__(self, w: _Witness) -> None:
        self.w = w
        self.errors: list[str] = []
        self.terms: list = []  # every step's cost terms, as the rules give them

    def fail(self, message: str) -> None:
        self.errors.append(message)

    def run(self) -> Fraction | None:
        w = self.w
        self.fits()
        self.label()
        if not w.reachable:
            self.fail("no derivation: the file claims the target is out of reach, which this checker does not "
                      "decide (it re-runs a query as written but cannot tie it to a claim); `tfcert infoflow "
                      "predict` re-derives that answer with its proof")
            return None
        if len(w.layers) != len(w.heads):
            self.fail(f"the witness has {len(w.layers)} layers, the architecture "
                      f"{len(w.heads)}")
            return None
        for l, (hs, n) in enumerate(zip(w.layers, w.heads), 1):
            if len(hs) != n:
                self.fail(f"layer {l}: {len(hs)} heads listed, the architecture has {n}")
        if self.errors:
            return None
        self.heads()
        self.information_sets()
        established, used_heads, used_uses, exponent_terms = self.steps()
        self.terms = exponent_terms
        self.idle(used_heads, used_uses)
        self.fact_table(established)
        if not w.cheap and exponent_terms and not any(t[2] for t in exponent_terms):
            self.fail("$.cheap: stated false, but no cost term of the steps grows with T "
                      "(the derivation is T-bounded)")
        return self.exponent(exponent_terms)

    def label(self) -> None:
        """A ``target`` that names a built-in must carry that built-in's tree: the name is what
        a reader takes the verdict to be about."""
        built = _builtin_tree(self.w.target)
        if built is not None and built != self.w.tree:
            self.fail(f"$.target: {_short(self.w.target)} names a built-in target whose tree is "
                      "not the file's tree")

    def fits(self) -> None:
        w = self.w
        stack = [w.root]
        while stack:
            n = stack.pop()
            stack.extend(n.kids)
            if n.kind == "score":
                for p in n.pos:
                    if p > w.T:
                        self.fail(f"tree: score {n.name!r} reads position {p} but T = {w.T}")
            elif n.kind == "reduce":
                left, r = w.T - len(n.free), len(n.over)
                if left < r or not _at_least(left, r, n.rank):
                    self.fail(f"tree: reduction {n.name!r} has too few candidates at T = {w.T} "
                              f"for rank {n.rank}")

    def heads(self) -> None:
        w = self.w
        for l, hs in enumerate(w.layers, 1):
            for h, head in enumerate(hs, 1):
                where = f"layer {l} head {h}"
                if head.positions and head.mode != "pos":
                    self.fail(f"{where}: only a position-specific head lists positions")
                if head.mode in ("off", "global", "pos") and head.uses:
                    self.fail(f"{where}: a {head.mode} head retrieves nothing at t or T+1")
                if head.mode == "pos":
                    if not w.positional:
                        self.fail(f"{where}: position-specific aggregation needs positional "
                                  "encoding")
                    if not head.positions or len(set(head.positions)) != len(head.positions) \
                            or max(head.positions) > w.T:
                        self.fail(f"{where}: positions must be distinct positions 1..T")
                for cls, (role, name) in head.uses.items():
                    self.use(f"{where} at {cls}", head.mode, cls, role, name)

    def use(self, where: str, mode: str, cls: str, role: str, name: str | None) -> None:
        if role == "copy":
            if cls != "T+1" or name is not None or mode not in ("max", "kth"):
                self.fail(f"{where}: a copy is a retrieval at T+1 naming no reduction")
            return
        n = self.w.reductions.get(name)
        if n is None or not n.holdable or len(n.over) != 1:
            self.fail(f"{where}: {_short(name)} is not a one-variable reduction a position "
                      "can hold")
            return
        if (role == "anchor") != bool(n.free) or (role == "anchor" and cls != "t"):
            self.fail(f"{where}: role {role} does not fit {name!r} "
                      f"({'anchored at t' if n.free else 'closed'})")
        need = "max" if n.rank == 1 else "kth"
        if mode != need:
            self.fail(f"{where}: retrieving {name!r} (rank {n.rank}) needs a {need} head, "
                      f"not {mode}")

    def information_sets(self) -> None:
        w = self.w
        if len(w.info) != len(w.layers) + 1:
            self.fail(f"information sets are given for {len(w.info)} states, expected "
                      f"{len(w.layers) + 1}")
            return
        sets, gens = _propagate(w)
        for l, entry in enumerate(w.info):
            for cls in CLASSES:
                kind, claimed, listed = entry[cls]
                if listed != len(claimed):
                    self.fail(f"information set I({cls},{l}) lists a term twice")
                    continue
                if kind == "union":
                    got = gens[l][cls]
                elif sets[l] is None:
                    self.fail(f"information set I({cls},{l}) is too large to list: give it as "
                              "{\"union\": [...]}")
                    continue
                else:
                    got = sets[l][cls]
                if claimed != got:
                    self.fail(f"information set I({cls},{l}) is {sorted(claimed)}, the heads give "
                              f"{sorted(got)}")

    def steps(self):
        w = self.w
        L = len(w.layers)
        established: dict[tuple[str, str], int] = {}
        used_heads: set = set()
        used_uses: dict = {}
        terms: list = []
        readouts = [s for s in w.steps if s.rule == "readout"]
        if len(readouts) != 1 or w.steps[-1].rule != "readout":
            self.fail("the target does not reach the readout: the last step, and only it, "
                      "must be the readout")
        for s in w.steps:
            errors = len(self.errors)
            expected = self.step(s, L, established, used_heads, used_uses)
            if len(self.errors) > errors:
                continue
            if sorted(s.costs) != sorted(t[:2] for t in expected):
                self.fail(f"{s}: cost terms {_terms(s.costs)} claimed, the rule gives "
                          f"{_terms([t[:2] for t in expected])}")
            if w.cheap and any(t[2] for t in expected):
                self.fail(f"{s}: a cost term that grows with T, in a witness that claims to "
                          "be T-bounded")
            terms += expected
            if s.rule != "readout":
                established[s.fact, s.at] = s.layer
        consumers = {p for s in w.steps for p in s.premises}
        for s in w.steps:
            if s.rule != "readout" and (s.fact, s.at) not in consumers:
                self.fail(f"{s}: no later step uses this fact (a dead fact)")
        return established, used_heads, used_uses, terms

    def step(self, s: _Step, L: int, established: dict, used_heads: set, used_uses: dict):
        w = self.w
        if s.rule == "readout":
            if s.fact != "y" or s.at != "T+1" or s.layer != L or s.head is not None:
                self.fail(f"{s}: the readout is fact y at T+1 at state {L}, with no head")
                return []
            if not self.premises(s, s.layer, established):
                return []
            if not _known(w.root, "T+1", None, set(s.premises)):
                self.fail(f"{s}: the premises do not give the target's value at T+1")
                return []
            return [_decode(w.root.w, w)]
        if not 1 <= s.layer <= L:
            self.fail(f"{s}: state {s.layer} is not one of 1..{L}")
            return []
        if (s.fact, s.at) in established:
            self.fail(f"{s}: {s.fact} at {s.at} is derived twice")
            return []
        head = None
        if s.rule in ("retrieve", "transfer", "aggregate", "positional"):
            heads = w.layers[s.layer - 1]
            if s.head is None or not 1 <= s.head <= len(heads):
                self.fail(f"{s}: names no head of layer {s.layer}")
                return []
            head = heads[s.head - 1]
            used_heads.add((s.layer, s.head))
        elif s.head is not None:
            self.fail(f"{s}: a {s.rule} step uses no head")
            return []
        node = self.w.reductions.get(s.fact[:-3] if s.fact.endswith("(t)") else s.fact)
        if node is not None and node.fact != s.fact:
            node = None
        position = _position(s.fact)
        if position not in w.root.pos:  # x(p) is a fact only for a position the tree reads
            position = None
        if s.rule == "retrieve":
            use = head.uses.get(s.at)
            if node is None or use is None or use[1] != node.name or use[0] == "copy":
                self.fail(f"{s}: head {s.head} does not retrieve {s.fact} at {s.at}")
                return []
            kinds = used_uses.setdefault((s.layer, s.head, s.at), set())
            if "retrieve" in kinds:
                self.fail(f"{s}: head {s.head}'s use at {s.at} already derived a fact")
                return []
            kinds.add("retrieve")
            if not self.premises(s, s.layer - 1, established):
                return []
            u = next(iter(node.free)) if node.free else None
            if not _scorable(node.kids[0], s.at, u, node.over[0], set(s.premises)):
                self.fail(f"{s}: the premises do not let the head score the candidates for "
                          f"{node.name!r}")
                return []
            out = [_decode(node.w, w)]
            return out + ([_kth(node.rank, node.key_dim, w)] if node.rank > 1 else [])
        if s.rule == "transfer":
            use = head.uses.get("T+1")
            closed = s.fact == EVERYTHING or (position is not None and w.positional) or \
                (node is not None and not node.free)
            if s.at != "T+1" or not closed:
                self.fail(f"{s}: only a closed fact moves from the tokens to T+1")
                return []
            if use is None or use[0] == "anchor":
                self.fail(f"{s}: head {s.head} retrieves no token at T+1")
                return []
            used_uses.setdefault((s.layer, s.head, "T+1"), set()).add("transfer")
            if s.premises != [(s.fact, "t")]:
                self.fail(f"{s}: the premise of a transfer is the same fact at t")
                return []
            if not self.premises(s, s.layer - 1, established):
                return []
            return [_decode(node.w, w)] if node is not None else []
        if s.rule == "aggregate":
            if s.fact != EVERYTHING or head.mode != "global" or s.premises:
                self.fail(f"{s}: a global head gives 1..T, from no premise")
            return []
        if s.rule == "positional":
            if position is None or head.mode != "pos" or position not in head.positions \
                    or s.premises:
                self.fail(f"{s}: head {s.head} does not attend to that position")
            return []
        # decode: from full information, any value a position can hold
        if s.fact == EVERYTHING or (node is None and position is None) or \
                (node is not None and node.free and s.at != "t"):
            self.fail(f"{s}: {s.fact} is not a value {s.at} can decode")
            return []
        if (position is not None or (node is not None and node.pos)) and not w.positional:
            self.fail(f"{s}: a fixed position is not identifiable without positional encoding")
            return []
        if s.premises != [(EVERYTHING, s.at)]:
            self.fail(f"{s}: decoding needs exactly the premise 1..T at {s.at}")
            return []
        if not self.premises(s, s.layer, established):
            return []
        return [_decode("T", w)]

    def premises(self, s: _Step, by: int, established: dict) -> bool:
        for f, c in s.premises:
            state = established.get((f, c))
            if state is None or state > by:
                self.fail(f"{s}: premise {f} at {c} is not derived by state {by}")
                return False
        return True

    def idle(self, used_heads: set, used_uses: dict) -> None:
        for l, hs in enumerate(self.w.layers, 1):
            for h, head in enumerate(hs, 1):
                if head.mode != "off" and (l, h) not in used_heads:
                    self.fail(f"layer {l} head {h}: an idle {head.mode} head (no step uses it; "
                              "an unused head must be off)")
                    continue
                for cls, (role, name) in head.uses.items():
                    if ("transfer" if role == "copy" else "retrieve") \
                            not in used_uses.get((l, h, cls), ()):
                        self.fail(f"layer {l} head {h}: its use at {cls} ({role} "
                                  f"{name or ''}) derives nothing")

    def fact_table(self, established: dict) -> None:
        w = self.w
        if len(w.facts) != len(w.layers) + 1:
            self.fail(f"facts are listed for {len(w.facts)} states, expected {len(w.layers) + 1}")
            return
        for l, entry in enumerate(w.facts):
            for cls in CLASSES:
                got = {f for (f, c), k in established.items() if c == cls and k <= l}
                if set(entry[cls]) != got or len(entry[cls]) != len(got):
                    self.fail(f"facts at state {l}, {cls}: {sorted(entry[cls])} listed, the "
                              f"steps give {sorted(got)}")

    def exponent(self, terms: list) -> Fraction | None:
        w = self.w
        if self.errors:
            return None
        value = max([Fraction(0)] + [t[1] for t in terms])
        if w.exponent < value:
            self.fail(f"claimed exponent {w.exponent} is lower than the derivation's {value}")
        elif w.exponent != value:
            self.fail(f"claimed exponent {w.exponent} differs from the derivation's {value}")
        dom = w.dominant
        claimed = (dom["law"], dom["value"], dom["grows"], dom["formula"], dom["where"])
        if dom["value"] != value or claimed not in terms:
            self.fail(f"dominant cost {dom['law']} = {dom['value']} is not a term of the "
                      f"derivation with its exponent {value}")
        elif abs(dom["float"] - float(value)) > 1e-9 * max(1.0, abs(float(value))):
            self.fail(f"dominant cost: float {dom['float']} is not the value {value}")
        return value


def _position(fact: str) -> int | None:
    m = re.fullmatch(r"x\(([1-9][0-9]{0,18})\)", fact)
    return int(m.group(1)) if m else None


def _at_least(n: int, r: int, k: int) -> bool:
    """comb(n, r) >= k without computing a huge binomial when n is huge."""
    if r == 1:
        return n >= k
    if n > 10**6:
        return n >= k or comb(min(n, k + r), r) >= k
    return comb(n, r) >= k


def _terms(terms) -> str:
    return "[" + ", ".join(f"{law} = {v}" for law, v in sorted(terms)) + "]"


# ---------------------------------------------------------------- built-in targets


def _comparison_tree(name: str, order: int, rank: int = 1, key_dim: int = 1,
                     op: str = "min") -> dict:
    """A flat comparison, normalised: one reduction over its order variables when its order
    is 1 or its rank >= 2, else a chain ``name``, ``g_name``, ``g2_name``, … (outermost first)."""
    vs = [f"{name}#{i}" for i in range(1, order + 1)]
    node: dict = {"op": "score", "name": name, "args": vs}
    if order == 1 or rank > 1:
        return {"op": op, "over": vs, "name": name, "rank": rank, "key_dim": key_dim, "of": node}
    for j in range(order - 1, -1, -1):
        label = name if j == 0 else (f"g_{name}" if j == 1 else f"g{j}_{name}")
        node = {"op": op, "over": [vs[j]], "name": label, "rank": 1, "key_dim": key_dim,
                "of": node}
    return node


def _alternation_tree(k: int) -> dict:
    def red(i: int, body: dict) -> dict:
        return {"op": "min" if i % 2 else "max", "over": [f"t{i}"], "name": f"a{i}", "rank": 1,
                "key_dim": 1, "of": body}

    def score(i: int) -> dict:
        return {"op": "score", "name": f"f{i}", "args": [f"t{i - 1}", f"t{i}"] if i > 1 else ["t1"]}

    if k == 1:
        return red(1, score(1))
    node = red(k, score(k))
    for i in range(k - 1, 1, -1):
        node = red(i, {"op": "sum", "of": [score(i), node]})
    return red(1, node)


def _builtin_tree(spec: str) -> dict | None:
    """The normalised tree of the built-in target ``spec`` names (docs/infoflow.md,
    "Built-ins"), or None when ``spec`` is not a built-in's name."""
    if spec == "pairwise-min":
        return _comparison_tree("pmin", 2)
    if spec == "triangle-center":
        return _comparison_tree("tri", 3)
    family, _, rest = spec.partition(":")
    allowed = {"kth-largest": ("k", "n"), "intrinsic-dim": ("D",), "alternation": ("k",)}
    if family not in allowed:
        return None
    p: dict[str, int] = {}
    for piece in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, raw = piece.partition("=")
        try:
            p[key] = int(raw)
        except ValueError:
            return None
        if not eq or key not in allowed[family] or p[key] < 1:
            return None
    if family == "kth-largest" and "k" in p:
        return _comparison_tree("kth", 1, p["k"], p.get("n", 1), "max")
    if family == "intrinsic-dim" and "D" in p and p["D"] <= 5000:
        kids = [_comparison_tree(f"m{i}", 2) for i in range(1, p["D"] + 1)]
        return kids[0] if len(kids) == 1 else {"op": "sum", "of": kids}
    if family == "alternation" and "k" in p and p["k"] <= MAX_DEPTH // 2:
        return _alternation_tree(p["k"])
    return None


# ---------------------------------------------------------------- entry points


def _rerun(smt2: str) -> str:
    import z3
    try:
        s = z3.Solver()
        s.set(timeout=PROOF_TIMEOUT_MS)
        s.add(z3.parse_smt2_string(smt2))
        return str(s.check())
    except z3.Z3Exception as exc:
        return f"not a query ({str(exc)[:80]})"


def check_document(name: str, data: object, proofs: bool = True) -> Report:
    """Check a witness document already read as JSON; InputError if it is not a witness."""
    w = read_witness(name, data)
    c = _Checker(w)
    exponent = c.run()
    bounded = None if exponent is None else not any(t[2] for t in c.terms)
    report = Report(False, c.errors, exponent, bounded)
    if proofs:
        for i, (claim, smt2) in enumerate(w.proofs, 1):
            answer = _rerun(smt2)
            report.proofs.append((claim, answer))
            if answer != "unsat":
                report.errors.append(f"proof {i} ({claim}): z3 says {answer}, not unsat")
    report.valid = not report.errors
    arch = f"T={w.T} d={w.d} E={w.E} heads={','.join(map(str, w.heads))} " \
           f"positional={'yes' if w.positional else 'no'}"
    report.summary = f"{w.target}, {arch}"
    return report


def check_file(path: str, proofs: bool = True) -> Report:
    from tfcert.verify.formats import load_document
    return check_document(str(path), load_document(path).value, proofs)
