"""``tfcert infoflow check FILE``: an independent checker for InfoFlow witness files.

It shares nothing with the search but the file format (docs/infoflow.md, "Witness files"): it
imports no other module of ``tfcert.infoflow``, reads the tree, the heads and the steps itself,
and re-implements the rules, the cost laws and the information-set propagation from the docs.
The only outside code it uses is the verifier's JSON loader (to read the file with its guards)
and, for the queries it builds, z3's SMT-LIB2 parser.

A witness is valid when: the architecture and the tree fit; every head's mode and uses are
legal; the information sets are those the heads give; every step's rule applies, with its head
doing what the step says and every premise derived by an earlier step at an early enough state;
the readout step reaches the target; no head is idle and no fact is dead (every fact is a
premise of a later step); the per-state fact table is what the steps give; every step's cost
terms are the rule's; the claimed exponent is the maximum of them (not lower, not higher), and a
witness that claims to be T-bounded uses no term that grows with T (and one that claims not to
be uses one). Each proof names the statement it stands for; the checker builds that statement
and its SMT-LIB2 query itself, from the file's tree and architecture (the search's query in the
file is not read), and certifies it when z3 answers unsat. The report lists every statement
certified.
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
    certified: list[dict] = field(default_factory=list)  # kind, statement, smt2 (None: replayed)
    not_checked: list[dict] = field(default_factory=list)  # kind, statement (proofs=False)
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
        p = r.obj(f"$.proofs[{i}]", p, ("kind", "claim", "smt2"), ("layer", "total", "vectors"))
        _smt2(r, i, p["smt2"])  # the search's query, for any solver; the checker builds its own
        layer = p.get("layer")
        w.proofs.append((r.text(f"$.proofs[{i}].kind", p["kind"], KINDS),
                         None if layer is None else r.integer(f"$.proofs[{i}].layer", layer, 1),
                         _pareto_spec(r, i, p, len(heads)),
                         r.text(f"$.proofs[{i}].claim", p["claim"])))
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


def _pareto_spec(r: _Reader, i: int, p: dict, L: int) -> tuple[int, list] | None:
    """A pareto statement's heads in all and head vectors (L entries each), if it gives them."""
    if "total" not in p and "vectors" not in p:
        return None
    path = f"$.proofs[{i}]"
    vectors = r.list(f"{path}.vectors", p.get("vectors"))
    for j, v in enumerate(vectors):
        if len(r.list(f"{path}.vectors[{j}]", v)) != L:
            raise r.bad(f"{path}.vectors[{j}]", f"expected {L} head counts, one per layer")
    return (r.integer(f"{path}.total", p.get("total"), 0, MAX_HEADS * L),
            [[r.integer(f"{path}.vectors[{j}][{l}]", h, 0, MAX_HEADS) for l, h in enumerate(v)]
             for j, v in enumerate(vectors)])


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
    A term is (law, value at T, grows with T, formula, parameters, the exponent in T)."""
    where, a = {"d": w.d, "E": w.E}, _theorem3(T0, w)
    if T0 == "T":
        return ("Theorem 3, T0 = T", a.at(w.T), True, "max(0, T*d/E - 1)", where, a)
    return (f"Theorem 3, T0 = {T0}", a.at(w.T), False, f"max(0, {T0}*d/E - 1)", where, a)


def _kth(k: int, n: int, w: _Witness) -> tuple:
    """Theorem 2: the k-th largest of n-dimensional keys costs eps^-((T-k-1)/(n+1))."""
    a = _theorem2(k, n)
    return (f"Theorem 2, k = {k}", a.at(w.T), True, "max(0, (T-k-1)/(n+1))", {"k": k, "n": n}, a)


@dataclass(frozen=True)
class _Term:
    """A cost exponent max(0, slope*T + offset); ``grows`` with T when slope > 0."""

    slope: Fraction
    offset: Fraction

    @property
    def grows(self) -> bool:
        return self.slope > 0

    def at(self, T: int) -> Fraction:
        return max(Fraction(0), self.slope * T + self.offset)


def _theorem3(T0: int | str, w: _Witness) -> _Term:
    """T0*d/E - 1, for T0 tokens or (T0 = "T") full information."""
    if T0 == "T":
        return _Term(Fraction(w.d, w.E), Fraction(-1))
    return _Term(Fraction(0), Fraction(T0 * w.d, w.E) - 1)


def _theorem2(k: int, n: int) -> _Term:
    """(T-k-1)/(n+1)."""
    return _Term(Fraction(1, n + 1), Fraction(-(k + 1), n + 1))


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
        if dom["value"] != value or claimed not in [t[:5] for t in terms]:
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


# ---------------------------------------------------------------- lower bounds: the checker's own queries
#
# A proof entry names the statement it stands for (``kind``); the checker builds that
# statement's query itself, from the file's tree and architecture and the rules of
# docs/infoflow.md, as SMT-LIB2 text, and re-runs it: unsat certifies the statement. The
# encoding is the calculus over all derivations (any heads within the bounds, any uses), so
# unsat means no derivation of the stated kind exists. The file's own ``smt2`` (the search's
# query) is not read: it cannot stand in for the statement.

KINDS = ("least_exponent", "exponent_every_T", "no_derivation", "not_bounded",
         "not_bounded_any_heads", "fewer_heads", "pareto", "fewer_layers", "stable")
_NEEDS_DERIVATION = ("least_exponent", "exponent_every_T")


def _real(x: Fraction) -> str:
    text = f"{abs(x.numerator)}.0" if x.denominator == 1 else \
        f"(/ {abs(x.numerator)}.0 {x.denominator}.0)"
    return f"(- {text})" if x < 0 else text


def _all(parts) -> str:
    parts = [p for p in parts if p != "true"]
    if "false" in parts:
        return "false"
    return "true" if not parts else parts[0] if len(parts) == 1 else f"(and {' '.join(parts)})"


def _any(parts) -> str:
    parts = [p for p in parts if p != "false"]
    if "true" in parts:
        return "true"
    return "false" if not parts else parts[0] if len(parts) == 1 else f"(or {' '.join(parts)})"


def _min_T(root: _Node) -> int:
    """The least T at which every reduction has enough candidates and every fixed position
    exists: the T from which the statements hold."""
    least, stack = 1, [root]
    while stack:
        n = stack.pop()
        stack.extend(n.kids)
        if n.kind == "score":
            least = max(least, *n.pos, 1)
        elif n.kind == "reduce":
            k, r = len(n.free), len(n.over)
            T = k + r
            if r == 1:
                T = k + n.rank
            else:
                while not _at_least(T - k, r, n.rank):  # doubling, then bisection
                    T *= 2
                lo = max(k + r, T // 2)
                while lo < T:
                    mid = (lo + T) // 2
                    lo, T = (mid + 1, T) if not _at_least(mid - k, r, n.rank) else (lo, mid)
            least = max(least, T)
    return least


class _Query:
    """The calculus over ``L`` layers as SMT-LIB2 (docs/infoflow.md, "Facts and rules"): per
    state a Boolean per fact, per layer a Boolean per use (a retrieval of a reduction at a
    class, a copy at T+1 on a max or on a kth head, a global head, a position-specific head),
    an integer T and a real B bounding every cost exponent used; ``cheap``: no term that grows
    with T is allowed. Every fact true at a state holds at the state before or has a rule whose
    premises and cost guards hold."""

    def __init__(self, w: _Witness, L: int, cheap: bool, goal: bool = True) -> None:
        self.w, self.L, self.cheap = w, L, cheap
        tops = [n for n in w.reductions.values() if n.holdable]
        keys = [(n.fact, c) for n in tops for c in (("t",) if n.free else CLASSES)]
        keys += [(EVERYTHING, c) for c in CLASSES]
        positions = sorted(w.root.pos) if w.positional else []
        keys += [(f"x({p})", c) for p in positions for c in CLASSES]
        self.keys = {k: i for i, k in enumerate(keys)}
        self.uses = [(n, c) for n in tops if len(n.over) == 1
                     for c in (("t",) if n.free else CLASSES)]
        self.use_index = {(n.name, c): i for i, (n, c) in enumerate(self.uses)}
        self.positions = bool(positions)
        self.lines = ["(set-logic QF_LIRA)", "(declare-const T Int)", "(declare-const B Real)",
                      f"(assert (>= T {_min_T(w.root)}))", "(assert (>= B 0.0))"]
        for l in range(1, L + 1):
            names = [self.fact(k, l) for k in keys] + [self.use(n, c, l) for n, c in self.uses]
            names += [f"copymax_{l}", f"copykth_{l}", f"global_{l}"]
            names += [f"pos_{l}"] if self.positions else []
            self.lines += [f"(declare-const {x} Bool)" for x in names]
        for l in range(1, L + 1):
            self.layer(l)
        if goal:
            self.assert_(_all([self.avail(w.root, "T+1", None, L),
                               self.guard([_theorem3(w.root.w, w)])]))

    # names and literals
    def fact(self, key, l: int) -> str:
        return f"fact{self.keys[key]}_{l}"

    def lit(self, key, l: int) -> str:
        return self.fact(key, l) if l >= 1 and key in self.keys else "false"

    def use(self, n: _Node, cls: str, l: int) -> str:
        """Names are numbered, never the file's names (which could hold any text)."""
        return f"use{self.use_index[n.name, cls]}_{l}"

    def assert_(self, formula: str) -> None:
        self.lines.append(f"(assert {formula})")

    # the rules
    def guard(self, terms: list[_Term]) -> str:
        if self.cheap and any(t.grows for t in terms):
            return "false"
        return _all([f"(>= B {self.affine(t)})" for t in terms])

    def affine(self, t: _Term) -> str:
        if t.slope == 0:
            return _real(t.offset)
        return f"(+ (* {_real(t.slope)} (to_real T)) {_real(t.offset)})"

    def avail(self, n: _Node, cls: str, own: str | None, l: int) -> str:
        if not n.free <= ({own} if own else set()):
            return "false"
        if n.kind == "score":
            return _all([self.lit((f"x({p})", cls), l) for p in sorted(n.pos)])
        if n.kind == "combine":
            return _all([self.avail(k, cls, own, l) for k in n.kids])
        return self.lit((n.fact, cls), l) if n.holdable else "false"

    def scorable(self, n: _Node, cls: str, u: str | None, v: str, l: int) -> str:
        if not n.free <= {u, v}:
            return "false"
        sides = [self.avail(n, cls, u, l), self.avail(n, "t", v, l)]
        if n.kind == "score":
            sides.append(_all([_any([self.lit((f"x({p})", cls), l), self.lit((f"x({p})", "t"), l)])
                               for p in sorted(n.pos)]))
        elif n.kind == "combine":
            sides.append(_all([self.scorable(k, cls, u, v, l) for k in n.kids]))
        return _any(sides)

    def retrieve_terms(self, n: _Node) -> list[_Term]:
        terms = [_theorem3(n.w, self.w)]
        if n.rank > 1:
            terms.append(_theorem2(n.rank, n.key_dim))
        return terms

    def layer(self, l: int) -> None:
        w = self.w
        for n, c in self.uses:
            u = next(iter(n.free)) if n.free else None
            self.assert_(f"(=> {self.use(n, c, l)} "
                         + _all([self.scorable(n.kids[0], c, u, n.over[0], l - 1),
                                 self.guard(self.retrieve_terms(n))]) + ")")
        at_readout = [f"copymax_{l}", f"copykth_{l}"] + [self.use(n, c, l) for n, c in self.uses
                                                        if c == "T+1"]
        for key in self.keys:
            f, c = key
            node = w.reductions.get(f[:-3] if f.endswith("(t)") else f)
            reasons = [self.lit(key, l - 1)]
            if node is not None and len(node.over) == 1:
                reasons.append(self.use(node, c, l))
            if c == "T+1" and (f, "t") in self.keys:  # a closed fact moves with a retrieval
                reasons.append(_all([self.lit((f, "t"), l - 1), _any(at_readout), self.guard(
                    [_theorem3(node.w, w)] if node is not None else [])]))
            if f == EVERYTHING:
                reasons.append(f"global_{l}")
            elif node is None:
                reasons.append(f"pos_{l}")
            if f != EVERYTHING and (w.positional or node is None or not node.pos):
                reasons.append(_all([self.lit((EVERYTHING, c), l),
                                     self.guard([_theorem3("T", w)])]))
            self.assert_(f"(=> {self.fact(key, l)} {_any(reasons)})")
            if l > 1:
                self.assert_(f"(=> {self.lit(key, l - 1)} {self.fact(key, l)})")

    def sides(self, l: int) -> list[list[str]]:
        """The four ways a layer's uses pair on heads: max uses at one class and kth uses at
        one class, plus the global and positional heads (a head serves one use at t and one
        at T+1; a copy at T+1 rides on a max or a kth head)."""
        group = {(c, m): [self.use(n, c, l) for n, c2 in self.uses if c2 == c
                          and ("max" if n.rank == 1 else "kth") == m] for c in CLASSES
                 for m in ("max", "kth")}
        group["T+1", "max"].append(f"copymax_{l}")
        group["T+1", "kth"].append(f"copykth_{l}")
        extra = [f"global_{l}"] + ([f"pos_{l}"] if self.positions else [])
        return [group[a, "max"] + group[b, "kth"] + extra for a in CLASSES for b in CLASSES]

    def heads_at_most(self, l: int, m: int) -> str:
        return _all([f"(<= (+ 0 {' '.join(f'(ite {x} 1 0)' for x in side)}) {m})"
                     for side in self.sides(l)])

    def total_at_most(self, K: int) -> str:
        """All layers together fit in K heads: an integer count per layer, at least each of
        its four pairings' sums."""
        counts = [f"heads_{l}" for l in range(1, self.L + 1)]
        self.lines += [f"(declare-const {n} Int)" for n in counts]
        for l, n in enumerate(counts, 1):
            self.lines += [f"(assert (>= {n} (+ 0 {' '.join(f'(ite {x} 1 0)' for x in side)})))"
                           for side in self.sides(l)]
        return f"(<= (+ 0 {' '.join(counts)}) {K})"

    def below(self, v: list[int]) -> str:
        """Some layer has fewer heads than in v."""
        return _any([self.heads_at_most(l, m - 1) for l, m in enumerate(v, 1) if m])

    def text(self, extra: list[str]) -> str:
        return "\n".join(self.lines + [f"(assert {e})" for e in extra] + ["(check-sat)", ""])


