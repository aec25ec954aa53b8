"""The values a float run computes the same way in every run the float model
allows, where they can be known — and then a token's error is |x̂ − x|
itself, not a bound on it.

docs/float.md leaves a float run free in the order of every sum, in fusing a
product into an addition, and in the form of V m; most results depend on
those choices in their last bits. Some do not: one product rounded once; a
sum of exact products that the exact evaluation lemma (floats.exact_limit)
makes exact in every order; a relu; a copied argmax token; ρ x + V m where
every form of it agrees. And a short sum (at most five terms) takes only the
few values its evaluations give, each computed here (runs): where they
agree it is known; where they do not, a token takes one of a few value
tuples, its alternatives, each followed through the later layers. When every
operand of such a result is known, the result is known. Inputs and
parameters are known (each is the rational rounded to the format), so a
layer whose arithmetic is of this kind hands the next one known values: the
run the analysis speaks about then has no freedom left there, and a snap
that lands every run on the same float passes no error on.

A value is an exact rational (a number of the format); None: not known."""
from __future__ import annotations

from functools import cache, lru_cache
from itertools import product
from math import prod

from flint import fmpq

from tfcert.verify.floats import Format, exact_sum, exp_zero, round_nearest, round_scaled, valuation
from tfcert.verify.numbers import ONE, ZERO


def _live(terms) -> list | None:
    """The terms without a zero factor, or None where one of them has an unknown factor
    (the sum is then unknown). A zero factor adds nothing: 0 times a finite number is
    0, and adding 0 rounds nothing (the analysis proves every value finite)."""
    live = [(a, b) for a, b in terms if not (a == 0 or b == 0)]
    return None if any(a is None or b is None for a, b in live) else live


CHOICES = 16  # the most alternatives a token's known values keep
RUN_TERMS = 5  # the most terms of a sum whose every evaluation runs() enumerates
RUN_VALUES = 16  # the most values a part of such a sum may take before runs() gives up


@cache
def _splits(k: int) -> tuple:
    """Per subset T of k terms with two or more (smaller first), its unordered splits into two
    parts A, B (A holding T's lowest term), each with the index of a part that is a single
    term (fusable) or None: runs()'s plan, made once per k."""
    single = lambda X: X.bit_length() - 1 if X & (X - 1) == 0 else None  # noqa: E731
    plan = []
    for T in sorted(range(1, 1 << k), key=int.bit_count)[k:]:
        parts = [(A, T ^ A) for A in range(1, T) if A & T == A and A & T & -T]
        plan.append((T, tuple((A, B, single(A), single(B)) for A, B in parts)))
    return tuple(plan)


def runs(terms, fmt: Format) -> tuple | None:
    """Every float value of Σ a·b over ``terms`` (pairs of numbers of the format, None where
    unknown) that an evaluation the float model allows gives — any binary tree, each product
    rounded or fused into the addition that takes it — distinct, in increasing order. A sum the
    exact evaluation lemma covers has one (each exact product's sign is known, so the lemma
    counts its magnitude on its own side only: floats.exact_sum); a sum of at most RUN_TERMS
    terms is enumerated by its subsets: a subset's values are those of each split into two
    parts, fl(x + y) for a value of each, and fl(a·b + y) where one part is a single product
    a·b, fused. None where a factor is unknown, or beyond RUN_TERMS terms, RUN_VALUES values of
    a part, or the range. A short sum whose products round (a first layer's w·x̂ + b on inputs
    no format holds) mostly takes one to three values: its error is then |x̂ − x| itself, well
    below a γ_n bound."""
    if (terms := _live(terms)) is None:
        return None  # before any product is rounded: most unknown sums are found here
    exact = [a * b for a, b in terms]
    rounded = [p if a is ONE or b is ONE else round_nearest(p, fmt) for p, (a, b) in zip(exact, terms)]  # x̂·1 = x̂
    if len(exact) <= 1:
        return tuple(rounded) or (ZERO,)
    if len(exact) > 2 and rounded == exact and exact_sum(
            [(valuation(p), abs(p), (p > 0) - (p < 0)) for p in exact], fmt) is not None:
        return (sum(exact, ZERO),)
    if len(exact) > RUN_TERMS:
        return None
    low = min(map(valuation, exact))  # every value below is an integer times 2^low: products of dyadics
    scaled = [int(p / fmpq(2) ** low) for p in exact]
    values = {1 << i: {int(r / fmpq(2) ** low)} for i, r in enumerate(rounded)}
    try:
        for T, parts in _splits(len(exact)):
            found = set()  # the exact sums of a split's values; each rounded once below
            for A, B, a, b in parts:
                found.update(x + y for x in values[A] for y in values[B])
                if a is not None:  # a single product, fused into this addition
                    found.update(scaled[a] + y for y in values[B])
                if b is not None:
                    found.update(x + scaled[b] for x in values[A])
            values[T] = {round_scaled(v, low, fmt) for v in found}
            if len(values[T]) > RUN_VALUES:
                return None
    except OverflowError:  # a partial sum past the range: the analysis's range checks speak of it
        return None
    return tuple(sorted(fmpq(v) * fmpq(2) ** low for v in values[(1 << len(exact)) - 1]))


