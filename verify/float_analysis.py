"""The float analysis: forward error bounds of a model run in an IEEE
binary format, beside the exact replay — the proof behind the ``float``
claim (claims/float.py states what is claimed).

Proof (checked here, never by running the model in floats): forward error
analysis in the standard model (verify/floats.py), token by token, beside
the exact replay. A token carries a bound e on |x̂ − x| per coordinate. In
an FF layer each unit is *off* (pre-activation ≤ −its error bound: its relu
is exactly 0 in both runs), *on* (≥ +error: linear in both) or *uncertain*
(relu is 1-Lipschitz); the on units form an affine map
M = ηI + Σ_on W_k U_kᵀ through which the incoming error passes as |M|·e —
so a hat whose units are all on, and cancel, adds only rounding error.
Tokens outside every unit's reach (found by binary search on the tokens
sorted by their slack: projection plus their own error bound) are provably
untouched: all units off and η = 1 give x̂ back exactly. Tokens that enter
an FF layer of exact parameters exactly leave it exactly, all at once, where
the exact evaluation lemma holds on their maxima. Hardmax attention
must keep its argmax: a unique argmax with gap > 2 × the score error bound,
or an exact tie of literal zeros (A = 0).
Overflow is proven absent: every magnitude bound stays below the largest
finite number (range checks on the maxima of each sequence's tokens, which a
float run alone mixes). A sum the exact evaluation lemma covers (floats.exact_limit;
in an FF output with each term's sign) rounds nothing; where every run the
float model allows computes a token's coordinate alike (determined.py), the
token carries that value, and its error is |x̂ − x| itself.

The arithmetic of the bounds. What the model computes — tokens, projections,
scores, parameters and their roundings — is exact (rationals from the
replay). The bounds themselves are binary64 numbers rounded upward, which
keeps them rigorous and about ten times cheaper than rationals:

* ``up(x)`` is the next binary64 number above x. Round to nearest errs by
  at most half the spacing on either side of its result, so one operation
  rounded to nearest and then moved up lies above the exact result —
  subnormal and underflowing results included (their spacing is 2^-1074);
* ``add`` sums with ``math.fsum``, correctly rounded (one rounding however
  many terms), then moves up; a sum of non-negative terms is 0 only when
  every term is, and is returned as an exact 0 then (zeros decide which
  coordinates carry error and which units write);
* ``mul`` and ``div`` move every non-zero product or quotient up;
* a rational enters through ``fup``/``fdown``: the nearest binary64 number
  (int / int rounds correctly), moved outward unless it is exactly that
  number; an arb enclosure (exp) through its rational upper end;
* lower bounds (a threshold, lo − e) are minus the upper bound of the negation.

Every number a bound is compared against is converted outward (an exact
gap down, an exact projection up), so each comparison is implied by the
exact one it stands for. The stated bound is the final binary64 bound as an
exact rational. tests/rational_float_analysis.py is the same analysis in
exact rationals: on every bundle of the tests the rational bound ≤ this
bound ≤ 2 × the rational bound (tests/test_float_fast.py).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from math import frexp, fsum, inf, nextafter
from sys import float_info

from flint import arb, ctx, fmpq

from tfcert.verify import determined
from tfcert.verify.enclose import PREC, bounds, coordinate_range, is_point, projection_range
from tfcert.verify.floats import EXP_ULPS, Format, exact_limit, round_nearest, valuation
from tfcert.verify.formats import SA, LowRank, Model
from tfcert.verify.layers import Scores
from tfcert.verify.numbers import Vec, each_once, key
from tfcert.verify.shortcuts import Ranked

WHICH = ("exact", "hat", "delta")  # the three tuples of a Rounded


# ---------------------------------------------------------------- upward binary64 arithmetic

def up(x: float) -> float:
    """The next binary64 number above x: above the exact result of the one
    operation that rounded to x."""
    return nextafter(x, inf)


def add(*terms: float) -> float:
    """An upper bound on the sum, 0 exactly when the sum is 0: fsum's
    correctly rounded sum of floats is 0 only when the exact sum is, and
    where the next number up is 0 (s the least negative subnormal) s is the
    exact sum itself (a sum of floats is a multiple of that spacing)."""
    s = fsum(terms)
    return (up(s) or s) if s else 0.0


def mul(a: float, b: float) -> float:
    """An upper bound on a·b (an exact 0 when a factor is 0)."""
    return up(a * b) if a and b else 0.0


def div(a: float, b: float) -> float:
    """An upper bound on a/b for b > 0; ZeroDivisionError for b = 0 even when
    a = 0, as in rationals (a temperature that rounds to 0: 0/0 is NaN in floats)."""
    q = a / b
    return up(q) if a else q


def dot(a, b) -> float:
    """An upper bound on Σ a_j·b_j for a, b ≥ 0."""
    return add(*(mul(x, y) for x, y in zip(a, b) if x and y))


def fup(q: fmpq) -> float:
    """The least binary64 number ≥ q, or one above it (beyond the range: inf
    above, minus the largest number below, never −inf, which lies below q)."""
    if not q:
        return 0.0
    num, den = int(q.p), int(q.q)
    try:
        f = num / den  # correctly rounded
    except OverflowError:
        return inf if q > 0 else -float_info.max
    # f is finite (int / int raises on overflow); only a dyadic can be f exactly, and both ratios are in lowest terms
    return f if not den & (den - 1) and f.as_integer_ratio() == (num, den) else up(f)


def fdown(q: fmpq) -> float:
    return -fup(-q)


def sub_down(a: float, b: float) -> float:
    """A lower bound on a − b."""
    s = a - b  # 0 only when a = b, exactly (gradual underflow)
    return nextafter(s, -inf) if s else 0.0


def rational(x: float) -> fmpq:
    """A binary64 number as the exact rational it is."""
    return fmpq(*x.as_integer_ratio())


def arb_up(x: arb) -> float:
    return fup(bounds(x)[1])


@dataclass(frozen=True)
class Constants:
    """A format's constants as binary64 upper bounds (``gamma`` per k)."""
    unit: float
    tiny: float
    normal: float
    largest: float
    fmt: Format

    def gamma(self, k: int) -> float:
        return _gamma(self.fmt, k)


@lru_cache(maxsize=None)
def _gamma(fmt: Format, k: int) -> float:
    return fup(fmt.gamma(k))


def _times(a: int | None, b: int | None) -> int | None:
    """The grain of a product from its factors' (None: a factor is 0)."""
    return None if a is None or b is None else a + b


@lru_cache(maxsize=None)
def _limit(fmt: Format, exp: int) -> float:
    """floats.exact_limit as a binary64 lower bound (-1: no bound)."""
    limit = exact_limit(exp, fmt)
    return -1.0 if limit is None else fdown(limit)


def constants(fmt: Format) -> Constants:
    # u, tiny, the least normal and the largest number of every format are binary64 numbers
    return Constants(fup(fmt.unit), fup(fmt.tiny), fup(fmt.normal), fup(fmt.largest), fmt)


# ---------------------------------------------------------------- small vector bounds

class Rounded:
    """One parameter tuple and its rounding to the format: ``hat`` the
    rounded values, ``delta`` |rounded − exact| (exact rationals); for the
    bounds, upper bounds on |exact|, |hat| and delta as binary64 numbers."""

    def __init__(self, values, fmt: Format):
        self.exact = tuple(values)
        self.hat = tuple(round_nearest(v, fmt) for v in self.exact)
        delta = tuple(abs(h - v) for h, v in zip(self.hat, self.exact))
        self.bounds = {"exact": tuple(fup(abs(v)) for v in self.exact),
                       "hat": tuple(fup(abs(h)) for h in self.hat),  # exact: every format's numbers are binary64's
                       "delta": tuple(map(fup, delta))}
        self.support = tuple(j for j, (v, h) in enumerate(zip(self.exact, self.hat)) if v or h)
        self.nonzero = {which: tuple(j for j in self.support if self.bounds[which][j]) for which in WHICH}
        self.count = len(self.nonzero["hat"])
        self.rounded = any(delta)
        self.grains = tuple(map(valuation, self.hat))  # the exponent of each rounded entry's last bit (None: 0)
        self.signs = tuple((h > 0) - (h < 0) for h in self.hat)  # each rounded entry's sign
        self.power = None  # (j, v): the one entry, v = ±2^k, when the tuple is that exactly (for Sterbenz)
        if self.count == 1 and not self.rounded:  # every entry exact: none rounded to (or from) 0
            j = self.nonzero["hat"][0]
            num, den = abs(int(self.hat[j].p)), int(self.hat[j].q)
            if not num & (num - 1) and not den & (den - 1):
                self.power = (j, self.hat[j])

    def dot(self, x) -> fmpq:
        """exact · x over the entries that are not 0, exactly."""
        total = fmpq(0)
        for j in self.support:
            total += self.exact[j] * x[j]
        return total

    def absdot(self, which: str, b) -> float:
        """Σ |self_j|·b_j (an upper bound) over the entries that are not 0, b ≥ 0."""
        values = self.bounds[which]
        return add(*(mul(values[j], b[j]) for j in self.nonzero[which] if b[j]))

    def abs(self, which: str, j: int) -> float:
        return self.bounds[which][j]