def _shape(terms: list[_Term], T0: int) -> list[_Term]:
    """The witness's exponent as a function of T >= T0, max(0, terms), dominated terms
    dropped (no larger at T0 and growing no faster), ordered by (slope, offset)."""
    distinct = sorted(set(terms), key=lambda t: (t.slope, t.offset))
    return [t for t in distinct if not any(
        o != t and o.slope >= t.slope and o.slope * T0 + o.offset >= t.slope * T0 + t.offset
        for o in distinct)]


def _affine_text(t: _Term) -> str:
    s, o = t.slope, t.offset
    if s == 0:
        return str(o)
    lead = "T" if s == 1 else f"{s}*T"
    return lead if o == 0 else f"{lead} {'-' if o < 0 else '+'} {abs(o)}"


def _heads_text(heads: list) -> str:
    return "[" + ", ".join("any" if h is None else str(h) for h in heads) + "]"


def _closure(w: _Witness) -> tuple[list[set], bool]:
    """The facts derivable at states 0, 1, … with every T-bounded rule in every layer (any
    number of heads), up to the state after which they stop growing; whether the target's
    value reaches the readout on the way. A state's successor depends on the state only."""
    states: list[set] = [set()]
    holdable = [n for n in w.reductions.values() if n.holdable and len(n.over) == 1 and n.rank == 1]
    while len(states) <= MAX_LAYERS + 1:
        have = states[-1]
        new = set(have) | {(EVERYTHING, c) for c in CLASSES}
        if w.positional:
            new |= {(f"x({p})", c) for p in w.root.pos for c in CLASSES}
        for n in holdable:
            u = next(iter(n.free)) if n.free else None
            for c in ("t",) if n.free else CLASSES:
                if _scorable(n.kids[0], c, u, n.over[0], have):
                    new.add((n.fact, c))
        new |= {(f, "T+1") for f, c in have if c == "t" and (
            f == EVERYTHING or f.startswith("x(") or not w.reductions[f[:-3] if f.endswith("(t)") else f].free)}
        if _known(w.root, "T+1", None, new):
            return states + [new], True
        if new == have:
            return states, False
        states.append(new)
    return states, False


