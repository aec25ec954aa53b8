"""Exact replay of a model, one layer at a time: the driver. Each layer is
evaluated by its formula (layers.py) on the tokens the shortcuts
(shortcuts.py) say it may change; every other token is provably unchanged.
A Step after each layer hands the claims what they check.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

from flint import fmpq

from tfcert.verify.enclose import Noise, Path, Token, axis_of, is_point, projection_range, rank_one
from tfcert.verify.formats import FF, SA, Model
from tfcert.verify.layers import (Attention, apply_ff, apply_ff_token, apply_low_rank, apply_sa_hardmax,
                                  is_zero_matrix, mean, sa_boxes, sa_rank_one)
from tfcert.verify.numbers import Vec, add, bounded, key, scale
from tfcert.verify.shortcuts import Projections, Ranked, Scaled, attention_table, direction_of, ff_support


class Before:
    """The tokens before a layer, without a copy: the replay's list with the
    tokens the layer changed read from ``old``. Like the Step holding it, a
    view that is valid until the replay moves on to the next layer."""

    def __init__(self, now: list, old: dict[int, object]):
        self.now, self.old = now, old

    def __len__(self) -> int:
        return len(self.now)

    def __getitem__(self, g: int):
        return self.old[g] if g in self.old else self.now[g]

    def __iter__(self):
        return map(self.__getitem__, range(len(self.now)))


@dataclass(frozen=True)
class Step:
    """One layer of the replay: block index, "ff" or "sa", every token before
    and after it (flat, in dataset order; ``shape`` the sequences' lengths),
    and for an SA layer the attention of every token (None when the layer is
    skipped as the identity or A = 0). ``before``/``after`` group the tokens
    per sequence, built only when a claim asks for them. A Step is a view of
    the replay, not a copy: read it before asking for the next one."""
    block: int
    layer: str
    flat_before: list | Before
    flat_after: list
    shape: tuple[int, ...]
    attention: tuple[tuple[Attention, ...], ...] | None = None
    uniform: bool = False
    sorted_before: dict | None = None  # key(r) -> Projections on r (direction_of), as they were before the layer
    noise: tuple[tuple[Noise, ...], ...] | None = None  # softmax, V = u vᵀ on points: every token's noise
    below: bool = False  # softmax enclosures hold at every temperature up to the model's
    exact: bool = True  # every token before and after the layer is an exact point

    @cached_property
    def before(self) -> tuple[tuple[Vec, ...], ...]:
        return _split(list(self.flat_before), self.shape)

    @cached_property
    def after(self) -> tuple[tuple[Vec, ...], ...]:
        return _split(self.flat_after, self.shape)

    def projections(self, direction: Vec) -> Ranked | Scaled:
        """Flat token ids ranked by projection on ``direction`` before the layer."""
        r, g = direction_of(direction)
        proj = self.sorted_before.get(key(r)) if self.sorted_before is not None else None
        if proj is None:
            return Projections(direction, list(self.flat_before))
        return proj if g == 1 else Scaled(proj, g)


def _uniform(sa: SA, X: list[Vec]) -> list[Vec]:
    """ρ x + V m for every token of a sequence of exact points under A = 0: m is their exact mean
    (hardmax averages them all; softmax weighs each by exp(0) = 1)."""
    shift = apply_low_rank(sa.V, mean(X, range(len(X))))
    return [add(scale(sa.rho, x), shift) for x in X]


def _split(flat: list, shape: tuple[int, ...]) -> tuple[tuple, ...]:
    out, start = [], 0
    for n in shape:
        out.append(tuple(flat[start:start + n]))
        start += n
    return tuple(out)


class Replay:
    """Exact replay of ``model`` on ``sequences`` (each a tuple of tokens).

    Softmax: layers are exact until a scored attention layer; from there a
    token may be an enclosure (enclose.py). ``temperature`` overrides the
    model's; ``below`` asks for enclosures valid at every temperature up to
    it (the noise bound) rather than at that temperature alone."""

    MAX_DIRECTIONS = 8

    def __init__(self, model: Model, sequences: list[tuple[Vec, ...]],
                 temperature: fmpq | None = None, below: bool = False):
        self.model = model
        self.tau = model.temperature if temperature is None else temperature
        self.below = below
        self.offsets = []
        flat: list[Vec] = []
        for seq in sequences:
            self.offsets.append(len(flat))
            flat.extend(seq)
        self.lengths = [len(s) for s in sequences]
        self.tokens: list = flat
        self.points = True  # every token is an exact point (not a softmax enclosure)
        self.index: OrderedDict[tuple, Projections] = OrderedDict()  # by key(direction)
        self.old: dict[int, Vec] = {}  # the tokens the last layer changed, as they were before it
        self._support: tuple = (None, [])  # the last FF layer and its support

    def sequences(self) -> tuple[tuple[Vec, ...], ...]:
        return tuple(tuple(self.tokens[o:o + n]) for o, n in zip(self.offsets, self.lengths))

    def _projections(self, direction: Vec) -> Ranked | Scaled:
        """The tokens ranked on ``direction`` = g·r: kept sorted on r (direction_of)."""
        r, g = direction_of(direction)
        name = key(r)
        proj = self.index.get(name)
        if proj is None:
            proj = self.index[name] = Projections(r, self.tokens)
            if len(self.index) > self.MAX_DIRECTIONS:
                self.index.popitem(last=False)
        else:
            self.index.move_to_end(name)
        return proj if g == 1 else Scaled(proj, g)

    def _set(self, updates: dict[int, Vec]) -> None:
        checked = set()  # ids of the tuples checked: the tokens of a cluster share one (an argmax's image, a snap's)
        for g, x in updates.items():
            if id(x) not in checked:
                checked.add(id(bounded(x)))
            if self.tokens[g] != x:
                self.old[g] = self.tokens[g]
                self.tokens[g] = x

    def _flush(self) -> None:
        """Move the last layer's changes into the sorted projections (they
        waited so that its Step could read them as before the layer); when
        many tokens changed, drop the projections: re-sorting is cheaper."""
        if len(self.old) > len(self.tokens) // 8:
            self.index.clear()
        for proj in self.index.values():
            known: dict[int, fmpq] = {}  # by id: a projection per tuple, which a cluster's tokens share
            for g in self.old:
                if id(x := self.tokens[g]) not in known:
                    known[id(x)] = proj.of(x)
                proj.move(g, known[id(x)])
        self.old = {}

    def _enclosed(self, tokens: list) -> None:
        """Replace every token at once (softmax enclosures); projections are recomputed on demand."""
        for x in tokens:
            for vertex in x.vertices if isinstance(x, Path) else (x,) if is_point(x) else ():
                bounded(vertex)
        self.tokens = tokens
        self.index.clear()
        self.points = all(is_point(x) for x in tokens)

    def _ff(self, ff: FF) -> None:
        """Apply an FF layer."""
        if not self.points:  # enclosures: a token whose range misses every support is unchanged
            supports = ff_support(ff)
            if any(sup.direction is None for sup in supports):
                self._enclosed([apply_ff_token(ff, x) for x in self.tokens])
                return
            axes = [axis_of(sup.direction) for sup in supports]

            def may_change(x: Token) -> bool:
                for sup, axis in zip(supports, axes):
                    lo, hi = projection_range(x, sup.direction, axis)
                    if hi > sup.lo and (sup.hi is None or lo < sup.hi):
                        return True
                return False
            self._enclosed([apply_ff_token(ff, x) if may_change(x) else x for x in self.tokens])
            return
        if self._support[0] is not ff:  # a model's equal blocks are one object (read_model)
            self._support = ff, ff_support(ff)
        candidates: set[int] = set()
        for sup in self._support[1]:
            if sup.direction is None:
                candidates = set(range(len(self.tokens)))
                break
            candidates.update(self._projections(sup.direction).inside(sup.lo, sup.hi))
        updates, last = {}, (None, None)  # (token, output): a run of equal tokens (a snap's cluster) is evaluated once
        for g in sorted(candidates):
            if self.tokens[g] != last[0]:
                last = self.tokens[g], apply_ff(ff, self.tokens[g])
            updates[g] = last[1]
        self._set(updates)

    def _sa(self, sa: SA) -> tuple[tuple[tuple[Attention, ...], ...] | None, bool]:
        d = self.model.d
        if sa.rho == 1 and is_zero_matrix(sa.V, d):
            return None, False
        uniform = is_zero_matrix(sa.A, d)
        updates: dict[int, Vec] = {}
        attention = []
        for seq, (o, n) in enumerate(zip(self.offsets, self.lengths)):
            X = self.tokens[o:o + n]
            if uniform:
                new = _uniform(sa, X)
            else:
                att = attention_table(sa.A, X)
                attention.append(tuple(att))
                new = apply_sa_hardmax(sa, X, att)
            updates.update({o + i: x for i, x in enumerate(new)})
        self._set(updates)
        return (None if uniform else tuple(attention)), uniform

    def _sa_softmax(self, sa: SA) -> tuple:
        """Returns (attention, uniform, noise) as for ``_sa``; tokens become
        enclosures where the attention is not exact."""
        d = self.model.d
        if sa.rho == 1 and is_zero_matrix(sa.V, d):
            return None, False, None
        uniform = is_zero_matrix(sa.A, d)
        if uniform and self.points:
            return self._sa(sa)[0], True, None
        new, attention, noises = [], [], []
        for o, n in zip(self.offsets, self.lengths):
            X = self.tokens[o:o + n]
            points = all(is_point(x) for x in X)  # this sequence's: a shard of it computes the same tokens
            if points and uniform:
                out = _uniform(sa, X)
            elif points and rank_one(sa.V) is not None:
                out, att, nz = sa_rank_one(sa, X, self.tau, self.below)
                attention.append(att)
                noises.append(nz)
            else:
                out = sa_boxes(sa, X, self.tau, uniform)
            new += out
        self._enclosed(new)
        scored = not uniform and len(attention) == len(self.lengths)
        return (tuple(attention) if scored else None), uniform, (tuple(noises) if scored else None)

    def _layer(self, apply):
        """Run one layer (``apply``); return the tokens before it, as a list
        (the layer replaced them) or a view of what it changed, and what
        ``apply`` returned."""
        self._flush()
        tokens = self.tokens
        result = apply()
        return (tokens if self.tokens is not tokens else Before(tokens, self.old)), result

    def steps(self) -> Iterator[Step]:
        """Evaluate every layer in order, yielding a Step after each."""
        softmax = self.model.attention == "softmax"
        shape = tuple(self.lengths)
        for k, block in enumerate(self.model.blocks):
            was = self.points
            before, _ = self._layer(lambda: self._ff(block.ff))
            was, exact = self.points, was and self.points
            yield Step(k, "ff", before, self.tokens, shape, sorted_before=self.index, exact=exact)
            if softmax:
                before, (attention, uniform, noises) = self._layer(lambda: self._sa_softmax(block.sa))
                yield Step(k, "sa", before, self.tokens, shape, attention, uniform, noise=noises,
                           below=self.below, exact=was and self.points)
            else:
                before, (attention, uniform) = self._layer(lambda: self._sa(block.sa))
                yield Step(k, "sa", before, self.tokens, shape, attention, uniform)