@dataclass(frozen=True)
class Matrix:
    """scale·I + Σ u vᵀ with its rounded parts, for bilinear bounds."""
    scale: Rounded
    terms: tuple[tuple[Rounded, Rounded], ...]

    @property
    def transposed(self) -> Matrix:
        """scale·I + Σ v uᵀ: a score may form Âᵀ x̂_l first, whose coordinates Â x̂_i's range check does not bound."""
        return Matrix(self.scale, tuple((v, u) for u, v in self.terms))

    @property
    def literal_zero(self) -> bool:
        """Zero as stored, so the float run computes exact zeros too."""
        return self.scale.exact[0] == 0 and all(not any(u.exact) or not any(v.exact) for u, v in self.terms)

    @property
    def scaled_copy(self) -> bool:
        """M̂ = ±2^a e_c · (±2^b e_j)ᵀ, a, b ≥ 0, nothing rounded (a collapse's V, which copies the
        code): every form of M̂ m̂ multiplies m̂_j by powers of two of at least 1 — dense, by
        M̂_cj = û_c v̂_j, itself such a product; low-rank, by v̂_j, then û_c — and adds exact zeros
        (ŝ = 0, the other entries 0), so it is exact but where it overflows, which the range
        checks exclude. No lemma on m̂'s grains is needed (a softmax mean has none)."""
        if self.scale.exact[0] or self.scale.hat[0] or len(self.terms) != 1:
            return False
        u, v = self.terms[0]
        return u.power is not None and v.power is not None and abs(u.power[1]) >= 1 and abs(v.power[1]) >= 1

    def reach(self, d: int) -> int:
        """How many coordinates a float run's products with M̂ involve: d where its scale is not
        0, else the support of its rounded u's and v's — an exact 0 times anything finite is 0,
        and adding it rounds nothing, so longer sums of mostly zero terms err as the short ones."""
        if self.scale.hat[0]:
            return d
        return len({j for u, v in self.terms for j in (*u.nonzero["hat"], *v.nonzero["hat"])})

    def columns(self, d: int) -> tuple[int, ...]:
        """The coordinates of x that M x and M̂ x read, in every form: all d where the scale
        is not 0, else where some v is not 0 (exact or rounded)."""
        if self.scale.exact[0] or self.scale.hat[0]:
            return tuple(range(d))
        return tuple(sorted({j for _, v in self.terms for j in v.support}))

    def zero_row(self, c: int) -> bool:
        """Row c of the matrix is 0 as stored and rounded: its product with
        anything is an exact 0 in the float run."""
        return (self.scale.exact[0] == 0 and self.scale.hat[0] == 0
                and all(u.exact[c] == 0 and u.hat[c] == 0 for u, _ in self.terms))

    def apply_abs(self, a, which: str = "exact") -> list:
        """|M|·a for a ≥ 0, with the exact or the rounded parameters."""
        s = self.scale.abs(which, 0)
        parts = [[mul(s, x)] for x in a]
        for u, v in self.terms:
            c = v.absdot(which, a)
            if c:
                for part, ui in zip(parts, u.bounds[which]):
                    part.append(mul(ui, c))
        return [add(*p) for p in parts]

    def apply_delta(self, a) -> list:
        """A bound on |(M̂ − M)|·a."""
        parts = [[mul(self.scale.abs("delta", 0), x)] for x in a]
        for u, v in self.terms:
            c1, c2 = v.absdot("hat", a), v.absdot("delta", a)
            for part, ud, ue in zip(parts, u.bounds["delta"], u.bounds["exact"]):
                part += (mul(ud, c1), mul(ue, c2))
        return [add(*p) for p in parts]

    def bilinear(self, a, b, which: str = "exact") -> float:
        """B(a, b) = |scale|·a·b + Σ (|v|·a)(|u|·b): bounds |⟨M x, y⟩| for |x| ≤ a, |y| ≤ b."""
        return add(mul(self.scale.abs(which, 0), dot(a, b)),
                   *(mul(v.absdot(which, a), u.absdot(which, b)) for u, v in self.terms))


def _weights(ez: list, pu: list, scale: float, H: float, floor: float) -> tuple[list, list]:
    """A softmax's weights around the exact p_l ≤ pu_l: each within p_l·κ_l of it and at most
    (1 + κ_l)·p_l, κ_l = (1 + ζ_l)·scale/(1 − H) − 1 (``scale``: the normalisation's own roundings,
    1 for ê_l/Σê), plus ``floor`` (underflow); κ_l = ∞ where H ≥ 1."""
    factor = div(scale, sub_down(1.0, H)) if H < 1 else None
    kappa = [inf if factor is None else add(mul(add(1.0, z), factor), -1.0) for _, z in ez]
    return ([add(mul(k, pl), floor) for k, pl in zip(kappa, pu)],
            [add(mul(add(1.0, k), pl), floor) for k, pl in zip(kappa, pu)])


def matrix(m: LowRank, fmt: Format) -> Matrix:
    return Matrix(Rounded((m.scale,), fmt), tuple((Rounded(u, fmt), Rounded(v, fmt)) for u, v in m.terms))


def _known(values) -> tuple | None:
    """A dict key for known values (None: not known)."""
    return values and tuple(None if v is None else (v.p, v.q) for v in values)


def approx(q: fmpq | float) -> str:
    """A number for a message: 3 significant digits, or its power of two
    when a float cannot hold it."""
    if q == 0:
        return "0"
    if isinstance(q, float):
        return f"{q:.3g}"
    bits = int(abs(q.p)).bit_length() - int(q.q).bit_length()
    return f"{float(q):.3g}" if abs(bits) < 1000 else f"{'-' if q < 0 else ''}2^{bits}"


class Failed(Exception):
    """No bound can be given from this layer on; the message says why."""


# ---------------------------------------------------------------- the analysis