def _statement(w: _Witness, terms: list[_Term], kind: str, layer: int | None,
               pareto: tuple[int, list] | None):
    """(the statement, the query's layers, cheap, goal, extra assertions) for a proof entry of
    ``kind``, built from the file's tree and architecture; or an error message."""
    heads, L, Tmin = list(w.heads), len(w.heads), _min_T(w.root)
    if (layer is not None) != (kind == "fewer_heads"):
        return "only a fewer_heads statement names a layer, and it must"
    if (pareto is not None) != (kind == "pareto"):
        return "only a pareto statement gives total and vectors, and it must"
    if kind in _NEEDS_DERIVATION and not w.reachable:
        return f"a {kind} statement needs the derivation it bounds"
    if kind == "no_derivation":
        if w.reachable:
            return "the file has a derivation"
        return (f"no derivation reaches the target at the readout, for every T >= {Tmin}",
                L, False, True, lambda q: [q.heads_at_most(l, h) for l, h in enumerate(heads, 1)])
    if kind == "least_exponent":
        return (f"no derivation has exponent < {w.exponent} at T = {w.T}", L, False, True,
                lambda q: [f"(= T {w.T})", f"(< B {_real(w.exponent)})"]
                + [q.heads_at_most(l, h) for l, h in enumerate(heads, 1)])
    if kind == "exponent_every_T":
        shape = _shape(terms, w.T)
        text = "max(0, " + ", ".join(_affine_text(t) for t in shape) + ")"
        return (f"for every T >= {w.T}, no derivation has exponent < {text} (the witness's "
                "exponent at that T)", L, False, True,
                lambda q: [f"(>= T {w.T})", _any([f"(< B {q.affine(t)})" for t in shape])]
                + [q.heads_at_most(l, h) for l, h in enumerate(heads, 1)])
    if kind == "not_bounded":
        return (f"no T-bounded derivation with heads {heads}, for every T >= {Tmin}", L, True,
                True, lambda q: [q.heads_at_most(l, h) for l, h in enumerate(heads, 1)])
    if kind == "not_bounded_any_heads":
        return (f"no T-bounded derivation with {L} layer(s) and any number of heads, for every "
                f"T >= {Tmin}", L, True, True, lambda q: [])
    if kind == "fewer_heads":
        if not 1 <= layer <= L or heads[layer - 1] < 1:
            return f"layer {layer} has no head to take away"
        shape = heads[:layer - 1] + [heads[layer - 1] - 1] + [None] * (L - layer)
        return (f"no T-bounded derivation with {shape[layer - 1]} head(s) in layer {layer} "
                f"(heads {_heads_text(shape)}), for every T >= {Tmin}", L, True, True,
                lambda q: [q.heads_at_most(l, h) for l, h in enumerate(shape, 1) if h is not None])
    if kind == "pareto":
        K, vectors = pareto
        if not vectors:
            return (f"no T-bounded derivation with at most {K} head(s) in all ({L} layer(s)), for "
                    f"every T >= {Tmin}", L, True, True, lambda q: [q.total_at_most(K)])
        text = "; ".join(",".join(map(str, v)) for v in vectors)
        return (f"every T-bounded derivation with at most {K} head(s) in all ({L} layer(s)) has "
                f"heads at or above one of {text}, for every T >= {Tmin}", L, True, True,
                lambda q: [q.total_at_most(K)] + [q.below(v) for v in vectors])
    if kind == "fewer_layers":
        if L < 2:
            return "one layer has no fewer layers"
        return (f"no T-bounded derivation with {L - 1} layer(s) (nor fewer: leading layers may be "
                f"all off) and any number of heads, for every T >= {Tmin}", L - 1, True, True,
                lambda q: [])
    # stable: the closure stops growing at state s before reaching the target; at state s+1
    # no fact outside state s's holds, whatever the heads
    states, reached = _closure(w)
    s = len(states) - 1
    if reached or min(s + 1, MAX_LAYERS) != L:
        return (f"the T-bounded facts reach the target at state {s}" if reached else
                f"the T-bounded facts stop growing at state {s}: the statement is about "
                f"{min(s + 1, MAX_LAYERS)} layer(s), the architecture has {L}")
    outside = sorted(set(_Query(w, 0, True, goal=False).keys) - states[s])
    return (f"no fact beyond those of state {s} holds at state {L} (any heads, every "
            f"T >= {Tmin}): the facts have stopped growing, so no number of layers helps", L,
            True, False, lambda q: [_any([q.lit(k, L) for k in outside])])


