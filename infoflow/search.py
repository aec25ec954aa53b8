"""z3 decides InfoFlow derivations over the two position classes (tok, out).

Variables: ``mode`` per head, ``use`` per (head, class, comparison, role), facts per layer
(``loc`` = g_c(t) at tokens, ``val`` = c at a class, ``full`` = I ⊇ {1..T}) and the exponent
bound ``B``. Every true fact must be justified by the residual or by a rule whose cost terms are
all ≤ B; in cheap mode, rules whose exponent grows with T are forbidden as well.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import z3

from tfcert.errors import InputError
from tfcert.infoflow import rules
from tfcert.infoflow.architecture import Architecture
from tfcert.infoflow.costs import CostTerm, worst
from tfcert.infoflow.propagation import class_sets
from tfcert.infoflow.rules import CLASSES, MODES, ROLES
from tfcert.infoflow.targets import Target
from tfcert.infoflow.witness import Derivation, HeadPlan, HeadUse


def _q(x: Fraction) -> z3.ArithRef:
    return z3.RealVal(f"{x.numerator}/{x.denominator}")


@dataclass(frozen=True)
class _Vars:
    B: z3.ArithRef
    mode: dict
    use: dict
    loc: dict
    val: dict
    full: dict


def _encode(target: Target, arch: Architecture, cheap: bool) -> tuple[list, _Vars]:
    T, d, E, L = arch.T, arch.d, arch.E, arch.layers
    B = z3.Real("B")
    cs = target.comparisons

    def guard(terms: tuple[CostTerm, ...]) -> z3.BoolRef:
        allowed = [B >= _q(t.value(T)) for t in terms]
        if cheap and any(t.grows for t in terms):
            allowed.append(z3.BoolVal(False))
        return z3.And(allowed)

    mode = {(l, h): z3.Int(f"mode_l{l + 1}_h{h + 1}") for l in range(L) for h in range(arch.heads[l])}
    use = {(l, h, p, c.name, r): z3.Bool(f"use_l{l + 1}_h{h + 1}_{p}_{c.name}_{r}")
           for (l, h) in mode for p in CLASSES for c in cs for r in ROLES}
    loc = {(c.name, l): z3.Bool(f"g_{c.name}_l{l}") for c in cs for l in range(L + 1)}
    val = {(p, c.name, l): z3.Bool(f"val_{p}_{c.name}_l{l}")
           for p in CLASSES for c in cs for l in range(L + 1)}
    full = {(p, l): z3.Bool(f"full_{p}_l{l}") for p in CLASSES for l in range(L + 1)}
    code = {m: i for i, m in enumerate(MODES)}

    cons: list = [B >= 0]
    cons += [z3.And(m >= 0, m < len(MODES)) for m in mode.values()]
    cons += [z3.Not(full[p, 0]) for p in CLASSES]
    for c in cs:
        cons.append(loc[c.name, 0] == z3.BoolVal(rules.initially_anchored(c)))
        cons += [z3.Not(val[p, c.name, 0]) for p in CLASSES]
        cons += [val["out", c.name, L], guard(rules.readout_terms(c, d, E))]
    aggregate = guard(rules.aggregate_terms(d, E))
    for (l, h), m in mode.items():
        for p in CLASSES:
            uses = [use[l, h, p, c.name, r] for c in cs for r in ROLES]
            cons.append(z3.AtMost(*uses, 1))
            for c in cs:
                for r in ROLES:
                    u = use[l, h, p, c.name, r]
                    need = rules.role_mode(r, p, c)
                    if need is None:
                        cons.append(z3.Not(u))
                        continue
                    pre = {"anchor": z3.BoolVal(True), "resolve": loc[c.name, l],
                           "copy": val["tok", c.name, l]}[r]
                    cons.append(z3.Implies(u, z3.And(m == code[need], pre,
                                                     guard(rules.role_terms(r, c, d, E)))))
    for l in range(L):  # the residual: I(p, l) ⊆ I(p, l+1), so facts persist
        cons += [z3.Implies(full[p, l], full[p, l + 1]) for p in CLASSES]
        cons += [z3.Implies(loc[c.name, l], loc[c.name, l + 1]) for c in cs]
        cons += [z3.Implies(val[p, c.name, l], val[p, c.name, l + 1]) for p in CLASSES for c in cs]
    for l in range(L):
        heads = range(arch.heads[l])
        for p in CLASSES:
            cons.append(z3.Implies(full[p, l + 1], z3.Or(full[p, l], *[mode[l, h] == code["global"]
                                                                      for h in heads])))
        for c in cs:
            cons.append(z3.Implies(loc[c.name, l + 1], z3.Or(
                loc[c.name, l], z3.And(full["tok", l + 1], aggregate),
                *[use[l, h, "tok", c.name, "anchor"] for h in heads])))
            for p in CLASSES:
                cons.append(z3.Implies(val[p, c.name, l + 1], z3.Or(
                    val[p, c.name, l], z3.And(full[p, l + 1], aggregate),
                    *[use[l, h, p, c.name, r] for h in heads for r in ("resolve", "copy")])))
    return cons, _Vars(B, mode, use, loc, val, full)


def _derivation(target: Target, arch: Architecture, v: _Vars, model: z3.ModelRef,
                cheap: bool) -> Derivation:
    """Read the witness off the model; the information sets follow from the head plans."""
    def true(x: z3.BoolRef) -> bool:
        return z3.is_true(model.eval(x, model_completion=True))

    cs = {c.name: c for c in target.comparisons}
    plans = []
    terms: list[CostTerm] = [t for c in cs.values() for t in rules.readout_terms(c, arch.d, arch.E)]
    for l in range(arch.layers):
        layer = []
        for h in range(arch.heads[l]):
            mode = MODES[model.eval(v.mode[l, h], model_completion=True).as_long()]
            chosen = {p: next((HeadUse(r, c) for c in cs for r in ROLES
                               if true(v.use[l, h, p, c, r])), None) for p in CLASSES}
            for u in chosen.values():
                if u is not None:
                    terms += rules.role_terms(u.role, cs[u.comparison], arch.d, arch.E)
            if mode == "global":
                terms += rules.aggregate_terms(arch.d, arch.E)
            layer.append(HeadPlan(mode, chosen["tok"], chosen["out"]))
        plans.append(tuple(layer))
    facts = tuple(
        tuple(tuple([rules.anchored_fact(c) for c in cs.values() if p == "tok" and true(v.loc[c.name, l])]
                    + [n for n in cs if true(v.val[p, n, l])]
                    + ([rules.ALL] if true(v.full[p, l]) else []))
              for p in CLASSES)
        for l in range(arch.layers + 1))
    exponent = model.eval(v.B, model_completion=True).as_fraction()
    return Derivation(target.name, arch, tuple(plans), class_sets(tuple(plans)), facts,
                      Fraction(exponent), cheap, worst(tuple(terms), arch.T))


def _optimal(target: Target, arch: Architecture, cheap: bool) -> Derivation | None:
    """Least B, then fewest working heads, then fewest head uses: a small, deterministic witness."""
    cons, v = _encode(target, arch, cheap)
    opt = z3.Optimize()
    opt.add(cons)
    opt.minimize(v.B)
    opt.minimize(z3.Sum([z3.If(m == 0, 0, 1) for m in v.mode.values()] + [z3.IntVal(0)]))
    opt.minimize(z3.Sum([z3.If(u, 1, 0) for u in v.use.values()] + [z3.IntVal(0)]))
    if opt.check() != z3.sat:
        return None
    return _derivation(target, arch, v, opt.model(), cheap)


def _exists(target: Target, arch: Architecture, cheap: bool) -> bool:
    """Plain satisfiability: cheaper than optimising when only the answer is needed."""
    cons, _ = _encode(target, arch, cheap)
    s = z3.Solver()
    s.add(cons)
    return s.check() == z3.sat


def _unsat_query(target: Target, arch: Architecture, cheap: bool,
                 below: Fraction | None = None) -> str:
    """The SMT-LIB2 text of a query that must be unsat; checked here before it is returned."""
    cons, v = _encode(target, arch, cheap)
    s = z3.Solver()
    s.add(cons)
    if below is not None:
        s.add(v.B < _q(below))
    result = s.check()
    if result != z3.unsat:
        raise AssertionError(f"expected unsat, z3 says {result}")
    return s.to_smt2()


def recheck(smt2: str) -> str:
    """Re-run an emitted query: "unsat" confirms the claim it encodes."""
    s = z3.Solver()
    s.add(z3.parse_smt2_string(smt2))
    return str(s.check())


@dataclass(frozen=True)
class Prediction:
    """Least exponent at this T and its witness; ``efficient`` = a T-bounded derivation exists."""

    target: Target
    arch: Architecture
    witness: Derivation | None
    efficient: bool
    proof: str
    proof_claim: str

    @property
    def exponent(self) -> Fraction | None:
        return None if self.witness is None else self.witness.exponent


def predict(target: Target, arch: Architecture) -> Prediction:
    target.check_fits(arch.T)
    best = _optimal(target, arch, cheap=False)
    cheap = _optimal(target, arch, cheap=True)
    if best is None:
        return Prediction(target, arch, None, False, _unsat_query(target, arch, False),
                          "no derivation reaches the target at the readout")
    witness = cheap if cheap is not None and cheap.exponent == best.exponent else best
    return Prediction(target, arch, witness, cheap is not None,
                      _unsat_query(target, arch, False, best.exponent),
                      f"no derivation has exponent < {best.exponent}")


@dataclass(frozen=True)
class Proof:
    layer: int
    heads: tuple[int, ...]
    claim: str
    smt2: str


@dataclass(frozen=True)
class MinHeads:
    """Per-layer least head counts for a T-bounded (cheap) derivation, fixed layer by layer."""

    target: Target
    arch: Architecture
    min_heads: tuple[int, ...] | None
    witness: Derivation | None
    proofs: tuple[Proof, ...]


def min_heads(target: Target, T: int, layers: int, d: int = 1, E: int = 1,
              positional: bool = False) -> MinHeads:
    """Lexicographic: layer 1 is minimised with later layers at the cap H = number of
    comparisons (more heads per layer never help), then layer 2 given layer 1, and so on."""
    target.check_fits(T)
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise InputError(f"--layers: must be an integer >= 1, got {layers!r}")
    cap = len(target.comparisons)
    arch = Architecture(T, d, E, (cap,) * layers, positional)
    if not _exists(target, arch, cheap=True):
        return MinHeads(target, arch, None, None, (Proof(
            0, arch.heads, f"no T-bounded derivation with heads {list(arch.heads)}",
            _unsat_query(target, arch, True)),))
    heads = list(arch.heads)
    proofs = []
    for l in range(layers):
        lo, h = 0, cap  # more heads never hurt (a head may be off): bisect on the first sat
        while lo < h:
            mid = (lo + h) // 2
            if _exists(target, arch.with_heads(tuple(heads[:l] + [mid] + heads[l + 1:])), True):
                h = mid
            else:
                lo = mid + 1
        if h > 0:
            fewer = arch.with_heads(tuple(heads[:l] + [h - 1] + heads[l + 1:]))
            proofs.append(Proof(l + 1, fewer.heads,
                                f"no T-bounded derivation with {h - 1} head(s) in layer {l + 1} "
                                f"(heads {list(fewer.heads)})",
                                _unsat_query(target, fewer, True)))
        heads[l] = h
    final = arch.with_heads(tuple(heads))
    return MinHeads(target, final, tuple(heads), _optimal(target, final, cheap=True), tuple(proofs))