def total(terms, fmt: Format) -> fmpq | None:
    """The float value of Σ a·b over ``terms`` where every evaluation the float model allows
    gives the same one (runs), else None."""
    values = runs(terms, fmt)
    return values[0] if values is not None and len(values) == 1 else None


def ff(values, after, bound, eta, U, b, W, writers, off, fmt: Format, branch: int = CHOICES) -> tuple:
    """The value tuples a token may take after η x + W relu(U x + b) (CHOICES at most per
    combination of its units' values; a coordinate None where not known): ``values`` before it,
    ``after`` the exact token, ``bound`` its output error bounds (a coordinate bounded by 0 is the
    exact value), ``off[k]``: unit k proven off (its relu is exactly 0 in every run). The
    parameters are the analysis's Rounded (``hat``: rounded values, ``support``: entries not 0).
    A unit of several values branches the token, while their combinations stay within ``branch``
    (the caller's share of CHOICES among a token's alternatives: the work per token stays
    bounded); beyond that those units are unknown."""
    units: dict[int, tuple | None] = {}

    def unit(k: int) -> tuple | None:
        if k not in units:
            z = runs([(U[k].hat[j], values[j]) for j in U[k].support] + [(b.hat[k], ONE)], fmt)
            units[k] = None if z is None else tuple(sorted({max(v, ZERO) for v in z}))
        return units[k]
    read = sorted({k for i, e in enumerate(bound) if e for k in writers[i] if W[i].hat[k] and not off[k]})
    several = [k for k in read if unit(k) is not None and len(unit(k)) > 1]
    if prod(len(unit(k)) for k in several) > branch:
        units.update((k, None) for k in several)
        several = []
    out = []
    for combination in product(*(unit(k) for k in several)):
        value = {k: None if unit(k) is None else unit(k)[0] for k in read} | dict(zip(several, combination))
        out.extend(choices([(after[i],) if not e else runs(
            [(eta.hat[0], values[i])] + [(w, value[k]) for k in writers[i] if (w := W[i].hat[k]) and not off[k]], fmt)
            for i, e in enumerate(bound)]))
    return tuple(out)


def forms(m, V, fmt: Format, entries: dict):
    """(V̂ m̂)_c in each form, as a function of c (None for an unknown mean ``m``): its terms
    and their float sum, V̂ m̂ dense (its entries V̂_cb = ŝ[c = b] + Σ_k û_kc v̂_kb computed in
    floats) or low-rank (ŝ m̂_c + Σ_k û_kc (v̂_k·m̂)); None where each form has an unknown term.
    They depend on the mean alone, so the tokens that share one (a sequence's tie average, an
    argmax token) share them, each coordinate's computed once. ``entries`` keeps the dense rows
    per (matrix, c)."""
    if m is None:
        return None
    s = V.scale.hat[0]

    @cache
    def at(c: int) -> tuple | None:
        if (id(V), c) not in entries:
            entries[(id(V), c)] = (V, [(j, total([(s, ONE)] * (j == c) + [(u.hat[c], w.hat[j]) for u, w in V.terms],
                                                  fmt)) for j in V.columns(len(m))])
        dense = [(e, m[j]) for j, e in entries[(id(V), c)][1]]
        low = [(s, m[c])] + [(u.hat[c], total([(w.hat[j], m[j]) for j in w.support], fmt)) for u, w in V.terms]
        if _live(dense) is None and _live(low) is None:
            return None  # an unknown term in each form: every form of the output is unknown (total)
        return tuple((terms, total(terms, fmt)) for terms in (dense, low))
    return at