def _certify(w: _Witness, terms: list[_Term], kind: str, layer: int | None,
             pareto: tuple[int, list] | None, claim: str) -> tuple[str, str | None, str]:
    """(the statement, its query or None, an error or ""): the claim must be the statement the
    checker builds for ``kind`` from this file's tree and architecture."""
    built = _statement(w, terms, kind, layer, pareto)
    if isinstance(built, str):
        return claim, None, f"{kind}: {built}"
    statement, L, cheap, goal, extra = built
    if claim != statement:
        return statement, None, (f"{kind}: claim {_short(claim)} stated, the checker's statement "
                                 f"is {_short(statement)}")
    q = _Query(w, L, cheap, goal)
    return statement, q.text(extra(q)), ""


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
    """Check a witness document already read as JSON; InputError if it is not a witness. The
    report lists the statements certified: the derivation's (replayed step by step) and each
    proof's (the checker's own query, re-run unsat); with ``proofs=False`` the latter are
    listed as not checked."""
    w = read_witness(name, data)
    c = _Checker(w)
    exponent = c.run()
    bounded = None if exponent is None else not any(t[2] for t in c.terms)
    report = Report(False, c.errors, exponent, bounded)
    heads = ",".join(map(str, w.heads))
    if exponent is not None:
        report.certified.append({"kind": "derivation", "statement": (
            f"a derivation with heads [{heads.replace(',', ', ')}] reaches the target with "
            f"exponent {exponent} at T = {w.T}" + (", and no cost term grows with T" if bounded
                                                     else "")), "smt2": None})
    affine = [t[5] for t in c.terms]
    if proofs and exponent is not None and not c.errors:
        answer = _rerun(_admits(w, exponent))
        if answer != "sat":
            report.errors.append(f"internal: the checker's encoding does not admit the derivation "
                                 f"it replayed (z3 says {answer}); no lower bound is certified")
            proofs = False
    for i, (kind, layer, pareto, claim) in enumerate(w.proofs, 1):
        statement, query, error = _certify(w, affine, kind, layer, pareto, claim)
        if error:
            report.errors.append(f"proof {i}: {error}")
        elif not proofs:
            report.not_checked.append({"kind": kind, "statement": statement})
        else:
            answer = _rerun(query)
            if answer == "unsat":
                report.certified.append({"kind": kind, "statement": statement, "smt2": query})
            else:
                report.errors.append(f"proof {i} ({statement}): z3 says {answer} on the "
                                     "checker's query, not unsat")
    if not w.reachable and not report.certified:
        report.errors.append("no derivation, and no statement certified: the file claims "
                             "nothing this checker has checked")
    report.valid = not report.errors
    arch = f"T={w.T} d={w.d} E={w.E} heads={heads} positional={'yes' if w.positional else 'no'}"
    report.summary = f"{w.target}, {arch}"
    return report


def _admits(w: _Witness, exponent: Fraction) -> str:
    """The query "this derivation's uses, at its T, heads and exponent": sat unless the
    checker's encoding misses a derivation its replay accepts (then its unsat answers would
    prove nothing)."""
    q = _Query(w, len(w.heads), False)
    extra = [f"(= T {w.T})", f"(<= B {_real(exponent)})"]
    extra += [q.heads_at_most(l, h) for l, h in enumerate(w.heads, 1)]
    for l, hs in enumerate(w.layers, 1):
        for head in hs:
            if head.mode == "global":
                extra.append(f"global_{l}")
            elif head.mode == "pos":
                extra.append(f"pos_{l}")
            for cls, (role, node) in head.uses.items():
                extra.append(f"copy{head.mode}_{l}" if role == "copy" else
                             q.use(w.reductions[node], cls, l))
    return q.text(extra)


def check_file(path: str, proofs: bool = True) -> Report:
    from tfcert.verify.formats import load_document
    return check_document(str(path), load_document(path).value, proofs)
