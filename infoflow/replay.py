"""Independent replay of a derivation, in pure Python (no z3, nothing from search.py).

Runs the rules forward, layer by layer, keeping for each fact the least exponent at which the
witness's own head plans derive it (a bottleneck path: a derived fact costs the max of its
premise and its rule). The witness passes when every head use is legal and its premises hold,
every claimed fact and information set is what the plans give, the target reaches the readout,
and the claimed exponent is the recomputed one.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from tfcert.infoflow import rules
from tfcert.infoflow.architecture import Architecture
from tfcert.infoflow.costs import CostTerm
from tfcert.infoflow.propagation import class_sets
from tfcert.infoflow.rules import ALL, CLASSES, MODES, ROLES
from tfcert.infoflow.targets import Target
from tfcert.infoflow.witness import Derivation

Cost = Fraction | None  # None: not derivable


@dataclass(frozen=True)
class ReplayReport:
    ok: bool
    errors: tuple[str, ...]
    exponent: Fraction | None


def _least(*costs: Cost) -> Cost:
    known = [c for c in costs if c is not None]
    return min(known) if known else None


def _then(premise: Cost, rule: Cost) -> Cost:
    return None if premise is None or rule is None else max(premise, rule)


def replay(target: Target, arch: Architecture, w: Derivation) -> ReplayReport:
    errors: list[str] = []
    T, d, E = arch.T, arch.d, arch.E
    cs = {c.name: c for c in target.comparisons}

    def rule(terms: tuple[CostTerm, ...]) -> Cost:
        if w.cheap and any(t.grows for t in terms):
            return None
        return max(t.value(T) for t in terms)

    if w.target != target.name or w.arch != arch:
        errors.append("witness is for another target or architecture")
    if tuple(len(layer) for layer in w.plans) != arch.heads:
        return ReplayReport(False, tuple(errors + [
            f"head counts {[len(x) for x in w.plans]} differ from {list(arch.heads)}"]), None)
    loc: dict[str, Cost] = {n: Fraction(0) if rules.initially_anchored(c) else None
                            for n, c in cs.items()}
    val: dict[tuple[str, str], Cost] = {(p, n): None for p in CLASSES for n in cs}
    full = {p: False for p in CLASSES}
    derivable = [_facts(cs, loc, val, full)]
    aggregate = rule(rules.aggregate_terms(d, E))
    for l, layer in enumerate(w.plans, start=1):
        new_full = {p: full[p] or any(plan.mode == "global" for plan in layer) for p in CLASSES}
        new_loc = {n: _least(loc[n], aggregate if new_full["tok"] else None) for n in cs}
        new_val = {(p, n): _least(val[p, n], aggregate if new_full[p] else None)
                   for p in CLASSES for n in cs}
        for h, plan in enumerate(layer, start=1):
            where = f"layer {l} head {h}"
            if plan.mode not in MODES:
                errors.append(f"{where}: unknown mode {plan.mode!r}")
                continue
            for p in CLASSES:
                u = plan.use(p)
                if u is None:
                    continue
                c = cs.get(u.comparison)
                if c is None or u.role not in ROLES:
                    errors.append(f"{where} at {p}: unknown use {u}")
                    continue
                if rules.role_mode(u.role, p, c) != plan.mode:
                    errors.append(f"{where} at {p}: role {u.role} of {c.name} is not a "
                                  f"{plan.mode} rule")
                    continue
                premise = {"anchor": Fraction(0), "resolve": loc[c.name],
                           "copy": val["tok", c.name]}[u.role]
                cost = _then(premise, rule(rules.role_terms(u.role, c, d, E)))
                if cost is None:
                    errors.append(f"{where} at {p}: {u.role} of {c.name} lacks its premise "
                                  "or is not allowed")
                elif u.role == "anchor":
                    new_loc[c.name] = _least(new_loc[c.name], cost)
                else:
                    new_val[p, c.name] = _least(new_val[p, c.name], cost)
        loc, val, full = new_loc, new_val, new_full
        derivable.append(_facts(cs, loc, val, full))
    if len(w.facts) != len(derivable):
        errors.append(f"facts are claimed for {len(w.facts)} layers, expected {len(derivable)}")
    for l, (claimed, got) in enumerate(zip(w.facts, derivable)):
        for p, facts, ok in zip(CLASSES, claimed, got):
            extra = sorted(set(facts) - ok)
            if extra:
                errors.append(f"layer {l} at {p}: claimed facts not derivable: {extra}")
    if w.info != class_sets(w.plans):
        errors.append("information sets differ from those the head plans give")
    exponent: Cost = Fraction(0)
    for n, c in cs.items():
        exponent = _then(exponent, _then(val["out", n], rule(rules.readout_terms(c, d, E))))
    if exponent is None:
        errors.append("the target does not reach the readout T+1")
    elif exponent != w.exponent:
        errors.append(f"claimed exponent {w.exponent}, replay gives {exponent}")
    if w.dominant.value(T) != w.exponent:
        errors.append(f"dominant cost term {w.dominant.law} has value {w.dominant.value(T)}, "
                      f"not the claimed exponent {w.exponent}")
    return ReplayReport(not errors, tuple(errors), exponent)


def _facts(cs, loc, val, full) -> tuple[set[str], set[str]]:
    """The facts derivable at (tok, out) in one layer, named as in the witness."""
    return tuple(
        {rules.anchored_fact(c) for n, c in cs.items() if p == "tok" and loc[n] is not None}
        | {n for n in cs if val[p, n] is not None} | ({ALL} if full[p] else set())
        for p in CLASSES)
