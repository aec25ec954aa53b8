"""A derivation: what every head does at every position class, with the information sets and
facts per layer, and the cost exponent it claims. Plain data, JSON both ways."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from tfcert.infoflow.architecture import Architecture
from tfcert.infoflow.costs import CostTerm


@dataclass(frozen=True)
class HeadUse:
    role: str
    comparison: str

    def describe(self, cls: str, rank: int) -> str:
        who = "t" if cls == "tok" else "T+1"
        if self.role == "anchor":
            return f"{who} retrieves s* = argbest_s {self.comparison}({who}, s) -> g_{self.comparison}({who})"
        if self.role == "resolve":
            best = "argbest" if rank == 1 else f"arg-{rank}th-best"
            return f"{who} retrieves s* = {best}_s g_{self.comparison}(s) -> {self.comparison}"
        return f"{who} retrieves a token holding {self.comparison} -> {self.comparison}"


@dataclass(frozen=True)
class HeadPlan:
    mode: str
    tok: HeadUse | None = None
    out: HeadUse | None = None

    def use(self, cls: str) -> HeadUse | None:
        return self.tok if cls == "tok" else self.out


@dataclass(frozen=True)
class Derivation:
    """``info[l]`` / ``facts[l]`` are (tok, out) pairs for layers 0..L; plans[l] is layer l+1."""

    target: str
    arch: Architecture
    plans: tuple[tuple[HeadPlan, ...], ...]
    info: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]
    facts: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]
    exponent: Fraction
    cheap: bool
    dominant: CostTerm

    def to_json(self) -> dict:
        def use(u: HeadUse | None) -> dict | None:
            return None if u is None else {"role": u.role, "comparison": u.comparison}

        return {
            "target": self.target, "architecture": self.arch.to_json(),
            "layers": [
                {"layer": l + 1,
                 "heads": [{"head": h + 1, "mode": p.mode, "at_t": use(p.tok),
                            "at_readout": use(p.out)} for h, p in enumerate(plans)]}
                for l, plans in enumerate(self.plans)],
            "information_sets": [{"layer": l, "I(t,l)": list(tok), "I(T+1,l)": list(out)}
                                 for l, (tok, out) in enumerate(self.info)],
            "facts": [{"layer": l, "t": list(tok), "T+1": list(out)}
                      for l, (tok, out) in enumerate(self.facts)],
            "exponent": str(self.exponent), "cheap": self.cheap,
            "dominant_cost": self.dominant.to_json(self.arch.T),
        }