class Analysis:
    """Forward error bounds of the float run, fed the exact replay one step
    at a time. ``failure`` is set at the first layer where no bound can be
    given; ``bound`` (an exact rational) is the final max error otherwise."""

    def __init__(self, model: Model, sequences, fmt: Format, give_up_above: fmpq | None = None):
        """``give_up_above``: stop (as a failure) once some error bound exceeds
        it — for a caller that only wants useful bounds (construct); an error bound, so ≥ 0
        (an error of 0 never exceeds it: _exact_layer need not ask)."""
        if give_up_above is not None and give_up_above < 0:
            raise ValueError(f"give_up_above {give_up_above} < 0")
        self.model, self.fmt, self.d = model, fmt, model.d
        self.c = constants(fmt)
        self.give_up_above = give_up_above
        self._give_up = None if give_up_above is None else fdown(give_up_above)
        self.offsets, flat = [], []
        self.longest = max(map(len, sequences), default=0)
        for seq in sequences:
            self.offsets.append(len(flat))
            flat.extend(seq)
        self._exact_err = (0.0,) * self.d  # every error-free token's: _widen's ``seen`` knows a cluster by it
        self.failure: str | None = None
        self.bound: fmpq | None = None
        self.uncertain: str | None = None  # the first ReLU the float run may switch: where bounds start to grow
        self._last: dict[str, tuple] = {"ff": (None,), "sa": (None,)}  # by layer: (parameters, rounded)
        self._seen: dict[str, tuple] = {"ff": (None, None), "sa": (None, None)}  # by layer: checked (rounded, X)
        self._rounding: dict[tuple, Rounded] = {}  # by key(values)
        self._by_ids: dict[tuple, tuple] = {}  # by the entries' ids: (values, Rounded)
        self._canon: dict[int, tuple] = {}  # by id(row): the row and its direction (_direction)
        self._dense: dict[int, tuple] = {}  # by id(V): V and its dense entries (_entries)
        self._rows: dict[tuple, tuple] = {}  # by (id(V), c): V and its dense row c in floats (determined.forms)
        self._shared: dict[tuple, tuple] = {}  # one copy of each grain tuple (tokens share them)
        self._inputs: dict[int, tuple] = {}  # by id: an input value's rounding and size (_input)
        try:  # val: per token its known values (determined.py) where they are not all exact
            self.val, self.err, mags = map(list, zip(*map(self._entered, flat))) if flat else ([], [], [])
        except OverflowError as exc:
            self.failure = f"the input does not fit {fmt.name}: {exc}"
            self.err, self.val, flat, mags = [], [], [], []
        # gr: per token, where some coordinate errs, an exponent per coordinate (None: not known) that
        # its float value is a multiple of in every run, from the terms it was computed from (_floor)
        self.gr: list = [None] * len(self.err)
        # alt: per token, where its known values are one of a few tuples (a lone token's softmax
        # mean, rounded one way or another), those tuples; val then holds what they share
        self.alt: list = [None] * len(self.err)
        self._refresh(flat, mags)
        self._inputs.clear()

    # ---- helpers

    def _ref(self, g: int) -> list[int]:
        """[sequence position, token] of flat token g."""
        j = bisect_right(self.offsets, g) - 1
        return [j, g - self.offsets[j]]

    def _input(self, v: fmpq) -> tuple:
        """(v, v rounded to the format, fup(|v|)), once per value object: a parse gives equal
        numbers one object (numbers.parse_number). At most 2^17 are kept, each with its object,
        so that an id names one object while it is kept."""
        if (known := self._inputs.get(id(v))) is None:
            known = (v, round_nearest(v, self.fmt), fup(abs(v)))
            if len(self._inputs) < 1 << 17:
                self._inputs[id(v)] = known
        return known

    def _entered(self, x: Vec) -> tuple:
        """(known values, error bounds, magnitude bounds) of input token x, which a float run
        reads rounded to the format: values None where every coordinate is a number of it."""
        known = [self._input(v) for v in x]
        values = tuple(k[1] for k in known)
        if values == x:
            return None, self._exact_err, [k[2] for k in known]
        err = tuple(fup(abs(h - v)) for h, v in zip(values, x))
        return values, err, [add(k[2], e) if e else k[2] for k, e in zip(known, err)]

    def _values(self, g: int, x, e):
        """Token g's known values (determined.py; None: none): ``val[g]``, or where that
        is not kept, x_j for each coordinate whose error bound is 0 (x̂_j = x_j)."""
        if self.val[g] is not None or not is_point(x):
            return self.val[g]
        return tuple(v if not ej else None for v, ej in zip(x, e)) if not all(e) else None

    def _alternatives(self, g: int, x, e) -> tuple:
        """Token g's alternatives (``alt[g]``), else its known values alone (() where none)."""
        return self.alt[g] or ((v,) if (v := self._values(g, x, e)) else ())

    def _settle(self, runs, x, bound) -> tuple:
        """(errors, values, alternatives) of a token whose float values are one of ``runs`` (value
        tuples, None where not known; () where none is), exact value x and error bounds ``bound``:
        a coordinate every run knows errs by the largest |x̂ − x| itself. Values are kept only
        where some coordinate is known and not exact: what the runs share, and the runs where they
        differ, at most CHOICES of them (a mean's and a token's alternatives multiply)."""
        runs = tuple(dict.fromkeys(runs))
        known = [bool(runs) and all(r[c] is not None for r in runs) for c in range(len(bound))]
        err = bound if not is_point(x) else tuple(  # an enclosure's bound stands
            fup(max(abs(r[c] - xi) for r in runs)) if e and k else e
            for c, (xi, e, k) in enumerate(zip(x, bound, known)))
        if not any(e and k for e, k in zip(err, known)):
            return (err if err != bound else bound), None, None
        values = tuple(v if all(r[c] == v for r in runs) else None for c, v in enumerate(runs[0]))
        return (err if err != bound else bound), values, (runs if 1 < len(runs) <= determined.CHOICES else None)

    def _fixed(self, x) -> tuple:
        """Per coordinate the exact value where it is one number (all of a point's), else None."""
        if is_point(x):
            return x
        return tuple(lo if lo == hi else None for lo, hi in (coordinate_range(x, j) for j in range(self.d)))

    def _mag(self, x, e) -> list:
        """Per coordinate: a bound on |x̂| (and on |x| over the enclosure)."""
        if is_point(x):
            return [add(fup(abs(v)), ej) if ej else fup(abs(v)) for v, ej in zip(x, e)]
        return [add(fup(max(abs(lo), abs(hi))), ei) for (lo, hi), ei in
                ((coordinate_range(x, j), e[j]) for j in range(self.d))]

    def _refresh(self, flat, mags=None) -> None:
        """Every token's magnitude bound (``mag``, kept beside ``err`` until
        the token or its error changes; ``mags`` where known), the global per-coordinate
        maxima of |x̂| and the largest error; the reach lists are built again when asked."""
        self.reach: dict[tuple, tuple[Rounded, Ranked]] = {}  # by key(row.exact)
        if mags is None:
            mags, last = [], (None, None, None)
            for x, e in zip(flat, self.err):
                if x is not last[0] or e is not last[1]:  # a run of tokens sharing a tuple and errors (an argmax's)
                    last = x, e, self._mag(x, e)
                mags.append(last[2])
        self.mag = mags
        self.X = [max(column) for column in zip(*self.mag)] if self.mag else [0.0] * self.d  # mags are ≥ 0
        self.worst = 0.0  # the largest error bound, kept only for give_up_above
        if self.give_up_above is not None:
            self.worst = max((max(e, default=0.0) for e in self.err), default=0.0)

    def _widen(self, g: int, x, seen: dict) -> None:
        """Token g is now x with error err[g]: its magnitude, the maxima, and
        its place in each reach list. ``seen`` (by id of the error tuple, kept
        alive there): a token of this layer equal to x with the same error has
        the same magnitude and slacks, functions of both (a snap's cluster),
        and is already in the maxima."""
        e = self.err[g]
        same = seen.get(id(e))
        fresh = same is None or same[0] != x
        self.mag[g] = self._mag(x, e) if fresh else same[1]
        slacks = [self._slack(row, g, x) for row, _ in self.reach.values()] if fresh else same[2]
        for (_, ranked), slack in zip(self.reach.values(), slacks):
            ranked.move(g, slack)
        if fresh:
            seen[id(e)] = (x, self.mag[g], slacks, e)
            self.X = list(map(max, self.X, self.mag[g]))
            if self.give_up_above is not None:
                self.worst = max(self.worst, *e)

    def _check_range(self, value: float, what: str) -> None:
        """Every partial sum of terms whose magnitudes add up to ``value`` is at
        most (1 + γ)·value ≤ 2·value: below the largest number, nothing overflows."""
        if 2 * value >= self.c.largest:
            raise Failed(f"{what} may overflow {self.fmt.name} (magnitude bound {approx(value)})")

    def _ranges(self, checks) -> None:
        """A layer's range checks, (measure, what) with measure(X, n) a magnitude bound from the
        maxima X of the tokens' |x̂| per coordinate and their sequence's length n: on the maxima
        over every token first, and where one fails there, on each sequence's own, first to last.
        A float run mixes the tokens of one sequence only, so a sequence's maxima suffice; the
        first sequence that fails is named, and a shard of whole sequences finds the same one."""
        if all(2 * measure(self.X, self.longest) < self.c.largest for measure, _ in checks):
            return
        for j, (start, end) in enumerate(zip(self.offsets, [*self.offsets[1:], len(self.mag)])):
            X = [max(column) for column in zip(*self.mag[start:end])]
            for measure, what in checks:
                self._check_range(measure(X, end - start), f"sequence {j}: {what}")

    def _rounded(self, k: int, layer: str):
        """Layer k's parameters rounded, kept for the layer that follows while
        it is the same object (a model's equal blocks are: read_model) or, for
        attention, equal (a construction's identity layers between its hats)."""
        part = getattr(self.model.blocks[k], layer)
        if self._last[layer][0] is not part and (layer == "ff" or self._last[layer][0] != part):
            if layer == "ff":
                W = tuple(self._round(r) for r in part.W)
                writers = tuple(row.support for row in W)  # the units with a weight on coordinate i, exact or rounded
                self._last[layer] = part, (self._round((part.eta,)), tuple(self._round(r) for r in part.U),
                                           self._round(part.b), W, writers)
            else:
                self._last[layer] = part, (Rounded((part.rho,), self.fmt), matrix(part.A, self.fmt),
                                           matrix(part.V, self.fmt))
        return self._last[layer][1]

    def _checked(self, layer: str, params) -> bool:
        """Whether the layer's range checks, which depend on its parameters and
        the maxima X alone, passed with these very ones and equal maxima (X is never
        changed in place): a run of equal blocks checks the first, and so do the
        identity attention layers of a hat phase, whose hats move a token or two."""
        seen, self._seen[layer] = self._seen[layer], (params, self.X)  # if a check fails, the analysis stops
        return seen[0] is params and seen[1] == self.X

    def _round(self, values) -> Rounded:
        """Rounded(values), one per distinct tuple: FF layers repeat their rows. Looked up by
        the ids of the entries first (a parse gives equal numbers one object; the memo holds
        the tuple, so its entries stay alive and their ids name them), then by value."""
        ids = tuple(map(id, values))
        if (known := self._by_ids.get(ids)) is None:
            name = key(values)
            if name not in self._rounding:
                self._rounding[name] = Rounded(values, self.fmt)
            known = self._by_ids[ids] = (tuple(values), self._rounding[name])
        return known[1]

    # ---- driver

    def step(self, step) -> None:
        if self.failure is not None or step.layer == "end":
            return
        flat_before, flat_after = step.flat_before, step.flat_after
        where = f"block {step.block} {step.layer.upper()}"
        try:
            if step.layer == "ff":
                self._ff(step, flat_before, flat_after, where)
            else:
                self._sa(step, flat_before, flat_after, where)
            if self._give_up is not None and self.worst > self._give_up:
                raise Failed(self._gave_up())
        except (Failed, OverflowError) as exc:
            self.failure = f"{where}: {exc}" + (f" (the first ReLU a float run may switch: {self.uncertain})"
                                                 if self.uncertain else "")
        except (ArithmeticError, ValueError) as exc:  # ValueError: inf − inf in a sum (fsum)
            self.failure = f"{where}: not checked: {exc}"

    def _gave_up(self) -> str:
        return f"an error bound exceeds {approx(self.give_up_above)}"

    def finish(self) -> None:
        worst = max((max(e, default=0.0) for e in self.err), default=0.0)
        if self.failure is None and worst == inf:  # no range check let one through; never a bound of inf
            self.failure = "the final error bound is not finite"
        if self.failure is None:
            self.bound = rational(worst)

    # ---- feed-forward

    def _ff(self, step, before, after, where: str) -> None:
        eta, U, b, W, writers = params = self._rounded(step.block, "ff")
        if not self._checked("ff", params):
            self._ranges([(lambda X, n, row=row, k=k: add(row.absdot("hat", X), b.abs("hat", k)),
                           f"unit {k}'s pre-activation") for k, row in enumerate(U)])
        todo = self._ff_reach(before, U, b, W, eta)
        exact = self._exact_layer(before, todo, eta, U, b, W, writers)
        done: dict[tuple, tuple] = {}  # equal tokens with equal errors (a cluster at a snap): one bound
        for g in todo:
            if g in exact:  # what _ff_token would find: every sum exact, every output error 0
                self.err[g], self.val[g], self.gr[g], self.alt[g] = self._exact_err, None, None, None
                continue
            same = (key(before[g]), self.err[g], _known(self.val[g]), self.gr[g]) if is_point(before[g]) else None
            if same not in done:
                try:
                    done[same] = self._ff_token(before[g], self.err[g], self.mag[g], self.val[g], self.gr[g], eta, U,
                                                b, W, writers, lambda: f"{where}: token {self._ref(g)}")
                except Failed as exc:  # named, so that shards of the dataset report the token one process does
                    raise Failed(f"token {self._ref(g)}: {exc}") from None
            bound, off, grains = done[same] if same is not None else done.pop(None)
            self.gr[g] = self._keep(grains, bound)
            runs = self._alternatives(g, before[g], self.err[g]) if any(bound) and is_point(after[g]) else ()
            runs = [r for v in runs for r in determined.ff(v, after[g], bound, eta, U, b, W, writers, off, self.fmt,
                                                          determined.CHOICES // len(runs))]
            self.err[g], self.val[g], self.alt[g] = self._settle(runs, after[g], bound)
            if self._give_up is not None and max(self.err[g], default=0.0) > self._give_up:
                raise Failed(self._gave_up())  # at once: a low precision may make every token uncertain
        if len(todo) == len(before):
            self._refresh(after)
        else:
            seen: dict[int, tuple] = {}
            for g in todo:
                self._widen(g, after[g], seen)

    def _exact_layer(self, before, todo, eta, U, b, W, writers) -> set[int]:
        """The tokens of ``todo`` that enter exactly (points, errors 0) and leave exactly, shown
        at once: where no parameter rounds and the exact evaluation lemma holds for every sum of
        the layer on the maxima over those tokens (per coordinate the least grain, the largest
        magnitude), it holds for each token's own sums, and _ff_token gives each errors of 0
        (each pre-activation a number of the format: on or off, never uncertain)."""
        if eta.rounded or b.rounded or any(r.rounded for r in (*U, *W)):
            return set()
        entered = {g for g in todo if is_point(before[g]) and not any(self.err[g])}
        if not entered:
            return entered
        least = []  # per coordinate: the least grain of a nonzero value (None: every value 0)
        for column in zip(*(before[g] for g in entered)):
            least.append(min((valuation(v) for v in each_once(column) if v), default=None))
        X = self.X  # at least every token's magnitude bound
        floor, size = [], []  # per unit: its output's least grain, a bound on its relu's magnitude bound
        for k, row in enumerate(U):
            terms = [(b.grains[k], b.abs("hat", k))] + [(_times(row.grains[j], least[j]), mul(row.abs("hat", j), X[j]))
                                                          for j in row.nonzero["hat"]]
            floor.append(self._exact(terms))
            size.append(up(up(add(*(t[1] for t in terms)))))  # ≥ up(fup(|z_k|)): _ff_token's, its error 0
        if None in floor:
            return set()
        for i in range(self.d):
            if eta.hat[0] in (0, 1) and not writers[i]:
                continue
            grid = [(_times(eta.grains[0], least[i]), mul(eta.abs("hat", 0), X[i]))] + [
                (_times(W[i].grains[k], floor[k]), mul(W[i].abs("hat", k), size[k])) for k in writers[i]]
            if self._exact(grid) is None or 2 * add(*(t[1] for t in grid)) >= self.c.largest:
                return set()
        return entered

    def _slack(self, row: Rounded, g: int, x: Vec) -> float:
        """An upper bound on w·x plus the error of w·x̂ + b̂ for token g (its
        own magnitude and error) but for the bias's part: b's rounding, γ|b̂|
        and the underflow terms, with γ and the underflow counting the bias as
        a term whatever it is. A unit on row w is off for g when this is at
        most −b − that part (as in _ff_token, where it is the error bound)."""
        mag = self.mag[g]
        top = row.dot(x) if is_point(x) else projection_range(x, row.exact, None)[1]  # over an enclosure: its most
        return add(fup(top), row.absdot("delta", mag), row.absdot("exact", self.err[g]),
                   mul(self.c.gamma(row.count + 1), row.absdot("hat", mag)))

    def _ff_reach(self, before, U, b, W, eta) -> list[int]:
        """Tokens that some unit may reach: every other token has all its
        units off (pre-activation ≤ −its error bound) and η = 1, so x̂ passes
        unchanged (an enclosure: at each of its points, so the exact token is
        unchanged too). Found by binary search in the tokens sorted by their
        slack on each row (the reach list, kept as tokens change)."""
        if eta.exact[0] != 1 or eta.hat[0] != 1:
            return list(range(len(before)))
        todo: set[int] = set()
        for k, row in enumerate(U):
            if not any(w.exact[k] or w.hat[k] for w in W):
                continue  # a unit that writes nothing: 0·relu(finite) = 0 exactly
            c = row.count + 1
            rest = add(b.abs("delta", k), mul(self.c.gamma(c), b.abs("hat", k)), mul(c, self.c.tiny))
            threshold = sub_down(fdown(-b.exact[k]), rest)  # a lower bound on −b − rest
            if not any(row.exact):
                if threshold < 0:
                    return list(range(len(before)))  # a constant unit that may be on: it shifts every token
                continue
            row, threshold = self._direction(row, threshold)
            if (name := key(row.exact)) not in self.reach:
                self.reach[name] = (row, Ranked([self._slack(row, g, x) for g, x in enumerate(before)]))
            todo.update(self.reach[name][1].inside(threshold, None))
        return sorted(todo)

    def _direction(self, row: Rounded, threshold: float) -> tuple[Rounded, float]:
        """Row g·r, g the power of two that puts r's first entry in [1, 2), and the threshold
        for r: one reach list per direction, however each hat's units are scaled. Where the
        format rounds g·r to g times r's rounding (no overflow, no subnormal), each term of the
        slack scales by g, so a token whose slack on r is at most threshold/g (a lower bound)
        has its slack on g·r at most threshold; otherwise the row keeps a list of its own."""
        if (known := self._canon.get(name := id(row))) is None:  # once per row (a hat's units share it)
            first = next(v for v in row.exact if v)
            g = fmpq(2) ** (int(abs(first).p).bit_length() - int(abs(first).q).bit_length())
            g = g / 2 if abs(first) < g else g
            canon = self._round(tuple(v / g for v in row.exact))
            scaled = g != 1 and all(h * g == rh for h, rh in zip(canon.hat, row.hat))
            self._canon[name] = known = row, (canon, g) if scaled else None  # the row kept alive: its id stays its
        if known[1] is None:
            return row, threshold
        canon, g = known[1]
        t = threshold / float(g)  # exact but where it underflows or overflows
        if t in (inf, -inf) or threshold in (inf, -inf):
            return row, threshold
        return canon, nextafter(t, -inf) if rational(t) * g > rational(threshold) else t

    def _sterbenz(self, x, e, row: Rounded, b: Rounded, k: int) -> bool:
        """Whether unit k's pre-activation is computed exactly: one input
        coordinate times a power of two (exact, the product staying normal),
        plus a bias that is 0 or within a factor 2 of minus that product —
        Sterbenz's lemma (Higham, Thm 2.5): y/2 ≤ x ≤ 2y makes x − y exact."""
        if row.power is None:
            return False
        j, v = row.power
        lo, hi = (x[j], x[j]) if is_point(x) else coordinate_range(x, j)
        ej = rational(e[j])
        a_lo, a_hi = sorted((v * (lo - ej), v * (hi + ej)))
        y = -b.hat[k]
        normal = self.fmt.normal
        if y == 0:
            return a_lo > 0 and a_lo >= normal or a_hi < 0 and -a_hi >= normal
        if y < 0:
            a_lo, a_hi, y = -a_hi, -a_lo, -y
        return a_lo >= y / 2 and a_hi <= 2 * y and a_lo >= normal

    def _grain(self, x, e, j: int, values=None, stored=None) -> int | None:
        """An exponent v with x̂_j a multiple of 2^v (None: x̂_j = 0 exactly) — x_j's own where
        its error bound is 0 (x̂_j = x_j), x̂_j's where it is known, else the larger of the one
        a lower bound on |x̂_j| gives (its binade's spacing) and ``stored[j]`` (from its terms)."""
        if not e[j] and is_point(x):
            return valuation(x[j])
        if values is not None and values[j] is not None:
            return valuation(values[j])
        lo, hi = (x[j], x[j]) if is_point(x) else coordinate_range(x, j)
        least = sub_down(fdown(min(abs(lo), abs(hi)) if lo * hi > 0 else fmpq(0)), e[j])
        v = self._grain_above(max(least, 0.0))
        return v if stored is None or stored[j] is None else max(v, stored[j])

    def _grain_above(self, lower: float) -> int:
        """floats.grain of a binary64 lower bound ≥ 0, read off its exponent: lower = f·2^E
        with ½ ≤ f < 1 (frexp), so ⌊log2 lower⌋ = E − 1 (the least normal is a binary64 number)."""
        if lower < self.c.normal:
            return self.fmt.emin - self.fmt.precision + 1
        return frexp(lower)[1] - self.fmt.precision

    def _floor(self, grains) -> int:
        """The grain of any float evaluation of a sum of terms with these grains (None: an exact 0),
        in any order, fused or not: every exact intermediate result is a multiple of 2^v, v the
        least of them, and rounding to nearest keeps it one (the result is either representable,
        or rounded to a multiple of a spacing above 2^v). All terms 0: the sum is 0, any grain."""
        return min((g for g in grains if g is not None), default=self.fmt.emax)

    def _keep(self, grains, bound):
        """The grains kept for a token: only where some coordinate errs, one copy of each tuple."""
        if not any(bound):
            return None
        grains = tuple(grains)
        return self._shared.setdefault(grains, grains)

    def _exact(self, terms) -> int | None:
        """floats.exact_sum on terms (exponent, magnitude bound as a binary64 upper bound[, sign])."""
        terms = [t for t in terms if t[0] is not None and t[1]]
        if not terms:
            return self.fmt.emax
        exp = min(t[0] for t in terms)
        pos = add(*(t[1] for t in terms if len(t) < 3 or t[2] >= 0))
        neg = add(*(t[1] for t in terms if len(t) < 3 or t[2] <= 0))
        return exp if max(pos, neg) <= _limit(self.fmt, exp) else None

    def _sign(self, x, e, j: int) -> int:
        """1 where x̂_j ≥ 0 in every run (its exact range less its error bound), −1 where ≤ 0, else 0."""
        lo, hi = (x[j], x[j]) if is_point(x) else coordinate_range(x, j)
        return 1 if fdown(lo) >= e[j] else -1 if fup(hi) <= -e[j] else 0

    def _ff_token(self, x, e, mag, values, stored, eta, U, b, W, writers, where) -> tuple:
        """(bounds, off, grains): the output's error bounds, per unit whether it is
        proven off, and the output's grains (_floor). ``mag``: the token's magnitude bound,
        ``values`` its known values (None: none), ``stored`` its grains; ``writers[i]``: the units with a
        nonzero weight on output coordinate i (exact or rounded); ``where()``
        names the token for a message. A sum the exact evaluation lemma covers
        (floats.exact_limit: every term on one grid, few enough bits) has no
        rounding: only its parameters' rounding and its operands' errors."""
        c, d = self.c, self.d
        known: dict[int, int | None] = {}

        def gx(j: int) -> int | None:  # coordinate j's grain, found where a sum needs it
            if j not in known:
                known[j] = self._grain(x, e, j, values, stored)
            return known[j]
        status, dz, rho, smag, gs = [], [], [], [], []
        point = is_point(x)
        b_hat, b_delta = b.bounds["hat"], b.bounds["delta"]
        for k, row in enumerate(U):
            lo, hi = (row.dot(x),) * 2 if point else projection_range(x, row.exact, None)
            lo, hi = lo + b.exact[k], hi + b.exact[k]
            r_hat, nonzero = row.bounds["hat"], row.nonzero["hat"]
            term_grains = [b.grains[k]] + [_times(row.grains[j], gx(j)) for j in nonzero]
            exact = self._sterbenz(x, e, row, b, k) or self._exact(list(zip(term_grains, [b_hat[k]] + [
                mul(r_hat[j], mag[j]) for j in nonzero]))) is not None
            g = self._floor(term_grains)
            if exact:  # computed exactly: only the parameters' rounding and the operands' errors
                rounding = add(row.absdot("delta", mag), b_delta[k])
            else:
                n = row.count + (b.signs[k] != 0)
                scaled = add(row.absdot("hat", mag), b_hat[k])
                rounding = add(row.absdot("delta", mag), b_delta[k], mul(c.gamma(max(n, 1)), scaled),
                               mul(n, c.tiny))
            err = add(row.absdot("exact", e), rounding)
            least = sub_down(fdown(lo), err)  # σ̂_k = relu(ẑ_k) is 0 or ẑ_k ≥ least
            g = max(g, self._grain_above(max(least, 0.0)))
            if not err and lo == hi and lo:  # ẑ_k = z_k: a multiple of its own lowest bit
                g = max(g, valuation(lo))
            if add(fup(hi), err) <= 0:
                status.append("off")
                smag.append(0.0)
            else:
                status.append("on" if least >= 0 else "uncertain")
                smag.append(add(fup(abs(lo) if point else max(abs(lo), abs(hi))), err))
                if status[-1] == "uncertain" and self.uncertain is None:
                    self.uncertain = (f"{where()}: unit {k}'s pre-activation [{approx(lo)}, {approx(hi)}] "
                                      f"is within its error bound {approx(err)} of 0")
            dz.append(err)
            rho.append(rounding)
            gs.append(g)
        copy = eta.exact[0] == 1 and eta.hat[0] == 1
        plain = copy or eta.exact[0] == 0 and eta.hat[0] == 0
        # where no live unit writes, every term but η̂ x̂_i is 0·relu or Ŵ·0: x̂_i + 0 + … = x̂_i, 0·x̂_i + … = 0
        out = list(e) if copy else [0.0] * d
        grains = list(stored) if copy and stored else [None] * d  # a copied x̂_i keeps its grain
        erred = [j for j, v in enumerate(e) if v]
        eta_delta, eta_hat, eta_sign = eta.bounds["delta"][0], eta.bounds["hat"][0], eta.signs[0]
        for i in range(d):
            live = [k for k in writers[i] if status[k] != "off"]
            if plain and not live:
                continue
            w = W[i]
            w_exact, w_delta, w_hat = w.bounds["exact"], w.bounds["delta"], w.bounds["hat"]
            total = [mul(eta_delta, mag[i])]
            terms = [mul(eta_hat, mag[i])]
            # each term's sign: η̂ x̂_i's from x̂_i's; Ŵ_ik σ̂_k's is Ŵ_ik's, a relu being ≥ 0
            grid = [(_times(eta.grains[0], gx(i)) if eta_sign else None, terms[0],
                     eta_sign * self._sign(x, e, i))]
            count = int(eta_sign != 0)
            on = []
            for k in live:
                if status[k] == "on":
                    if w.exact[k]:
                        on.append(k)
                        total.append(mul(w_exact[k], rho[k]))
                else:
                    total.append(mul(w_exact[k], dz[k]))
                total.append(mul(w_delta[k], smag[k]))
                terms.append(mul(w_hat[k], smag[k]))
                grid.append((_times(w.grains[k], gs[k]), terms[-1], w.signs[k]))
                count += w.signs[k] != 0
            terms = add(*terms)
            self._check_range(terms, f"coordinate {i + 1} of the FF output")
            for j in erred:  # |M|·e, M's row i = η e_i + Σ_on W_ik U_k, over the j with e_j ≠ 0
                m = (eta.exact[0] if j == i else fmpq(0)) + sum((W[i].exact[k] * U[k].exact[j] for k in on), fmpq(0))
                total.append(mul(fup(abs(m)), e[j]))
            if self._exact(grid) is None:  # else the sum is computed exactly: no rounding of its own
                total += (mul(c.gamma(max(count, 1)), terms), mul(count, c.tiny))
            out[i] = add(*total)
            grains[i] = self._floor(t[0] for t in grid)
        return tuple(out), tuple(v == "off" for v in status), grains

    # ---- attention

    def _sa(self, step, before, after, where: str) -> None:
        rho, A, V = params = self._rounded(step.block, "sa")
        softmax = self.model.attention == "softmax"
        if not self._checked("sa", params):
            for name, m in (("A", A), ("V", V)):
                self._check_entries(m, name)
            checks = [*self._matrix_checks(A, "A"), *self._matrix_checks(A.transposed, "Aᵀ"),
                      *self._matrix_checks(V, "V"), (lambda X, n: A.bilinear(X, X, "hat"), "an attention score"),
                      # the low-rank form's scale·⟨x_i, x_l⟩ forms ⟨x̂_i, x̂_l⟩ first, with a scale of 0 too (0·inf = NaN)
                      (lambda X, n: dot(X, X), "⟨x_i, x_l⟩ (before the scale)"),
                      (lambda X, n: mul(n, max(X, default=0.0)), "the sum of an attention average")]
            if softmax:  # every softmax layer scales its scores by 1/τ̂: 0/0 is NaN where τ̂ = 0
                if not (tau := round_nearest(self.model.temperature, self.fmt)) > 0:
                    raise Failed(f"the temperature rounds to 0 in {self.fmt.name}: 0/0 is NaN")
                checks.append((lambda X, n: div(A.bilinear(X, X, "hat"), fdown(tau)), "a scaled attention score"))
            self._ranges(checks)
        if rho.exact[0] == 1 and rho.hat[0] == 1 and V.literal_zero:
            return  # x̂ + 0·(finite) = x̂ exactly
        plain = rho.exact[0] == rho.hat[0] and rho.hat[0] in (0, 1)  # ρ̂ x̂_c is x̂_c or 0, exactly
        copied = [plain and V.zero_row(c) for c in range(self.d)]  # and V's row c is 0: x̂_c + 0 or 0 + 0
        read = V.columns(self.d)  # the coordinates of a mean that V reads
        forget = rho.exact[0] == 0 and rho.hat[0] == 0  # the output is V m_i alone
        new, values, gr, alts, sa = [], [], [], [], self.model.blocks[step.block].sa
        for j, seq in enumerate(step.before):
            o = self.offsets[j]
            errs = self.err[o:o + len(seq)]
            mags = self.mag[o:o + len(seq)]
            vals, stored = self.val[o:o + len(seq)], self.gr[o:o + len(seq)]
            known = None  # how the known values of a token's attention mean are found: ``mean(i)``
            if softmax and len(seq) == 1 and is_point(seq[0]):  # ŝ/τ̂ is finite: the checks above
                lone = self._values(o, seq[0], errs[0]) or (None,) * self.d
                runs = [None if lone[c] is None or c not in read else determined.alone(lone[c], self.fmt)
                        for c in range(self.d)]
                means, known = [self._alone(seq[0], mags[0], errs[0], lone, runs)], "alone"
            elif A.literal_zero:
                means = [self._uniform(seq, mags, errs, softmax, read)] * len(seq)
                known = "tied" if not softmax else None
            elif softmax:
                means = self._softmax(seq, mags, errs, A, sa, j, read)
                known = [m[3] if len(m) > 3 else None for m in means]  # a dominated mean's known values
            elif step.attention is None:  # the replay took A (or V, with ρ = 1) as the zero matrix it is
                raise Failed(f"{'A' if step.uniform else 'V'} is the zero matrix but not stored as 0: "
                             f"its float products need not be exact zeros")
            else:
                means = self._hardmax(step.attention[j], seq, mags, errs, vals, stored, A, sa, j)
                known = [att.argmax[0] for att in step.attention[j]]  # unique: _hardmax proved it
            per_mean, outs, known_means, grains = {}, {}, {}, {}  # by the mean (a hardmax mean is its argmax's)

            def mean(i: int) -> list:
                """determined.forms of each alternative of token i's mean's known values, once per
                mean (by its argmax token; the tie; the lone token): its argmax token's, the tie
                average, or a lone or dominant token's, each value a run may give."""
                if (at := known[i] if isinstance(known, list) else known) not in known_means:
                    if known == "alone":
                        ms = determined.choices(runs)
                    elif known == "tied":  # a literal-zero A: every token of the sequence tied
                        tie = determined.mean([self._values(o + l, x, e) for l, (x, e) in enumerate(zip(seq, errs))],
                                              self.fmt, read)
                        ms = (None,) if tie is None else determined.choices(tie)
                    elif softmax:  # a dominated mean's values per coordinate (None: not dominated)
                        ms = determined.choices(at) if at is not None else (None,)
                    else:
                        ms = self._alternatives(o + at, seq[at], errs[at]) or (None,)
                    known_means[at] = [determined.forms(m, V, self.fmt, self._rows) for m in ms]
                return known_means[at]
            for i, e in enumerate(errs):
                which = (id(means[i][0]), id(means[i][1]))
                if which not in per_mean:
                    per_mean[which] = self._sa_out(means[i], rho, V, copied)
                if (slot := which if forget else i) not in outs:  # with ρ = 0 the bound is the mean's alone
                    try:
                        outs[slot] = per_mean[which](mags[i], e)
                    except Failed as exc:  # named, as in _ff
                        raise Failed(f"token [{j}, {i}]: {exc}") from None
                x, found = after[o + i], []
                if any(outs[slot]) and any(determined.knowable(f, copied, outs[slot]) for f in mean(i)):
                    fixed = self._fixed(x)
                    found = [determined.attention(v, f, rho, copied, fixed, outs[slot], self.fmt)
                             for v in self._alternatives(o + i, seq[i], e) for f in mean(i)]
                bound, v, a = self._settle(found, x, outs[slot])
                new.append(bound)
                values.append(v)
                alts.append(a)
                if any(bound) and len(means[i]) > 2:  # a copied argmax token, a lone or dominant one: m̂'s grains
                    if (at := which if not rho.hat[0] else i) not in grains:  # with ρ̂ = 0, the mean's alone
                        grains[at] = self._sa_grains(rho, V, copied, means[i][2], lambda c: self._grain(
                            seq[i], e, c, vals[i], stored[i]))
                    gr.append(self._keep(grains[at], bound))
                else:
                    gr.append(None)
        self.err, self.val, self.gr, self.alt = new, values, gr, alts
        self._refresh(after)

    def _sa_grains(self, rho: Rounded, V: Matrix, copied: list[bool], gm: list, gq) -> list:
        """The grains (_floor) of ρ̂ x̂_c + (V̂ m̂)_c, m̂ a copied token of grains gm, gq(c) x̂_c's:
        in either form V̂ m̂ sums products of ŝ m̂_c and of û_kc v̂_kb m̂_b (a dense entry
        ŝ[c = b] + Σ_k û_kc v̂_kb first, or v̂_k·m̂ first)."""
        out = []
        for c in range(self.d):
            terms = [_times(rho.grains[0], gq(c))] if rho.hat[0] else []
            if not copied[c]:
                terms.append(_times(V.scale.grains[0], gm[c]))
                terms += [_times(_times(u.grains[c], v.grains[b]), gm[b])
                          for u, v in V.terms if u.hat[c] for b in v.nonzero["hat"]]
            out.append(self._floor(terms))
        return out

    def _check_entries(self, m: Matrix, name: str) -> None:
        """A dense scale·I + Σ u vᵀ stays finite."""
        entry = add(m.scale.abs("hat", 0), *(mul(max(u.bounds["hat"]), max(v.bounds["hat"])) for u, v in m.terms))
        self._check_range(entry, f"an entry of {name}")

    @staticmethod
    def _matrix_checks(m: Matrix, name: str) -> list:
        """_ranges' checks that m's product with a token (or a mean of tokens: 2X bounds
        one) and the low-rank intermediates v·x, u·x stay finite."""
        return [(lambda X, n: 2 * max(m.apply_abs(X, "hat")), f"{name} times a token")] + [
            (lambda X, n, u=u, v=v: 2 * max(u.absdot("hat", X), v.absdot("hat", X)), f"a low-rank product of {name}")
            for u, v in m.terms]

    def _uniform(self, seq, mags, errs, softmax: bool, read) -> tuple:
        """The mean over a sequence whose scores are literal zeros (A stored as 0): every
        float score, scaled score and difference from the max is exactly 0. Hardmax averages
        every token; softmax weighs each by ê_l = exp(0), within κ = 4u of 1, so q_l = ê_l / Σ ê
        lies within a factor ρ = (1 + κ)/(1 − κ) of 1/n, |q_l − 1/n| ≤ β/n, β = ρ − 1 (hardmax:
        κ = β = 0, ρ = 1). For any point c, Σ q_l x̂_l − (1/n) Σ x_l = Σ (q_l − 1/n)(x̂_l − c)
        + (1/n) Σ (x̂_l − x_l), as the q_l − 1/n sum to 0; c is the midpoint of the sequence's
        tokens, coordinate by coordinate. The float mean is Σ q_l x̂_l with each term off by a
        factor within η of 1 (Higham, §3.1): hardmax's n − 1 sums and a division (or a product
        with fl(1/n)), γ_{n+1}; softmax, normalising before or after the sum, by a division or a
        product with the rounded reciprocal of Σ ê, (1 + θ_{n+2})/(1 + θ̄), θ̄ the weighted mean
        of the roundings of Σ ê, η = (1 + γ_{n+2})/(1 − γ_{n−1}) − 1. Underflow: the n
        products' (tiny/2 each, at most doubled by what follows), the division's, and the n
        weights' (tiny/2 each, times |x̂_l|). The magnitude bounds |m̂| and |m| alike, on the
        coordinates ``read`` (Matrix.columns: V's); the others are left 0, and nothing reads them."""
        fmt, c, n = self.fmt, self.c, len(seq)
        kappa = 2 * EXP_ULPS * fmt.unit if softmax else fmpq(0)
        rho, beta = fup((1 + kappa) / (1 - kappa)), fup(2 * kappa / (1 - kappa))
        eta = fup((1 + fmt.gamma(n + 2)) / (1 - fmt.gamma(n - 1)) - 1) if softmax else c.gamma(n + 1)
        em, mm = [0.0] * self.d, [0.0] * self.d
        for k in read:
            ranges = [coordinate_range(x, k) for x in seq]  # |x_l − c| ≤ half, c the midpoint
            half = fup((max(r[1] for r in ranges) - min(r[0] for r in ranges)) / 2)
            mean_e = div(add(*(e[k] for e in errs)), n)
            mean_m = div(add(*(m[k] for m in mags)), n)
            underflow = mul(c.tiny, add(float(n + 1), mul(n, mean_m)))
            em[k] = add(mul(beta, add(half, mean_e)), mean_e, mul(eta, mul(rho, mean_m)), underflow)
            mm[k] = add(mul(add(1.0, eta), mul(rho, mean_m)), underflow)
        return em, mm

    def _score_error(self, A: Matrix, M, E):
        """A bound on |ŝ_il − s_il| for every l of a sequence (M, E its maxima),
        as a function of token i's magnitude mi, error ei and |x_i| (bounds).
        The sequence's side of each bilinear bound, (|u|·M) and the like, is
        taken once here, not once per token."""
        d, r = self.d, len(A.terms)
        sM = add(*M)
        s, sd, sh = (A.scale.abs(which, 0) for which in ("exact", "delta", "hat"))
        uM = [(u.absdot("exact", M), u.absdot("exact", E), u.absdot("hat", M), u.absdot("delta", M))
              for u, _ in A.terms]
        u_hat_M = add(*(m[2] for m in uM))
        g = self.c.gamma(2 * A.reach(d) + r + 2)
        fixed = float(d * d + d + r * (2 * d + 1) + 1)  # the last products (an integer below 2^53)

        def error(mi, ei, xi_abs) -> float:
            lowrank = add(u_hat_M, *(v.absdot("hat", mi) for _, v in A.terms))  # |u|·|x_l| + |v|·|x_i|
            smi = add(*mi)
            # underflows (tiny/2 each, counted as tiny: the slack covers the roundings they pass through),
            # each times what later multiplies it
            underflow = add(mul(r + 1, mul(smi, sM)),  # an entry of the dense Â: r + 1 products
                            mul(d + r + 1, add(smi, sM)),  # a coordinate of Â x̂_i (Âᵀ x̂_l) times x̂_l's (x̂_i's)
                            mul(d, add(lowrank, sh)),  # v·x̂_i, u·x̂_l, ⟨x̂_i, x̂_l⟩ times the other factor, the scale
                            fixed)
            total = [mul(underflow, self.c.tiny)]
            if s or sd or sh:  # the dense part: |scale|·a·b for each bilinear bound
                total += (mul(s, add(dot(ei, M), dot(xi_abs, E))), mul(add(sd, mul(g, sh)), dot(mi, M)))
            for (_, v), (ue, uE, uh, ud) in zip(A.terms, uM):
                total += (mul(v.absdot("exact", ei), ue), mul(v.absdot("exact", xi_abs), uE),
                          mul(v.absdot("delta", mi), uh), mul(v.absdot("exact", mi), ud),
                          mul(g, mul(v.absdot("hat", mi), uh)))
            return add(*total)
        return error

    def _seq_max(self, vectors) -> list:
        return [max(column) for column in zip(*vectors)]

    def _centred(self, A: Matrix, query: tuple, mags, errs, a: int):
        """error(m, e, dist) bounds |(ŝ_l − ŝ_a) − (s_l − s_a)| for a query i
        with |x̂_i| ≤ mi, |x̂_i − x_i| ≤ ei, |x_i| ≤ xi (``query``) and any token
        l with |x̂_l| ≤ m, |x̂_l − x_l| ≤ e and |x_l − x_a| ≤ dist:
        ⟨Âx̂_i − Ax_i, x̂_l − x̂_a⟩ + ⟨Ax_i, (x̂_l − x_l) − (x̂_a − x_a)⟩ + ρ_l − ρ_a,
        ρ the rounding of a score alone — the query's error enters through
        |x̂_l − x̂_a|, so competitors near x_a move with it."""
        (mi, ei, xi), zero = query, [0.0] * self.d
        dq = [add(p, q) for p, q in zip(A.apply_delta(mi), A.apply_abs(ei))]
        ax = A.apply_abs(xi)
        rho_a = self._score_error(A, mags[a], zero)(mi, zero, xi)

        def error(m: list, e: list, dist: list) -> float:
            both = [add(p, q) for p, q in zip(e, errs[a])]
            near = [add(p, q) for p, q in zip(dist, both)]
            return add(dot(dq, near), dot(ax, both), self._score_error(A, m, zero)(mi, zero, xi), rho_a)
        return error

    def _hardmax(self, attention, seq, mags, errs, vals, stored, A: Matrix, sa: SA, j: int) -> list:
        M, E = self._seq_max(mags), self._seq_max(errs)
        score_error = self._score_error(A, M, E)
        ceiling = score_error(M, E, M)  # above every token's own: the bound grows with each argument, |x_i| ≤ mags[i]
        table, out, grains = None, [], {}
        for i, (att, x, e) in enumerate(zip(attention, seq, errs)):
            if len(att.argmax) > 1:
                raise Failed(f"token [{j}, {i}]: tied argmax {list(att.argmax)}; the float run may break the tie")
            a = att.argmax[0]
            if att.gap is not None and not fdown(att.gap) > 2 * ceiling:  # else a gap wide enough for any token
                query = (mags[i], e, [fup(abs(v)) for v in x])
                delta = score_error(*query)
                if not fdown(att.gap) > 2 * delta:  # each close competitor on its own
                    table = table or Scores(sa.A, list(seq))
                    s, centred = table.row(i), self._centred(A, query, mags, errs, a)
                    for l, v in enumerate(s):
                        if l != a and not fdown(s[a] - v) > 2 * delta:
                            bound = centred(mags[l], errs[l], [fup(abs(p - q)) for p, q in zip(seq[l], seq[a])])
                            if not fdown(s[a] - v) > bound:
                                raise Failed(f"token [{j}, {i}]: argmax gap {approx(s[a] - v)} to token {l} ≤ its "
                                             f"score difference's error {approx(bound)}")
            if a not in grains:
                grains[a] = [self._grain(seq[a], errs[a], c, vals[a], stored[a]) for c in range(self.d)]
            out.append((errs[a], mags[a], grains[a]))  # one argmax: copied exactly
        return out

    def _softmax(self, seq, mags, errs, A: Matrix, sa: SA, j: int, read) -> list:
        """Per token (error, magnitude) of the attention mean, the weights
        taken relative to an exact argmax a: token l's float weight is p_l
        times a factor in [1/(1 + ζ_l), 1 + ζ_l] over a normalisation within
        1 ± H, ζ_l = e^{ω_l}/(1 − 4u) − 1, ω_l a bound on the error of the
        float z_l − z_a (0 for a) and H = Σ_k p_k ζ_k. Where a weight matters
        ω_l is the pair's own bound, which the query's error enters through
        the distance |x_l − x_a| only (the scores of the near competitors
        move together); elsewhere the sequence's. Around the exact mean; also
        centred on x_a, so that the weights' errors scale the tokens'
        distances from x_a, not their magnitudes; and with a unique exact
        argmax around x_a directly, the other float weights staying tiny.
        Tokens whose score columns agree (Scores.columns: a collapse's
        non-leaders) share one score, weight and bound, and the sums below
        take their group's sums of magnitudes, errors and distances; tokens
        whose queries agree (Scores.query: equal rows, a collapse's
        non-leaders again) share one bound, over their largest magnitude,
        error and |x|, which the bound only uses as upper bounds."""
        if not all(is_point(x) for x in seq):
            raise Failed("softmax attention over enclosures (a second scored layer) is not analysed")
        table = Scores(sa.A, list(seq))
        fmt, c, n, d, tau = self.fmt, self.c, len(seq), self.d, self.model.temperature
        tau_hat = round_nearest(tau, fmt)
        tau_f = fdown(tau_hat)  # a number of the format: exact
        inv_err = fup(abs(1 / tau_hat - 1 / tau))
        gq, ulp4q = fmt.gamma(n + 2), 2 * EXP_ULPS * fmt.unit
        g, ulp4 = fup(gq), fup(ulp4q)
        norm = fup((1 + fmt.unit) / ((1 - ulp4q) * (1 - gq)))  # p̂_l ≤ norm·ê_l: Ŝ ≥ ê of the float max ≥ 1 − 4u
        # exp's underflows (2 spacings each): the weight's own over Ŝ ≥ (1 − 4u)(1 − γ), Ŝ's own n, and the division's half
        floor = fup(((2 * n + 2) * (1 + gq) * (1 + fmt.unit) / ((1 - ulp4q) * (1 - gq)) + fmpq(1, 2)) * fmt.tiny)
        n_tiny = mul(n, c.tiny)
        any_error = self._score_error(A, self._seq_max(mags), self._seq_max(errs))
        base = [tuple(range(n))] if A.literal_zero else table.columns()
        absx = [[fup(abs(v)) for v in x] for x in seq]
        parts: dict[int, tuple] = {}  # per argmax token a: its groups ({a} first) and their sums and maxima
        asked: dict[tuple, list[int]] = {}  # tokens with equal queries have equal rows: one bound, over their maxima
        for i in range(n):
            asked.setdefault(() if A.literal_zero else table.query(i), []).append(i)
        out: list = [None] * n
        for same in asked.values():
            i, query = same[0], tuple(self._seq_max(rows[l] for l in same) for rows in (mags, errs, absx))
            s0 = [fmpq(0)] if A.literal_zero else table.row(i, [gr[0] for gr in base])
            smax = max(s0)
            a = base[s0.index(smax)][0]
            if a not in parts:
                groups = [(a,)] + [rest for gr in base if (rest := tuple(l for l in gr if l != a))]
                dist = [[fup(abs(v - w_)) for v, w_ in zip(xl, seq[a])] for xl in seq]
                parts[a] = (groups, *[[[add(*(rows[l][k] for l in grp)) for k in range(d)] for grp in groups]
                              for rows in (mags, errs, dist)],
                            *[[[max(rows[l][k] for l in grp) for k in range(d)] for grp in groups]
                              for rows in (mags, errs, dist)])
            groups, g_mag, g_err, g_dist, x_mag, x_err, x_dist = parts[a]
            s = table.row(i, [grp[0] for grp in groups]) if not A.literal_zero else [fmpq(0)] * len(groups)
            size = [float(len(grp)) for grp in groups]  # < 2^53: exact
            m_a, e_a = mags[a], errs[a]
            ds = 0.0 if A.literal_zero else any_error(*query)
            big = fup(max(abs(v) for v in s))
            scaled = div(add(big, ds), tau_f)  # |ŝ/τ̂|
            self._check_range(scaled, f"token [{j}, {i}]: a scaled attention score")
            worst = add(div(ds, tau_f), mul(big, inv_err), mul(2 * c.unit, scaled), c.tiny)  # |ẑ_l − z_l|, ẑ = fl(ŝ/τ̂)
            # ... and each subtraction of the float max errs by u|ẑ_l − max|
            omega = [add(2 * worst, mul(c.unit, add(fup((smax - v) / tau), 4 * worst))) for v in s]
            omega[0] = 0.0  # a itself
            with ctx.workprec(PREC):
                w = [arb((v - smax) / tau).exp() for v in s]  # e^{z_l − z_a}: the exact weights times Σ w
                total = fdown(bounds(sum((wl * int(k) for wl, k in zip(w, size)), arb(0)))[0])
                zeta_any = (e_any := arb(rational(max(omega))).exp()) / (1 - ulp4q) - 1
                up_any = (arb_up(e_any), arb_up(zeta_any))  # e^ω and ζ for every group whose ω is not its own
                wu = [arb_up(wl) for wl in w]
            heavy = [k for k in range(1, len(groups)) if not A.literal_zero and w[k] * zeta_any > 2 ** -30]
            centred = self._centred(A, query, mags, errs, a) if heavy else None
            ez = [(1.0, fup(1 / (1 - ulp4q) - 1))] + [up_any] * (len(groups) - 1)  # a's own: ω = 0
            for k in heavy:
                pair = add(div(centred(x_mag[k], x_err[k], x_dist[k]), tau_f), mul(fup(abs(s[k] - smax)), inv_err),
                           mul(4 * c.unit, scaled), 2 * c.tiny, mul(c.unit, add(fup((smax - s[k]) / tau), 4 * worst)))
                with ctx.workprec(PREC):
                    e_k = arb(rational(min(omega[k], pair))).exp()
                    ez[k] = (arb_up(e_k), arb_up(e_k / (1 - ulp4q) - 1))
            pu = [min(1.0, div(wl, total)) for wl in wu]  # p_l = w_l / Σ w, Σ w ≥ total
            H = add(*(mul(k, mul(pl, z)) for k, pl, (_, z) in zip(size, pu, ez)))
            lo_w, hi_w = _weights(ez, pu, fup((1 + fmt.unit) / (1 - gq)), H, floor)  # the float weights', p̂_l
            w_hat = [mul(add(mul(add(1.0, ulp4), mul(wl, e_)), mul(EXP_ULPS, c.tiny)), norm)
                     for wl, (e_, _) in zip(wu, ez)]  # p̂_l ≤ norm·ê_l
            em = [add(*(add(mul(lw, mg[k]), mul(pl, er[k]), mul(g, mul(hw, mg[k])))
                        for lw, hw, pl, mg, er in zip(lo_w, hi_w, pu, g_mag, g_err)), n_tiny) for k in range(d)]
            # centred on x_a: Σ p̂_l x̂_l − Σ p_l x_l = Σ (p̂_l − p_l)(x̂_l − x_a) + x_a (Σ p̂ − 1) + Σ p_l (x̂_l − x_l),
            # with |Σ p̂ − 1| ≤ 2γ: the weights' errors scale the tokens' distances from x_a, not their magnitudes
            g2 = add(2 * g, mul(g, g))
            em = [min(em[k], add(*(add(mul(lw, add(dl[k], er[k])), mul(pl, er[k]), mul(g, mul(hw, mg[k])))
                                   for lw, hw, pl, dl, mg, er in zip(lo_w, hi_w, pu, g_dist, g_mag, g_err)),
                                 mul(g2, m_a[k]), n_tiny)) for k in range(d)]
            # |m̂| ≤ (1 + γ) Σ p̂_l |x̂_l| + the products' underflow
            mm = [add(mul(add(1.0, g), add(*(mul(hw, mg[k]) for hw, mg in zip(hi_w, g_mag)))), n_tiny) for k in range(d)]
            if s.count(smax) == 1 and H < 1 and (sig := self._sum_error(n, size, ez, pu, H, floor)):
                # m̂ = Σ_l (1 + η) q_l x̂_l, q_l = ê_l/Σê, Σê/Ŝ = 1 + η (_sum_error), each term rounded by γ_3 and
                # their sum by γ_{n−1}Σ, or by (1 + 2γ_{n−1}) times the terms but a's: the normalisation counted
                # once, exp's error only in the weights, and a sum of a code with zeros (a collapse's
                # non-leaders) exact; Σ q_l x̂_l − Σ p_l x_l = Σ (q_l − p_l)(x̂_l − x_a) + Σ p_l (x̂_l − x_l)
                lw2, hw2, eta = sig
                gn, g3 = c.gamma(n - 1), c.gamma(3)
                for k in range(d):
                    mq = add(*(mul(hw, mg[k]) for hw, mg in zip(hw2, g_mag)))
                    mo = mul(add(1.0, 2 * gn), add(*(mul(hw, mg[k]) for hw, mg in zip(hw2[1:], g_mag[1:]))))
                    rounding = mul(add(1.0, eta), add(mul(g3, mq), mul(mul(add(1.0, g3), add(1.0, g3)),
                                                                     min(mul(gn, mq), mo))))
                    em[k] = min(em[k], add(*(add(mul(lw, add(dl[k], er[k])), mul(pl, er[k]))
                                             for lw, pl, dl, er in zip(lw2, pu, g_dist, g_err)),
                                           mul(eta, mq), rounding, mul(c.tiny, add(*(mg[k] for mg in g_mag))),
                                           2 * n_tiny))
            if s.count(smax) == 1:
                sum_error = add(g, n_tiny)  # |Σ p̂ − 1|: γ, and each weight's rounding where it is subnormal
                lead = add(sum_error, mul(g, add(1.0, g)))
                for k in range(d):
                    # m̂ − m = (x̂_a − x_a) + x̂_a (Σ p̂ − 1) + Σ_{l≠a} [p̂_l (x̂_l − x̂_a) − p_l (x_l − x_a)] + rounding,
                    # as m = x_a + Σ_{l≠a} p_l (x_l − x_a); with p̂_l, p_l ≤ ŵ_l each bracket is at most
                    # ŵ_l (|x_l − x_a| + e_l + e_a), and the rounding at most γ·Σ p̂_l |x̂_l| with p̂_a ≤ 1 + γ
                    near = add(*(mul(w_hat[q], add(g_dist[q][k], g_err[q][k], mul(size[q], e_a[k]), mul(g, g_mag[q][k])))
                                 for q in range(1, len(groups))))
                    em[k] = min(em[k], add(e_a[k], mul(lead, m_a[k]), near, n_tiny))
                    # |m̂| ≤ (1 + γ)(|x̂_a| Σ p̂ + Σ_{l≠a} p̂_l |x̂_l − x̂_a|) + the products' underflow
                    mm[k] = min(mm[k], add(mul(add(1.0, g), add(mul(add(1.0, sum_error), m_a[k]), *(
                        mul(w_hat[q], add(g_mag[q][k], mul(size[q], m_a[k]))) for q in range(1, len(groups))))), n_tiny))
            if inf in em or inf in mm:
                raise Failed(f"token [{j}, {i}]: the softmax weights' errors are unbounded (H = {approx(H)} ≥ 1)")
            mean = (em, mm)
            if s.count(smax) == 1:
                mean = self._dominated(j, a, seq, errs, read, mean, (size, w_hat, pu, g_mag, g_dist))
            for l in same:
                out[l] = mean
        return out

    def _dominated(self, j: int, a: int, seq, errs, read, mean: tuple, groups: tuple) -> tuple:
        """The mean (em, mm) of a softmax with a unique exact argmax a (group 0), as (error,
        magnitude, grains, each coordinate's values) where on a coordinate ``read`` of a's known value
        every run gives a lone token's mean (determined.dominated, which asks that the others' exps, each
        ê_l ≤ ŵ_l = e^{ω_l}·w_l·(1 + 4u)·…, sum to less than half an ulp of 1, and that their terms,
        at most K·ŵ_l·|x̂_l|, K = (1 + u)³/(1 − 4u), in any form, vanish beside a's). Each
        e^{ω_l}·w_l is then below 1, so ẑ_l − ẑ_a < 0 (rounding is monotone) and ê_a = exp(0).
        The error is the runs' distance from x_a plus |x_a − m| ≤ Σ_{l≠a} p_l |x_l − x_a|, the
        exact noise; a grain from each coordinate's least magnitude elsewhere. ``mean`` unchanged
        where no coordinate is known so."""
        (em, mm), (size, w_hat, pu, g_mag, g_dist) = mean, groups
        fmt, c, d, n = self.fmt, self.c, self.d, len(seq)
        grow = add(1.0, c.gamma(n - 1))  # a float sum of some of the others' terms: within γ_{n−1} of theirs
        weights = rational(mul(grow, add(*(mul(k, w) for k, w in zip(size[1:], w_hat[1:])))))
        scale = fup((1 + fmt.unit) ** 3 / (1 - 2 * EXP_ULPS * fmt.unit))
        lone = self._values(self.offsets[j] + a, seq[a], errs[a]) or (None,) * d
        noise = [add(*(mul(p, dl[k]) for p, dl in zip(pu[1:], g_dist[1:]))) for k in range(d)]
        em, mm, known = list(em), list(mm), [None] * d
        for k in read:
            others = [(w, mg[k]) for w, mg in zip(w_hat[1:], g_mag[1:]) if mg[k]]
            slack = mul(grow, add(mul(scale, add(*(mul(w, m) for w, m in others))),
                                  mul(c.tiny, add(float(n), *(m for _, m in others))))) if others else 0.0
            if lone[k] is not None and (r := determined.dominated(lone[k], rational(slack), weights, fmt)):
                em[k] = min(em[k], add(fup(max(abs(v - seq[a][k]) for v in r)), noise[k]))
                mm[k] = min(mm[k], max(fup(max(abs(v) for v in r)), add(fup(abs(seq[a][k])), noise[k])))
                known[k] = r
        if not any(known):
            return mean
        grains = [min((valuation(v) for v in known[k] if v), default=None) if known[k] else self._grain_above(
            max(sub_down(sub_down(fdown(abs(seq[a][k])), noise[k]), em[k]), 0.0)) for k in range(d)]
        return em, mm, grains, tuple(known)

    def _sum_error(self, n: int, size: list, ez: list, pu: list, H: float, floor: float) -> tuple | None:
        """(lw, hw, η) for a softmax with a unique exact argmax a (group 0): q_l = ê_l/Σê within
        p_l·[1/((1 + ζ_l)(1 + H)), (1 + ζ_l)/(1 − H)], so |q_l − p_l| ≤ lw_l and q_l ≤ hw_l (floor: the
        underflows); |Σê/Ŝ − 1| ≤ η = σ/(1 − σ), σ = min(γ_{n−1}, (1 + 2γ_{n−1}) Σ_{l≠a} q_l) bounding
        |Ŝ − Σê|/Σê: each addition of a float sum errs by at most its smaller operand (the nearest
        number is no farther than an operand, a number of the format), and where a sits in one operand
        the other is a float sum of the rest, within (1 + γ_{n−1}) of it and erring by γ_{n−1} of it.
        None where σ ≥ 1/2."""
        lw, hw = _weights(ez, pu, 1.0, H, floor)  # q_l's
        gn = self.c.gamma(n - 1)
        sig = min(gn, mul(add(1.0, 2 * gn), add(*(mul(k, h) for k, h in zip(size[1:], hw[1:])))))
        return (lw, hw, div(sig, sub_down(1.0, sig))) if sig < 0.5 else None

    def _alone(self, x_a: Vec, m_a: list, e_a: list, values, runs: list) -> tuple:
        """(error, magnitude, grains) of the softmax mean of a sequence of one token a. Its
        weight is ê/Ŝ with Ŝ = ê (ẑ − max = 0 and a sum of one term, both exact), so exp's
        error cancels and every form is x̂_a times at most three roundings (Higham, Lemma 3.1):
        fl(fl(ê·x̂_a)·fl(1/ê)) after the sum, fl(fl(ê·x̂_a)/ê), or before it
        fl(fl(ê·fl(1/ê))·x̂_a) and fl(fl(ê/ê)·x̂_a) = x̂_a. Underflow: a product with x̂_a's
        tiny/2, times a factor within 1 + 5u of 1 and rounded (tiny/2 more): below 2·tiny.
        So |m̂ − x_a| ≤ e_a + γ_3|x̂_a| + 2·tiny, the exact mean being x_a, and m̂_c = 0
        exactly where x̂_a's coordinate is (a magnitude bound of 0). m̂_c is a number of the
        format at least |x_a| − its error bound in magnitude: a multiple of that binade's
        spacing (its grain, for the product with V). Where ``runs[c]`` holds every value m̂_c may
        take (determined.alone, x̂_a's coordinate known: ``values[c]``), their own distance from
        it, largest magnitude and least grain instead."""
        g, tiny = self.c.gamma(3), mul(2, self.c.tiny)
        em = [add(e, mul(g, m), tiny) if m else e for e, m in zip(e_a, m_a)]
        mm = [add(m, mul(g, m), tiny) if m else m for m in m_a]
        grains = [self._grain(x_a, em, c) for c in range(self.d)]
        for c, r in enumerate(runs):
            if r is not None:
                em[c] = add(e_a[c], fup(max(abs(m - values[c]) for m in r)))
                mm[c] = fup(max(abs(m) for m in r))
                grains[c] = min((valuation(m) for m in r if m), default=None)
        return em, mm, grains

    def _exact_product(self, V: Matrix, gm: list | None, mm: list) -> list[bool]:
        """Per coordinate c: whether each form of (V̂ m̂)_c a float run may use is exact: any m̂ where V̂
        is a scaled copy, else by the lemma for m̂_b a multiple of 2^gm[b] (None: unknown) of magnitude
        ≤ mm[b]: V̂_cb = ŝ[c = b] + Σ_k û_kc v̂_kb (parameters: known) and Σ_b V̂_cb m̂_b; or ŝ m̂_c +
        Σ_k û_kc (v̂_k·m̂). A row of V̂ that is 0 (ŝ = 0, every û_kc = 0) gives an exact 0."""
        s, d = V.scale, self.d
        if V.scaled_copy or gm is None:
            return [V.scaled_copy] * d
        inner = [self._exact([(_times(v.grains[b], gm[b]), mul(v.abs("hat", b), mm[b])) for b in v.nonzero["hat"]])
                 for _, v in V.terms]
        if None in inner:
            return [False] * d
        out = [True] * d
        for c, row in self._entries(V).items():
            low = self._exact([(_times(s.grains[0], gm[c]), mul(s.abs("hat", 0), mm[c]))] + [
                (_times(u.grains[c], G), mul(u.abs("hat", c), v.absdot("hat", mm))) for (u, v), G in zip(V.terms, inner)])
            out[c] = (low is not None and row is not None
                      and self._exact([(_times(g, gm[b]), mul(m, mm[b])) for b, g, m in row]) is not None)
        return out

    def _entries(self, V: Matrix) -> dict:
        """Per row c of V̂ that is not 0: its non-zero dense entries (column, grain, magnitude),
        or None where the lemma does not make one of them exact (kept per matrix)."""
        name = id(V)
        if name not in self._dense:
            s, d = V.scale, self.d
            rows = range(d) if s.hat[0] else sorted({c for u, _ in V.terms for c in u.nonzero["hat"]})
            cols = range(d) if s.hat[0] else sorted({b for _, v in V.terms for b in v.nonzero["hat"]})
            entries = {}
            for c in rows:
                row = []
                for b in cols:
                    parts = [s.hat[0]] * (c == b) + [u.hat[c] * v.hat[b] for u, v in V.terms]
                    if self._exact([(valuation(q), fup(abs(q))) for q in parts]) is None:
                        row = None
                        break
                    if (entry := sum(parts, fmpq(0))):
                        row.append((b, valuation(entry), fup(abs(entry))))
                entries[c] = row
            self._dense[name] = (V, entries)  # V kept: its id is not reused while cached
        return self._dense[name][1]

    def _sa_out(self, mean, rho, V: Matrix, copied: list[bool]):
        """A token's output bound as a function of its magnitude and error;
        the part that depends on the attention mean alone (|V̂|·|m| and the
        rest of the bound but for the ρ terms) taken once per distinct mean.
        ``copied[c]``: coordinate c is ρ̂ x̂_c + 0 with ρ̂ ∈ {0, 1}, exactly."""
        em, mm, *gm = mean  # gm: the grains of m̂'s coordinates, where they are known (a copied token)
        c, d, r = self.c, self.d, len(V.terms)
        g = c.gamma(V.reach(d) + r + 3)
        # dense entries (× |m|), the low-rank v·m (× |u|), the products
        underflow = add(mul(r + 1, add(*mm)), float(d + 2 * r + 2))
        hat = V.apply_abs(mm, "hat")
        exact = self._exact_product(V, gm[0] if gm else None, mm) if rho.hat[0] == 0 else [False] * d
        rest = [add(a, dv) if exact[k] else  # V̂ m̂ computed exactly: no rounding of its own
                add(a, dv, mul(g, h), mul(add(underflow, mul(d, add(*(u.abs("hat", k) for u, _ in V.terms)))), c.tiny))
                for k, (a, dv, h) in enumerate(zip(V.apply_abs(em), V.apply_delta(mm), hat))]
        live = [k for k in range(d) if not copied[k]]
        rho_exact, rho_delta, rho_hat = (rho.abs(which, 0) for which in ("exact", "delta", "hat"))

        def out(mag, e) -> tuple:
            bound = list(e) if rho.hat[0] == 1 else [0.0] * d  # the copied coordinates'
            for k in live:
                rho_mag = mul(rho_hat, mag[k])
                self._check_range(add(rho_mag, hat[k]), f"coordinate {k + 1} of the attention output")
                bound[k] = add(mul(rho_exact, e[k]), mul(rho_delta, mag[k]), mul(g, rho_mag), rest[k])
            return tuple(bound)
        return out