def mean(tokens, fmt: Format, read) -> tuple | None:
    """The values the hardmax average of a sequence's tokens (known values) may take, all tied
    (a literal-zero A), per coordinate: those of Σ fl(1/n)·x̂_l, (Σ x̂_l)/n and (Σ x̂_l)·fl(1/n),
    each sum's every value (runs; None where it has none), on the coordinates ``read`` alone
    (V's: the others are not known). None where a token is not known."""
    if any(t is None for t in tokens):
        return None
    n = len(tokens)
    k = round_nearest(fmpq(1, n), fmt)
    out: list = [None] * len(tokens[0])
    for c in read:
        column = [t[c] for t in tokens]
        summed = runs([(ONE, v) for v in column], fmt)
        if summed is not None and (scaled := runs([(k, v) for v in column], fmt)) is not None:
            out[c] = set(scaled) | {round_nearest(v * q, fmt) for v in summed for q in (fmpq(1, n), k)}
    return tuple(out)


@lru_cache(maxsize=1 << 16)  # a collapse's codes recur across sequences
def alone(x: fmpq, fmt: Format) -> frozenset | None:
    """Every value a float run may give the softmax mean of a sequence of one token, on a coordinate
    of known value x (None: one overflows). Its weight is ê/Ŝ with Ŝ = ê = exp(0) (exp_zero); the
    mean is fl(ê/ê)·x = x, fl(fl(ê·fl(1/ê))·x), fl(fl(ê·x)/ê) or fl(fl(ê·x)·fl(1/ê)), each computed."""
    runs = {x}
    try:
        for e in exp_zero(fmt):
            r, y = round_nearest(1 / e, fmt), round_nearest(e * x, fmt)
            runs |= {round_nearest(round_nearest(e * r, fmt) * x, fmt), round_nearest(y / e, fmt),
                     round_nearest(y * r, fmt)}
    except OverflowError:
        return None
    return frozenset(runs)


def dominated(x: fmpq, slack: fmpq, weights: fmpq, fmt: Format) -> frozenset | None:
    """alone's values on a coordinate of known value x of the argmax a of a softmax whose other
    tokens vanish in every run (None where that is not shown): each float partial sum of their
    exps is at most ``weights``, of their terms of the mean at most ``slack`` in magnitude. Where
    ê_a = exp(0) + weights rounds to ê_a, Ŝ = ê_a; where each product the mean's forms round
    (x, ê·x, fl(ê·fl(1/ê))·x) rounds to one number with any term within ``slack`` added, before
    or after its rounding (fused or not; rounding is monotone), the sum with a's term is that
    term: the mean is a lone token's."""
    try:
        for e in exp_zero(fmt):
            if round_nearest(e + weights, fmt) != e:
                return None
            for p in (x, e * x, round_nearest(e * round_nearest(1 / e, fmt), fmt) * x):
                f = round_nearest(p, fmt)
                if any(round_nearest(q + s, fmt) != f for q in (p, f) for s in (slack, -slack)):
                    return None
    except OverflowError:
        return None
    return alone(x, fmt)


def choices(sets) -> tuple:
    """The value tuples that per-coordinate sets of values allow (None: unknown), every
    combination — a run's coordinates need not vary together — or, beyond CHOICES of them, one
    that leaves each coordinate of more than one value unknown."""
    options = [(None,) if v is None else tuple(sorted(v)) for v in sets]
    if prod(len(o) for o in options) > CHOICES:
        options = [o if len(o) == 1 else (None,) for o in options]
    return tuple(product(*options))


def knowable(mean, copied, bound) -> bool:
    """Whether ``attention`` may know a coordinate that errs (bound > 0): a copied one, or one
    where the mean's forms are known. Where none is, it knows none, whatever the token's values."""
    return any(e and (copied[c] or mean is not None and mean(c) is not None) for c, e in enumerate(bound))


def attention(values, mean, rho, copied, after, bound, fmt: Format) -> tuple:
    """A token's values after ρ x + V m: ``mean`` the forms of its attention mean
    (``forms`` of a copied argmax token's known values, a tie average's, a lone token's;
    None: not known), ``copied[c]``: coordinate c is ρ̂ x̂_c + 0 with ρ̂ ∈ {0, 1}; the
    rest as for ``ff``. ρ̂ x̂_c + (V̂ m̂)_c is known where every form gives it: each form of
    (V̂ m̂)_c summed together with ρ̂ x̂_c, or summed first."""
    r = rho.hat[0]
    out = []
    for c, v in enumerate(values):
        if not bound[c]:
            out.append(after[c])
        elif copied[c]:
            out.append(v if r else ZERO)
        elif mean is None or (both := mean(c)) is None:
            out.append(None)
        else:
            runs = {total([(r, v)] + terms, fmt) for terms, _ in both} | {
                total([(r, v), (summed, ONE)], fmt) for _, summed in both}
            out.append(runs.pop() if len(runs) == 1 else None)
    return tuple(out)
