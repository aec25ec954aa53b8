"""z3 decides InfoFlow derivations over the two position classes (tok, out).

Encoding (docs/infoflow.md, "Decisions with z3"): per state l, a Boolean per fact; per layer, a
Boolean per possible head *use* (a retrieval for a reduction at a class, a copy at T+1, a global
head, a position-specific head) — heads are anonymous, so there is no head index and no
symmetry among heads to search through. A layer's heads are *counted*: max-retrieval uses at t
and at T+1 pair up on one head, likewise k-th retrievals, so the layer needs
max(#max at t, #max at T+1) + max(#kth at t, #kth at T+1) + #global + #positional heads;
"at most h heads" is four cardinality constraints (one per pairing), and "any number of heads"
is none. T is an integer
variable: T = value for claims at one T, T >= bound for claims about every T. Every true fact
needs the residual or a rule whose premises hold and whose cost terms are all <= the real B.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import z3

from tfcert.errors import InputError
from tfcert.infoflow.architecture import MAX_HEADS, MAX_LAYERS, Architecture
from tfcert.infoflow.calculus import (ALL, CLASSES, Rules, SetLogic, cheap as is_cheap,
                                      depth_closure)
from tfcert.infoflow.costs import CostTerm, worst
from tfcert.infoflow.propagation import class_generators, class_sets
from tfcert.infoflow.targets import Target
from tfcert.infoflow.witness import Derivation, HeadPlan, HeadUse, Step


INFO_CAP = 4096  # past this many terms in one set, witnesses give information sets as unions
LOGIC = "(set-logic QF_LIRA)\n"  # what a proof's text opens with: any SMT-LIB2 solver reads it alone


def _q(x: Fraction, ctx: z3.Context) -> z3.ArithRef:
    return z3.RealVal(f"{x.numerator}/{x.denominator}", ctx)


class _Z3Logic:
    def __init__(self, X: dict, l: int, ctx: z3.Context) -> None:
        self.X, self.l, self.ctx = X, l, ctx

    def lit(self, key):
        return self.X.get((key, self.l), z3.BoolVal(False, self.ctx))

    def all(self, parts):
        parts = list(parts)
        return z3.And(parts) if parts else z3.BoolVal(True, self.ctx)

    def any(self, parts):
        parts = list(parts)
        return z3.Or(parts) if parts else z3.BoolVal(False, self.ctx)

    def false(self):
        return z3.BoolVal(False, self.ctx)


class _Encoding:
    """The constraints for L layers, for every T >= ``T_from`` and any number of heads; a query
    narrows them with ``where(T=…, heads=…)``, checked in a scope of its own."""

    def __init__(self, rules: Rules, L: int, cheap: bool, T_from: int,
                 goal: bool = True) -> None:
        self.rules, self.L, self.cheap = rules, L, cheap
        # a context of its own: the same query always gets the same model (in a shared context
        # the terms left by earlier queries change z3's search order, and so the witness)
        self.ctx = ctx = z3.Context()
        self.T = z3.Int("T", ctx)
        self.B = z3.Real("B", ctx)
        false = z3.BoolVal(False, ctx)
        self._guards: dict = {}
        self._plain: dict = {}  # an at-most's id -> (it, kept so the id is not reused; lits, m)
        cons: list = [self.T >= T_from, self.B >= 0]
        X = {}
        for l in range(L + 1):
            for f, c in rules.keys:
                X[(f, c), l] = z3.Bool(f"{f}@{c}_{l}", ctx) if l else false
        self.X = X
        self.ret = {(l, n, c): z3.Bool(f"ret_{rules.nodes[n].name}@{c}_layer{l + 1}", ctx)
                    for l in range(L) for n, c in rules.retrievals}
        self.copy = {l: z3.Bool(f"copy_layer{l + 1}", ctx) for l in range(L)}
        self.glob = {l: z3.Bool(f"global_layer{l + 1}", ctx) for l in range(L)}
        self.pos = {l: z3.Bool(f"positional_layer{l + 1}", ctx) if rules.uses_positions
                    else false for l in range(L)}
        self.groups: list = []
        nodes = rules.nodes
        for l in range(L):
            lg = _Z3Logic(X, l, ctx)
            for n, c in rules.retrievals:
                cons.append(z3.Implies(self.ret[l, n, c], z3.And(
                    rules.retrieval_premises(n, c, lg), self.guard(rules.retrieve_terms(n)))))
            outs = [self.ret[l, n, c] for n, c in rules.retrievals if c == "out"]
            transfer = z3.Or([self.copy[l], *outs])
            for key in rules.keys:
                f, c = key
                reasons = [X[key, l]]
                node = rules.node_of.get(f)
                if node is not None and node.retrievable:
                    reasons.append(self.ret[l, node.id, c])
                if c == "out" and f in rules.closed:
                    reasons.append(z3.And(X[(f, "tok"), l], transfer,
                                          self.guard(rules.transfer_terms(f))))
                if f == ALL:
                    reasons.append(self.glob[l])
                elif f.startswith("x("):
                    reasons.append(self.pos[l])
                if rules.decodable(f):
                    reasons.append(z3.And(X[(ALL, c), l + 1], self.guard(rules.decode_terms())))
                cons.append(z3.Implies(X[key, l + 1], z3.Or(reasons)))
                cons.append(z3.Implies(X[key, l], X[key, l + 1]))

            groups = {(cls, mode): [self.ret[l, n, c] for n, c in rules.retrievals
                                    if c == cls and nodes[n].mode == mode]
                      for cls in CLASSES for mode in ("max", "kth")}
            groups["out", "max"].append(self.copy[l])
            extra = [self.glob[l]] + ([self.pos[l]] if rules.uses_positions else [])
            self.groups.append((groups, extra))
        if goal:
            cons += [rules.goal(_Z3Logic(X, L, ctx)), self.guard(rules.readout_terms())]
        self.solver = z3.Solver(ctx=ctx)
        self.solver.add(cons)

    def where(self, T: int | None = None, T_from: int | None = None,
              heads: tuple[int | None, ...] | None = None) -> list:
        """Constraints for one query: T = a value, or T >= a bound; at most heads[l] heads in
        layer l+1 (None: any number)."""
        out = []
        if T is not None:
            out.append(self.T == T)
        if T_from is not None:
            out.append(self.T >= T_from)
        for l, h in enumerate(heads or ()):
            if h is not None:
                out += self.head_bound(l, h)
        return out

    def head_bound(self, l: int, m: int) -> list:
        """Layer l+1 fits in m heads: a max head serves one use at t and one at T+1, so the
        layer needs max(#max at t, #max at T+1) + max(#kth at t, #kth at T+1) + #global +
        #positional heads; "<= m" is four cardinality constraints, one per pairing of sides."""
        groups, extra = self.groups[l]
        out = []
        for a in CLASSES:
            for b in CLASSES:
                lits = groups[a, "max"] + groups[b, "kth"] + extra
                out.append(self._at_most(lits, m) if lits else z3.BoolVal(m >= 0, self.ctx))
        return out

    def _at_most(self, lits: list, m: int) -> z3.BoolRef:
        """z3's at-most (its search is faster on it), kept with what its SMT-LIB2 form, a sum
        of 0/1 terms (at-most is z3's own), is built from when a proof's text is written."""
        bound = z3.AtMost(*lits, m)
        self._plain[bound.get_id()] = (bound, lits, m)
        return bound

    def _sum_at_most(self, lits: list, m: int) -> z3.BoolRef:
        one, zero = z3.IntVal(1, self.ctx), z3.IntVal(0, self.ctx)
        return z3.Sum([z3.If(b, one, zero) for b in lits]) <= m

    def _plain_form(self, a: z3.BoolRef) -> z3.BoolRef:
        kept = self._plain.get(a.get_id())
        return a if kept is None else self._sum_at_most(*kept[1:])

    def needed(self, plan: list[dict]) -> list[int]:
        """The heads each layer of a plan uses."""
        out = []
        for layer in plan:
            count = {(c, m): 0 for c in CLASSES for m in ("max", "kth")}
            for n, c in layer["ret"]:
                count[c, self.rules.nodes[n].mode] += 1
            count["out", "max"] += layer["copy"]
            out.append(max(count["tok", "max"], count["out", "max"])
                       + max(count["tok", "kth"], count["out", "kth"])
                       + layer["glob"] + layer["pos"])
        return out

    def guard(self, terms: tuple[CostTerm, ...]) -> z3.BoolRef:
        key = tuple((t.slope, t.offset) for t in terms)
        if key not in self._guards:
            self._guards[key] = self._guard(terms)
        return self._guards[key]

    def _guard(self, terms: tuple[CostTerm, ...]) -> z3.BoolRef:
        parts = []
        for t in terms:
            if self.cheap and t.grows:
                return z3.BoolVal(False, self.ctx)
            parts.append(self.B >= self.affine(t))
        return z3.And(parts) if parts else z3.BoolVal(True, self.ctx)

    def q(self, x: Fraction) -> z3.ArithRef:
        return _q(x, self.ctx)

    def affine(self, t: CostTerm) -> z3.ArithRef:
        """slope*T + offset, the term before the clamp at 0 (B >= 0 is asserted apart)."""
        return self.q(t.offset) if t.slope == 0 else self.q(t.slope) * z3.ToReal(self.T) + \
            self.q(t.offset)

    def check(self, *extra) -> z3.CheckSatResult:
        if not extra:
            return self.solver.check()
        self.solver.push()
        self.solver.add(*extra)
        try:
            return self.solver.check()
        finally:
            self.solver.pop()

    def unsat_query(self, *extra) -> str:
        """The SMT-LIB2 text of this query plus ``extra``, at-most written as sums (the text any
        SMT-LIB2 solver reads); the query of that text is checked unsat before it is returned."""
        plain = z3.Solver(ctx=self.ctx)  # head bounds are asserted alone, never inside another term
        plain.add([self._plain_form(a) for a in [*self.solver.assertions(), *extra]])
        result = plain.check()
        if result != z3.unsat:
            raise AssertionError(f"expected unsat, z3 says {result}")
        text = plain.to_smt2()
        if "(_ at-most" in text:
            raise AssertionError("an at-most inside another term: not SMT-LIB2")
        return LOGIC + text

    def fits(self, l: int, m: int, plain: bool = False) -> z3.BoolRef:
        """Layer l+1 fits in m heads as one term: z3's at-most, or (``plain``, for a proof's
        text, where it sits inside another term) sums of 0/1 terms."""
        if not plain:
            return z3.And(self.head_bound(l, m))
        groups, extra = self.groups[l]
        return z3.And([self._sum_at_most(lits, m) if lits else z3.BoolVal(m >= 0, self.ctx)
                       for lits in (groups[a, "max"] + groups[b, "kth"] + extra
                                    for a in CLASSES for b in CLASSES)])

    def below(self, v: tuple[int, ...], plain: bool = False) -> z3.BoolRef:
        """The heads are not at or above v: some layer has fewer than v's."""
        return z3.Or([self.fits(l, m - 1, plain) for l, m in enumerate(v) if m] or
                     [z3.BoolVal(False, self.ctx)])

    def count_heads(self, cap: int) -> None:
        """Per layer, Booleans "at least j heads", j up to ``cap`` or its largest pairing
        (unary, so the total is one more at-most and z3 stays in cardinality reasoning): each
        pairing's uses are at most the layer's true ones, i.e. uses + the false ones <= their
        number. Asserted for good."""
        self.counts = []
        for l in range(self.L):
            groups, extra = self.groups[l]
            sides = [groups[a, "max"] + groups[b, "kth"] + extra for a in CLASSES for b in CLASSES]
            n = min(cap, max(map(len, sides)))
            bits = [z3.Bool(f"heads_layer{l + 1}_{j}", self.ctx) for j in range(1, n + 1)]
            off = [z3.Not(x) for x in bits]
            self.solver.add([z3.Implies(b, a) for a, b in zip(bits, bits[1:])])
            self.solver.add([self._at_most(side + off, n) for side in sides if side])
            self.counts += bits

    def total_at_most(self, K: int) -> z3.BoolRef:
        """All layers together fit in K heads (after ``count_heads``)."""
        return self._at_most(self.counts, K)

    def spent(self) -> int:
        """z3's deterministic resource count so far (its rlimit), the Pareto search's budget."""
        stats = self.solver.statistics()
        return next((stats.get_key_value(k) for k in stats.keys() if k == "rlimit count"), 0)

    def vector(self, end: int, *extra) -> tuple[int, ...] | None | str:
        """The heads per layer a model of the query plus ``extra`` uses; None if unsat;
        "unknown" when the resource count would pass ``end``."""
        left = end - self.spent()
        if left <= 0:
            return "unknown"
        self.solver.set("rlimit", left)
        self.solver.push()
        try:
            self.solver.add(*extra)
            result = self.solver.check()
            if result == z3.sat:
                return tuple(self.needed(self.plan(self.solver.model())))
            return None if result == z3.unsat else "unknown"
        finally:
            self.solver.pop()
            self.solver.set("rlimit", 0)

    def least_heads(self, l: int) -> int:
        """The least head count of layer l+1 that keeps the query sat (bisection from the
        count the last model uses); the bound is then added for good."""
        lo, hi = 0, self.needed(self.plan(self.solver.model()))[l]
        while lo < hi:
            mid = (lo + hi) // 2
            if self.check(*self.head_bound(l, mid)) == z3.sat:
                hi = mid
            else:
                lo = mid + 1
        self.solver.add(*self.head_bound(l, hi))
        return hi

    def plan(self, model: z3.ModelRef) -> list[dict]:
        def true(b) -> bool:
            return z3.is_true(model.eval(b, model_completion=True))

        return [{"ret": {(n, c) for n, c in self.rules.retrievals if true(self.ret[l, n, c])},
                 "copy": true(self.copy[l]), "glob": true(self.glob[l]), "pos": true(self.pos[l])}
                for l in range(self.L)]


def _rules(target: Target, arch: Architecture) -> Rules:
    return Rules(target.calc, arch.d, arch.E, arch.positional)


def _optimal(target: Target, arch: Architecture, enc: _Encoding) -> Derivation | None:
    """Least B at this T and heads; the witness is what the readout rests on in one model at
    that B (``_extract``): the model's extra uses cost nothing, so no further optimisation."""
    rules, cheap = enc.rules, enc.cheap
    here = enc.where(T=arch.T, heads=arch.heads)
    if enc.check(*here) != z3.sat:
        return None
    values = sorted({Fraction(0)} | {t.value(arch.T) for t in rules.all_terms()
                                     if not (cheap and t.grows)})
    lo, hi = 0, len(values) - 1  # the query is sat, so B <= the largest term value is
    while lo < hi:
        mid = (lo + hi) // 2
        if enc.check(*here, enc.B <= enc.q(values[mid])) == z3.sat:
            hi = mid
        else:
            lo = mid + 1
    bound = values[hi]
    enc.solver.push()
    try:
        enc.solver.add(*here, enc.B <= enc.q(bound))
        if enc.solver.check() != z3.sat:
            raise AssertionError("the optimised query became unsat")
        plan = enc.plan(enc.solver.model())
    finally:
        enc.solver.pop()
    return _extract(target, arch, rules, plan, bound, cheap)


def _extract(target: Target, arch: Architecture, rules: Rules, plan: list[dict],
             bound: Fraction, cheap: bool) -> Derivation:
    """Run the chosen uses forward, then keep only what the readout's value rests on: each
    needed fact once, at the first state it holds, with one rule; heads are then assigned."""
    T = arch.T

    def allowed(terms: tuple[CostTerm, ...]) -> bool:
        return (not cheap or is_cheap(terms)) and all(t.value(T) <= bound for t in terms)

    have = rules.forward(plan, allowed)
    L = arch.layers
    goal = rules.goal(SetLogic(have[L]))
    if goal is None or not allowed(rules.readout_terms()):
        raise AssertionError("the model's uses do not reach the readout")
    steps: dict = {}

    def need(key, deadline: int) -> None:
        if key in steps:
            return
        e = next(l for l in range(deadline + 1) if key in have[l])
        f, c = key
        layer, prev = plan[e - 1], have[e - 1]
        node = rules.node_of.get(f)
        if node is not None and node.retrievable and (node.id, c) in layer["ret"] \
                and allowed(rules.retrieve_terms(node.id)):
            premises = rules.retrieval_premises(node.id, c, SetLogic(prev))
            if premises is not None:
                steps[key] = (e, "retrieve", (node.id, c), premises, rules.retrieve_terms(node.id))
                for p in sorted(premises):
                    need(p, e - 1)
                return
        if f == ALL and layer["glob"]:
            steps[key] = (e, "aggregate", "glob", frozenset(), ())
            return
        if f.startswith("x(") and layer["pos"]:
            steps[key] = (e, "positional", "pos", frozenset(), ())
            return
        if c == "out" and f in rules.closed and (f, "tok") in prev and \
                allowed(rules.transfer_terms(f)) and \
                (layer["copy"] or any(k == "out" for _, k in layer["ret"])):
            steps[key] = (e, "transfer", "carrier", frozenset({(f, "tok")}),
                          rules.transfer_terms(f))
            need((f, "tok"), e - 1)
            return
        if rules.decodable(f) and (ALL, c) in have[e] and allowed(rules.decode_terms()):
            steps[key] = (e, "decode", None, frozenset({(ALL, c)}), rules.decode_terms())
            need((ALL, c), e)
            return
        raise AssertionError(f"no rule derives {key} at state {e}")

    for p in sorted(goal):
        need(p, L)

    # heads, layer by layer: max heads (a use at t and one at T+1 share a head), kth heads,
    # the global head, the positional head, then heads that stay off
    plans, head_of = [], {}
    for l in range(1, L + 1):
        here = {k: v for k, v in steps.items() if v[0] == l}
        rets = sorted(v[2] for v in here.values() if v[1] == "retrieve")
        carrier = None
        if any(v[1] == "transfer" for v in here.values()):
            carrier = next((("ret",) + r for r in rets if r[1] == "out"), ("copy",))
        # a copy takes the head of an unneeded retrieval at T+1 the model made: of its mode
        layer = plan[l - 1]
        copy_mode = "max" if layer["copy"] or any(
            c == "out" and rules.nodes[n].mode == "max" for n, c in layer["ret"]) else "kth"
        heads: list[HeadPlan] = []
        for mode in ("max", "kth"):
            tok = [r for r in rets if r[1] == "tok" and rules.nodes[r[0]].mode == mode]
            out = [r for r in rets if r[1] == "out" and rules.nodes[r[0]].mode == mode]
            if mode == copy_mode and carrier == ("copy",):
                out.append("copy")
            for i in range(max(len(tok), len(out))):
                t = tok[i] if i < len(tok) else None
                o = out[i] if i < len(out) else None
                h = len(heads) + 1
                for r in (t, o):
                    if r == "copy":
                        head_of[l, "copy"] = h
                    elif r is not None:
                        head_of[l, r] = h
                heads.append(HeadPlan(mode, _use(rules, t), _use(rules, o)))
        if any(v[1] == "aggregate" for v in here.values()):
            head_of[l, "glob"] = len(heads) + 1
            heads.append(HeadPlan("global"))
        if any(v[1] == "positional" for v in here.values()):
            head_of[l, "pos"] = len(heads) + 1
            heads.append(HeadPlan("pos", positions=rules.tree.positions))
        if carrier is not None:
            head_of[l, "carrier"] = head_of[l, "copy"] if carrier == ("copy",) \
                else head_of[l, carrier[1:]]
        if len(heads) > arch.heads[l - 1]:
            raise AssertionError(f"layer {l}: {len(heads)} heads needed, {arch.heads[l - 1]} given")
        heads += [HeadPlan("off")] * (arch.heads[l - 1] - len(heads))
        plans.append(tuple(heads))

    rank = {k: i for i, k in enumerate(rules.keys)}
    out_steps = []
    for key, (l, rule, use, premises, costs) in sorted(  # a decode reads 1..T of its own state
            steps.items(), key=lambda kv: (kv[1][0], kv[1][1] == "decode",
                                           CLASSES.index(kv[0][1]), rank[kv[0]])):
        head = None if use is None else head_of[l, use]
        out_steps.append(Step(key[0], key[1], l, rule, head,
                              tuple(sorted(premises, key=rank.__getitem__)), costs))
    out_steps.append(Step("y", "out", L, "readout", None,
                          tuple(sorted(goal, key=rank.__getitem__)), rules.readout_terms()))
    terms = tuple(t for s in out_steps for t in s.costs)
    exponent = max([Fraction(0)] + [t.value(T) for t in terms])
    if exponent != bound:
        raise AssertionError(f"the witness's exponent {exponent} is not the optimum {bound}")
    since = {(s.fact, s.at): s.layer for s in out_steps if s.rule != "readout"}
    facts = tuple(tuple(tuple(f for f, k in rules.keys if k == c and since.get((f, c), L + 1) <= l)
                        for c in CLASSES) for l in range(L + 1))
    plans_ = tuple(plans)
    return Derivation(target, arch, plans_, class_sets(plans_, INFO_CAP), class_generators(plans_),
                      facts, tuple(out_steps), exponent, cheap, worst(terms, T))


def _use(rules: Rules, r) -> HeadUse | None:
    if r is None:
        return None
    if r == "copy":
        return HeadUse("copy", None)
    node = rules.nodes[r[0]]
    return HeadUse(node.role, node.name)


# ---------------------------------------------------------------- proofs and predictions


@dataclass(frozen=True)
class Proof:
    """An unsatisfiable SMT-LIB2 query and the claim it proves. ``heads`` has None for a layer
    whose head count is left free (any number)."""

    layer: int | None
    heads: tuple[int | None, ...] | None
    claim: str
    smt2: str
    kind: str  # which statement (docs/infoflow.md, "Proofs"): the checker builds its query
    total: int | None = None  # a pareto statement's heads in all
    vectors: tuple[tuple[int, ...], ...] = ()  # a pareto statement's head vectors

    def to_json(self) -> dict:
        return {"layer": self.layer, "heads": None if self.heads is None else list(self.heads),
                "claim": self.claim, "smt2": self.smt2}


def _heads_text(heads: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("any" if h is None else str(h) for h in heads) + "]"


def _affine(t: CostTerm) -> str:
    s, o = t.slope, t.offset
    if s == 0:
        return str(o)
    lead = "T" if s == 1 else f"{s}*T"
    return lead if o == 0 else f"{lead} {'-' if o < 0 else '+'} {abs(o)}"


def _exponent_function(terms: tuple[CostTerm, ...], T0: int) -> list[CostTerm]:
    """The witness's exponent as a function of T >= T0, max(0, the terms), dominated terms
    dropped (a term no larger at T0 and growing no faster)."""
    distinct = {(t.slope, t.offset): t for t in terms}
    keep = [t for t in distinct.values()
            if not any(o is not t and o.slope >= t.slope and o.slope * T0 + o.offset
                       >= t.slope * T0 + t.offset and (o.slope, o.offset) != (t.slope, t.offset)
                       for o in distinct.values())]
    return sorted(keep, key=lambda t: (t.slope, t.offset))


@dataclass(frozen=True)
class Prediction:
    """Least exponent at this T and its witness; ``efficient`` = a T-bounded derivation exists.
    ``proofs``: the minimality query at this T, and, where they hold, the same claim for every
    larger T, "no T-bounded derivation" for every T, and for any number of heads."""

    target: Target
    arch: Architecture
    witness: Derivation | None
    efficient: bool
    proof: str
    proof_claim: str
    proofs: tuple[Proof, ...] = ()

    @property
    def exponent(self) -> Fraction | None:
        return None if self.witness is None else self.witness.exponent


def _check_layers(L: object, option: str) -> None:
    if isinstance(L, bool) or not isinstance(L, int) or not 1 <= L <= MAX_LAYERS:
        raise InputError(f"{option}: must be an integer in 1..{MAX_LAYERS}, got {L!r}")


def predict(target: Target, arch: Architecture) -> Prediction:
    target.check_fits(arch.T)
    _check_layers(arch.layers, "--heads")
    rules = _rules(target, arch)
    Tmin = target.min_T()
    L, T, heads = arch.layers, arch.T, arch.heads
    full, cheap_enc = _Encoding(rules, L, False, Tmin), _Encoding(rules, L, True, Tmin)
    best = _optimal(target, arch, full)
    cheap = _optimal(target, arch, cheap_enc)
    if best is None:
        q = full.unsat_query(*full.where(heads=heads))
        claim = f"no derivation reaches the target at the readout, for every T >= {Tmin}"
        return Prediction(target, arch, None, False, q, claim,
                          (Proof(None, heads, claim, q, "no_derivation"),))
    witness = cheap if cheap is not None and cheap.exponent == best.exponent else best
    e = best.exponent
    claim = f"no derivation has exponent < {e} at T = {T}"
    proofs = [Proof(None, heads, claim,
                    full.unsat_query(*full.where(T=T, heads=heads), full.B < full.q(e)),
                    "least_exponent")]
    shape = _exponent_function(tuple(t for s in witness.steps for t in s.costs), T)
    if e > 0 or any(t.grows for t in shape):
        below = z3.Or([full.B < full.affine(t) for t in shape])
        if full.check(*full.where(T_from=T, heads=heads), below) == z3.unsat:
            text = "max(0, " + ", ".join(_affine(t) for t in shape) + ")"
            proofs.append(Proof(None, heads, f"for every T >= {T}, no derivation has exponent "
                                             f"< {text} (the witness's exponent at that T)",
                                full.unsat_query(*full.where(T_from=T, heads=heads), below),
                                "exponent_every_T"))
    if cheap is None:
        proofs.append(Proof(None, heads, f"no T-bounded derivation with heads {list(heads)}, "
                                         f"for every T >= {Tmin}",
                            cheap_enc.unsat_query(*cheap_enc.where(heads=heads)), "not_bounded"))
        if cheap_enc.check() == z3.unsat:
            proofs.append(Proof(None, (None,) * L, f"no T-bounded derivation with {L} layer(s) "
                                                   f"and any number of heads, for every T >= {Tmin}",
                                cheap_enc.unsat_query(), "not_bounded_any_heads"))
    return Prediction(target, arch, witness, cheap is not None, proofs[0].smt2, proofs[0].claim,
                      tuple(proofs))


ORDER = ("lexicographic: the fewest heads in layer 1 with the later layers free, then in layer 2 "
         "with layer 1 at that, and so on; pareto gives the least total")
PARETO_SHARE = 4           # the Pareto search may spend 1/4 of what min-heads spent before it in z3
PARETO_FLOOR = 1_000_000   # ... and at least this many (z3's rlimit count, deterministic; about 1 s)


@dataclass(frozen=True)
class MinHeads:
    """Least heads for a T-bounded (cheap) derivation. ``min_heads`` is lexicographic (``ORDER``),
    fixed layer by layer. ``pareto``: Pareto-minimal head vectors (none can lose a head in one
    layer without gaining one in another), by total then per layer: ``min_heads`` and the vectors
    of the least total ``least_total`` (None when the search ran out of its budget first);
    ``complete`` when every vector of that total is listed (a ``pareto`` proof)."""

    target: Target
    arch: Architecture
    min_heads: tuple[int, ...] | None
    witness: Derivation | None
    proofs: tuple[Proof, ...]
    pareto: tuple[tuple[int, ...], ...] = ()
    least_total: int | None = None
    complete: bool = False


def min_heads(target: Target, T: int, layers: int, d: int = 1, E: int = 1,
              positional: bool = False, pareto: bool = True) -> MinHeads:
    """Lexicographic: layer 1 is minimised with any number of heads in the later layers, then
    layer 2 with layer 1 at its minimum, and so on. Each bound is an unsat query with T symbolic
    (every T >= the target's least T) and the later layers' head counts free. Then (``pareto``)
    the least total and its vectors, on the same solver with the per-layer bounds dropped."""
    _check_layers(layers, "--layers")
    target.check_fits(T)
    Architecture(T, d, E, (0,) * layers, positional)  # validates the options
    rules = Rules(target.calc, d, E, positional)
    Tmin = target.min_T()
    enc = _Encoding(rules, layers, True, Tmin)
    enc.solver.push()  # the per-layer bounds, dropped for the Pareto search
    if enc.check() != z3.sat:
        free = (None,) * layers
        return MinHeads(target, Architecture(T, d, E, (0,) * layers, positional), None, None, (
            Proof(0, free, f"no T-bounded derivation with {layers} layer(s) and any number of "
                           f"heads, for every T >= {Tmin}", enc.unsat_query(),
                  "not_bounded_any_heads"),))
    heads: list[int] = []
    proofs = []
    for l in range(layers):
        m = enc.least_heads(l)
        if m > 0:
            shape = tuple(heads) + (m - 1,) + (None,) * (layers - l - 1)
            proofs.append(Proof(l + 1, shape,
                                f"no T-bounded derivation with {m - 1} head(s) in layer {l + 1} "
                                f"(heads {_heads_text(shape)}), for every T >= {Tmin}",
                                enc.unsat_query(*enc.head_bound(l, m - 1)), "fewer_heads"))
        heads.append(m)
        enc.check()
    final = Architecture(T, d, E, tuple(heads), positional)
    witness = _optimal(target, final, enc)
    enc.solver.pop()
    if not pareto:
        return MinHeads(target, final, tuple(heads), witness, tuple(proofs))
    budget = max(PARETO_FLOOR, enc.spent() // PARETO_SHARE)
    front, least, proof = _least_total(enc, tuple(heads), enc.spent() + budget, Tmin)
    return MinHeads(target, final, tuple(heads), witness,
                    tuple(proofs) + ((proof,) if proof else ()),
                    tuple(sorted(set(front) | {tuple(heads)}, key=lambda v: (sum(v), v))),
                    least, proof is not None and proof.vectors != ())


def _least_total(enc: _Encoding, lex: tuple[int, ...], end: int, Tmin: int
                 ) -> tuple[list[tuple[int, ...]], int | None, Proof | None]:
    """(the vectors of the least total found, that total if proved, its proof): fewer heads in
    all from each model's vector down until unsat, then every vector of that total, each time
    excluding the vectors at or above those found, until unsat; z3's resource count stops at
    ``end`` (then the total is not proved, or its vectors are not all listed)."""
    enc.count_heads(sum(lex))  # a layer of a vector with no more heads in all has at most that
    best = lex
    while sum(best):
        v = enc.vector(end, enc.total_at_most(sum(best) - 1))
        if v is None:
            break
        if v == "unknown":
            return [], None, None
        best = v
    S, L = sum(best), enc.L
    if not S:
        return [best], 0, None
    found = [best]
    while True:
        v = enc.vector(end, enc.total_at_most(S), *(enc.below(u) for u in found))
        if v is None:
            break
        if v == "unknown":  # S is the least: a model at S - 1 would have been found
            return found, S, Proof(None, (None,) * L, _pareto_claim(S - 1, (), L, Tmin),
                                   enc.unsat_query(enc.total_at_most(S - 1)), "pareto", S - 1)
        found.append(v)
    found.sort()
    return found, S, Proof(None, (None,) * L, _pareto_claim(S, found, L, Tmin),
                           enc.unsat_query(enc.total_at_most(S),
                                           *(enc.below(u, plain=True) for u in found)),
                           "pareto", S, tuple(found))


def _pareto_claim(K: int, vectors, L: int, Tmin: int) -> str:
    """The pareto statement: with at most K heads in all, heads at or above one of the vectors
    (none listed: no derivation with K heads in all)."""
    if not vectors:
        return f"no T-bounded derivation with at most {K} head(s) in all ({L} layer(s)), for every T >= {Tmin}"
    return (f"every T-bounded derivation with at most {K} head(s) in all ({L} layer(s)) has "
            f"heads at or above one of {_vectors_text(vectors)}, for every T >= {Tmin}")


def _vectors_text(vectors) -> str:
    return "; ".join(",".join(map(str, v)) for v in vectors)


@dataclass(frozen=True)
class Depth:
    """The least number of layers with a T-bounded derivation (any number of heads), its least
    heads and witness, the proofs that fewer layers never suffice, and what fewer layers cost."""

    target: Target
    arch: Architecture           # T, d, E, positional; heads = the least heads at that depth
    depth: int | None
    stable: int                  # state after which the derivable facts stop growing
    witness: Derivation | None
    min_heads: tuple[int, ...] | None
    proofs: tuple[Proof, ...]
    fewer: Prediction | None     # depth - 1 layers with as many heads as could be used


def depth(target: Target, T: int, d: int = 1, E: int = 1, positional: bool = False) -> Depth:
    target.check_fits(T)
    Architecture(T, d, E, (1,), positional)  # validates the options
    rules = Rules(target.calc, d, E, positional)
    Tmin = target.min_T()
    k, stable = depth_closure(rules)
    if k is None or k > MAX_LAYERS:
        L = min(stable + 1, MAX_LAYERS)
        enc = _Encoding(rules, L, True, Tmin)
        proofs = [Proof(None, (None,) * L, f"no T-bounded derivation with {L} layer(s) and any "
                                           f"number of heads, for every T >= {Tmin}",
                        enc.unsat_query(), "not_bounded_any_heads")]
        if k is None:
            grown = sorted(set(rules.keys) - _closure_state(rules, stable))
            if grown:
                proofs.append(Proof(None, (None,) * L, f"no fact beyond those of state {stable} "
                                                       f"holds at state {L} (any heads, every "
                                                       f"T >= {Tmin}): the facts have stopped "
                                                       "growing, so no number of layers helps",
                                    _encoding_with_facts(rules, L, Tmin, grown), "stable"))
        return Depth(target, Architecture(T, d, E, (0,) * L, positional), None, stable, None,
                     None, tuple(proofs), None)
    m = min_heads(target, T, k, d, E, positional, pareto=False)
    proofs = []
    fewer = None
    if k >= 2:
        enc = _Encoding(rules, k - 1, True, Tmin)
        proofs.append(Proof(None, (None,) * (k - 1),
                            f"no T-bounded derivation with {k - 1} layer(s) (nor fewer: leading "
                            f"layers may be all off) and any number of heads, for every "
                            f"T >= {Tmin}", enc.unsat_query(), "fewer_layers"))
        cap = min(len(rules.retrievals) + 3, MAX_HEADS)  # every use its own head
        fewer = predict(target, Architecture(T, d, E, (cap,) * (k - 1), positional))
    return Depth(target, m.arch, k, stable, m.witness, m.min_heads, tuple(proofs) + m.proofs, fewer)


def _closure_state(rules: Rules, state: int) -> set:
    have: set = set()
    for _ in range(state):
        have = rules.step(have, rules.unlimited(), is_cheap)
    return have


def _encoding_with_facts(rules: Rules, L: int, Tmin: int, keys: list) -> str:
    """The query "some fact in ``keys`` holds at state L" without the goal: unsat."""
    enc = _Encoding(rules, L, True, Tmin, goal=False)
    return enc.unsat_query(z3.Or([enc.X[key, L] for key in keys]))
