"""Information-set propagation, concrete (positions 1..T+1) and per position class (symbolic).

I(p, 0) = {p}. One layer: I(p, l+1) = I(p, l) (residual) ∪ what each head brings:
max retrieval of s adds I(s, l); global aggregation adds every I(s, l), s = 1..T;
position-specific aggregation (positional encoding only) adds I(s, l) for s in a fixed set S.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from tfcert.errors import InputError
from tfcert.infoflow.calculus import ALL, CLASSES
from tfcert.infoflow.witness import HeadPlan


@dataclass(frozen=True)
class Retrieve:
    """Max retrieval: the single attended position (the argmax of the head's score)."""

    source: int


@dataclass(frozen=True)
class Aggregate:
    """Global aggregation over all input positions."""


@dataclass(frozen=True)
class Positional:
    """Position-specific aggregation over a content-independent set of positions."""

    sources: frozenset[int]


Action = Retrieve | Aggregate | Positional


def initial_sets(T: int) -> tuple[frozenset[int], ...]:
    """I(p, 0) = {p} for p = 1..T+1 (index p-1)."""
    return tuple(frozenset({p}) for p in range(1, T + 2))


def _sources(action: Action, T: int, positional: bool) -> frozenset[int]:
    if isinstance(action, Retrieve):
        sources = frozenset({action.source})
    elif isinstance(action, Aggregate):
        sources = frozenset(range(1, T + 1))
    else:
        if not positional:
            raise InputError("position-specific aggregation needs positional encoding")
        sources = action.sources
    if not sources or not sources <= frozenset(range(1, T + 1)):
        raise InputError(f"attention sources must be input positions 1..{T}, got {sorted(sources)}")
    return sources


def step(sets: tuple[frozenset[int], ...], actions: Mapping[int, Sequence[Action]],
         positional: bool = False) -> tuple[frozenset[int], ...]:
    """One layer; ``actions[p]`` are the head actions at position p (absent: residual only)."""
    T = len(sets) - 1
    new = []
    for p in range(1, T + 2):
        gained = [sets[s - 1] for a in actions.get(p, ()) for s in _sources(a, T, positional)]
        new.append(sets[p - 1].union(*gained))
    return tuple(new)


def _substitute(terms: frozenset[str], position: str) -> frozenset[str]:
    """I(s, l) for s = ``position``: the generic token's terms with t replaced by s."""
    return frozenset(ALL if x == ALL else position if x == "t" else x.replace("(t)", f"({position})")
                     for x in terms)


def _normalise(terms: frozenset[str], base: str) -> frozenset[str]:
    return frozenset({ALL, base}) - {"t"} if ALL in terms else terms


def _too_large(current: dict, layer: tuple[HeadPlan, ...], cap: int) -> bool:
    """The size bound the checker uses too: each position a head reads at a class adds (a
    renamed copy of) I(t, l-1); a global head collapses the set to 1..T."""
    for cls in CLASSES:
        if ALL in current[cls] or any(p.mode == "global" for p in layer):
            continue
        sources = sum(len(p.positions) if p.mode == "pos" else p.use(cls) is not None
                      for p in layer)
        if len(current[cls]) + sources * len(current["tok"]) > cap:
            return True
    return False


def class_sets(plans: tuple[tuple[HeadPlan, ...], ...], cap: int | None = None
               ) -> tuple[tuple[tuple[str, ...], ...], ...] | None:
    """Symbolic I(t, l) and I(T+1, l): ``s{l}.{h}(p)`` is the position head h of layer l retrieves
    from p, ``1..T`` all inputs, ``3`` the fixed position 3 (a position-specific head brings
    I(3, l-1) to every position). By permutation symmetry one generic t stands for every token."""
    current = {"tok": frozenset({"t"}), "out": frozenset({"T+1"})}
    history = [current]
    for l, layer in enumerate(plans, start=1):
        if cap is not None and _too_large(current, layer, cap):
            return None  # the sets double with each retrieving layer: give the unions
        new = dict(current)
        for h, plan in enumerate(layer, start=1):
            for cls in CLASSES:
                base = "t" if cls == "tok" else "T+1"
                if plan.mode == "global":
                    new[cls] = new[cls] | {ALL}
                elif plan.mode == "pos":
                    for p in plan.positions:
                        new[cls] = new[cls] | _substitute(current["tok"], str(p))
                elif plan.use(cls) is not None:
                    new[cls] = new[cls] | _substitute(current["tok"], f"s{l}.{h}({base})")
        current = {cls: _normalise(new[cls], "t" if cls == "tok" else "T+1") for cls in CLASSES}
        history.append(current)
    return tuple(tuple(tuple(sorted(s[cls], key=lambda x: (len(x), x))) for cls in CLASSES)
                 for s in history)


def class_generators(plans: tuple[tuple[HeadPlan, ...], ...]) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """The union form of the same sets, linear in size: I(c, l) = I(c, l-1) ∪ I(s, l-1) for
    each position s a head of layer l reads at c (``1..T`` for a global head)."""
    out = [(("t",), ("T+1",))]
    for l, layer in enumerate(plans, start=1):
        gens = {cls: {f"I({'t' if cls == 'tok' else 'T+1'},{l - 1})"} for cls in CLASSES}
        for h, plan in enumerate(layer, start=1):
            for cls in CLASSES:
                base = "t" if cls == "tok" else "T+1"
                if plan.mode == "global":
                    gens[cls].add(ALL)
                elif plan.mode == "pos":
                    gens[cls] |= {f"I({p},{l - 1})" for p in plan.positions}
                elif plan.use(cls) is not None:
                    gens[cls].add(f"I(s{l}.{h}({base}),{l - 1})")
        out.append(tuple(tuple(sorted(gens[cls], key=lambda x: (len(x), x))) for cls in CLASSES))
    return tuple(out)
