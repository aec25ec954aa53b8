"""A derivation: what every head does at every position class, the information sets, and the
steps (each fact, the rule and head that derive it, its premises and cost terms) with the
exponent they give. Plain data; ``to_json`` is the witness file format of docs/infoflow.md."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from tfcert.infoflow.architecture import Architecture
from tfcert.infoflow.costs import CostTerm

WITNESS_FORMAT = "tfcert.infoflow.witness/1"
SHOW = {"tok": "t", "out": "T+1"}


@dataclass(frozen=True)
class HeadUse:
    """What a head does at one class: ``anchor``/``resolve`` a reduction (retrieve the best
    candidate for it), or ``copy`` (retrieve some token, for the closed facts it holds)."""

    role: str
    node: str | None

    @property
    def comparison(self) -> str | None:  # the name the first format used
        return self.node


@dataclass(frozen=True)
class HeadPlan:
    mode: str
    tok: HeadUse | None = None
    out: HeadUse | None = None
    positions: tuple[int, ...] = ()

    def use(self, cls: str) -> HeadUse | None:
        return self.tok if cls == "tok" else self.out


@dataclass(frozen=True)
class Step:
    """``fact`` holds at class ``at`` from state ``layer`` on, by ``rule`` (using ``head`` of
    that layer); ``premises`` are (fact, class) pairs."""

    fact: str
    at: str
    layer: int
    rule: str
    head: int | None
    premises: tuple[tuple[str, str], ...]
    costs: tuple[CostTerm, ...]

    def to_json(self, T: int) -> dict:
        return {"fact": self.fact, "at": SHOW[self.at], "layer": self.layer, "rule": self.rule,
                "head": self.head,
                "premises": [{"fact": f, "at": SHOW[c]} for f, c in self.premises],
                "costs": [{"law": t.law, "value": str(t.value(T))} for t in self.costs]}


@dataclass(frozen=True)
class Derivation:
    """``info[l]`` / ``facts[l]`` are (tok, out) tuples for states 0..L; plans[l] is layer l+1.
    ``info`` is None when the explicit sets would be too large (they double with every layer
    that retrieves at t); ``generators`` is always the union form."""

    target: object  # a Target
    arch: Architecture
    plans: tuple[tuple[HeadPlan, ...], ...]
    info: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] | None
    generators: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]
    facts: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]
    steps: tuple[Step, ...]
    exponent: Fraction
    cheap: bool
    dominant: CostTerm

    def to_json(self) -> dict:
        def use(u: HeadUse | None) -> dict | None:
            return None if u is None else {"role": u.role, "node": u.node}

        def head(h: int, p: HeadPlan) -> dict:
            out = {"head": h + 1, "mode": p.mode, "at_t": use(p.tok), "at_readout": use(p.out)}
            if p.mode == "pos":
                out["positions"] = list(p.positions)
            return out

        T = self.arch.T
        return {
            "format": WITNESS_FORMAT, "target": self.target.name,
            "tree": self.target.calc.to_json(), "architecture": self.arch.to_json(),
            "derivation": True, "cheap": self.cheap,
            "layers": [{"layer": l + 1, "heads": [head(h, p) for h, p in enumerate(plans)]}
                       for l, plans in enumerate(self.plans)],
            "information_sets": self.information_sets_json(),
            "facts": [{"layer": l, "t": list(tok), "T+1": list(out)}
                      for l, (tok, out) in enumerate(self.facts)],
            "steps": [s.to_json(T) for s in self.steps],
            "exponent": str(self.exponent),
            "dominant_cost": self.dominant.to_json(T),
        }

    def information_sets_json(self) -> list[dict]:
        if self.info is not None:
            return [{"layer": l, "I(t,l)": list(tok), "I(T+1,l)": list(out)}
                    for l, (tok, out) in enumerate(self.info)]
        return [{"layer": l, "I(t,l)": {"union": list(tok)} if l else list(tok),
                 "I(T+1,l)": {"union": list(out)} if l else list(out)}
                for l, (tok, out) in enumerate(self.generators)]
