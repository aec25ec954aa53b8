"""The float analysis: forward error bounds of a model run in an IEEE
binary format, beside the exact replay — the proof behind the ``float``
claim (claims/float.py states what is claimed).

Proof (checked here, never by running floats): forward error analysis in
the standard model (verify/floats.py) with exact rational bounds, token by
token, beside the exact replay. A token carries a bound e on |x̂ − x| per
coordinate. In an FF layer each unit is *off* (pre-activation ≤ −its error
bound: its relu is exactly 0 in both runs), *on* (≥ +error: linear in both)
or *uncertain* (relu is 1-Lipschitz); the on units form an affine map
M = ηI + Σ_on W_k U_kᵀ through which the incoming error passes as |M|·e —
so a hat whose units are all on, and cancel, adds only rounding error.
Tokens outside every unit's reach (found by binary search on the tokens
sorted by their slack: projection plus their own error bound) are provably
untouched: all units off and η = 1 give x̂ back exactly. Hardmax attention
must keep its argmax: a unique argmax with gap > 2 × the score error bound,
or an exact tie of literal zeros (A = 0).
Overflow is proven absent: every magnitude bound stays below the largest
finite number.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from flint import arb, ctx, fmpq

from tfcert.verify import determined
from tfcert.verify.enclose import PREC, bounds, coordinate_range, is_point, projection_range
from tfcert.verify.layers import Scores
from tfcert.verify.shortcuts import Ranked
from tfcert.verify.floats import Format, exact_sum, grain, round_nearest, up, valuation
from tfcert.verify.formats import SA, LowRank, Model
from tfcert.verify.numbers import Vec, dot, key

EXP_ULPS = 2  # documented accuracy of exp: 2 ulps (relative error ≤ 4u; 2·tiny below the normal range)
ZERO = fmpq(0)
WHICH = ("exact", "hat", "delta")  # the three tuples of a Rounded


# ---------------------------------------------------------------- small vector bounds

class Rounded:
    """One parameter tuple and its rounding to the format: ``hat`` the
    rounded values, ``delta`` |rounded − exact|."""

    def __init__(self, values, fmt: Format):
        self.exact = tuple(values)
        self.hat = tuple(round_nearest(v, fmt) for v in self.exact)
        self.delta = tuple(abs(h - v) for h, v in zip(self.hat, self.exact))
        self.support = tuple(j for j, (v, h) in enumerate(zip(self.exact, self.hat)) if v or h)
        self.nonzero = {which: tuple(j for j in self.support if getattr(self, which)[j]) for which in WHICH}
        self.count = len(self.nonzero["hat"])
        self.grains = tuple(map(valuation, self.hat))
        self.power = None  # (j, v): the one entry, v = ±2^k, when the tuple is that exactly (for Sterbenz)
        if self.count == 1 and not any(self.delta):  # every entry exact: none rounded to (or from) 0
            j = self.nonzero["hat"][0]
            num, den = abs(int(self.hat[j].p)), int(self.hat[j].q)
            if not num & (num - 1) and not den & (den - 1):
                self.power = (j, self.hat[j])

    def dot(self, x) -> fmpq:
        """exact · x over the entries that are not 0."""
        total = ZERO
        for j in self.support:
            total += self.exact[j] * x[j]
        return total

    def absdot(self, which: str, b) -> fmpq:
        """Σ |self_j|·b_j over the entries that are not 0, b ≥ 0."""
        values = getattr(self, which)
        total = ZERO
        for j in self.nonzero[which]:
            if b[j]:
                total += abs(values[j]) * b[j]
        return total



def _combinations(sets) -> list:
    """Every value tuple per-coordinate sets allow (None: unknown), or beyond 16 of them one that
    leaves each coordinate of several values unknown (determined.choices)."""
    out = [()]
    for v in sets:
        out = [t + (w,) for t in out for w in ((None,) if v is None else sorted(v))]
    if len(out) <= 16:
        return out
    return [tuple(None if v is None or len(v) > 1 else min(v) for v in sets)]


def _lone_runs(x: fmpq, fmt: Format) -> set | None:
    """The values a one-token sequence's softmax mean takes on a coordinate of known value x: exp(0)
    any number of the format within 4u of 1 (spacing u below 1, 2u above), each normalisation
    (p = ê/ê = 1; p = fl(ê·fl(1/ê)); fl(ê·x)/ê; fl(ê·x)·fl(1/ê)); None where one overflows."""
    u, out = fmt.unit, {x}
    for e in (1 - 4 * u, 1 - 3 * u, 1 - 2 * u, 1 - u, fmpq(1), 1 + 2 * u, 1 + 4 * u):
        try:
            r, y = round_nearest(1 / e, fmt), round_nearest(e * x, fmt)
            out |= {round_nearest(round_nearest(e * r, fmt) * x, fmt), round_nearest(y / e, fmt),
                    round_nearest(y * r, fmt)}
        except OverflowError:
            return None
    return out


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
        """M̂ = ±2^a e_c · (±2^b e_j)ᵀ, a, b ≥ 0, nothing rounded: every form of M̂ m̂ is exact."""
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
        """The coordinates of x that M x and M̂ x read (verify/float_analysis.py)."""
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
        s = abs(getattr(self.scale, which)[0])
        out = [s * x for x in a]
        for u, v in self.terms:
            c = v.absdot(which, a)
            if c:
                out = [o + abs(ui) * c for o, ui in zip(out, getattr(u, which))]
        return out

    def apply_delta(self, a) -> list:
        """A bound on |(M̂ − M)|·a."""
        out = [self.scale.delta[0] * x for x in a]
        for u, v in self.terms:
            c1, c2 = v.absdot("hat", a), v.absdot("delta", a)
            out = [o + ud * c1 + abs(ue) * c2 for o, ud, ue in zip(out, u.delta, u.exact)]
        return out

    def bilinear(self, a, b, which: str = "exact") -> fmpq:
        """B(a, b) = |scale|·a·b + Σ (|v|·a)(|u|·b): bounds |⟨M x, y⟩| for |x| ≤ a, |y| ≤ b."""
        total = abs(getattr(self.scale, which)[0]) * sum((x * y for x, y in zip(a, b)), ZERO)
        for u, v in self.terms:
            total += v.absdot(which, a) * u.absdot(which, b)
        return total


def _times(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def matrix(m: LowRank, fmt: Format) -> Matrix:
    return Matrix(Rounded((m.scale,), fmt), tuple((Rounded(u, fmt), Rounded(v, fmt)) for u, v in m.terms))


def approx(q: fmpq) -> str:
    """A rational for a message: 3 significant digits, or its power of two
    when a float cannot hold it."""
    if q == 0:
        return "0"
    bits = int(abs(q.p)).bit_length() - int(q.q).bit_length()
    return f"{float(q):.3g}" if abs(bits) < 1000 else f"{'-' if q < 0 else ''}2^{bits}"


class Failed(Exception):
    """No bound can be given from this layer on; the message says why."""


# ---------------------------------------------------------------- the analysis

class Analysis:
    """Forward error bounds of the float run, fed the exact replay one step
    at a time. ``failure`` is set at the first layer where no bound can be
    given; ``bound`` is the final max error otherwise."""

    def __init__(self, model: Model, sequences, fmt: Format, give_up_above: fmpq | None = None):
        """``give_up_above``: stop (as a failure) once some error bound exceeds
        it — for a caller that only wants useful bounds (construct)."""
        self.model, self.fmt, self.d = model, fmt, model.d
        self.give_up_above = give_up_above
        self.offsets, flat = [], []
        self.longest = max(map(len, sequences), default=0)
        for seq in sequences:
            self.offsets.append(len(flat))
            flat.extend(seq)
        self.failure: str | None = None
        self.bound: fmpq | None = None
        self.uncertain: str | None = None  # the first ReLU the float run may switch: where bounds start to grow
        self._blocks: dict[tuple[int, str], object] = {}
        self._rounding: dict[tuple, Rounded] = {}  # by key(values)
        self._rows: dict[tuple, tuple] = {}  # determined.forms's dense rows
        try:  # val: per token its values where known (verify/determined.py)
            self.val = [tuple(round_nearest(v, fmt) for v in x) if is_point(x) else None for x in flat]
            self.err = [self._input_error(x) for x in flat]
            self.val = [v if any(e) else None for v, e in zip(self.val, self.err)]
        except OverflowError as exc:
            self.failure = f"the input does not fit {fmt.name}: {exc}"
            self.err, self.val, flat = [], [], []
        self.gr: list = [None] * len(self.err)  # per token where some coordinate errs: its grains from its terms
        self.alt: list = [None] * len(self.err)  # per token: the value tuples a run may take, where more than one
        self._refresh(flat)

    # ---- helpers

    def _ref(self, g: int) -> list[int]:
        """[sequence position, token] of flat token g."""
        j = bisect_right(self.offsets, g) - 1
        return [j, g - self.offsets[j]]

    def _input_error(self, x: Vec) -> tuple:
        return tuple(abs(round_nearest(v, self.fmt) - v) for v in x)

    def _values(self, g: int, x, e):
        """Token g's known values (determined.py; None: none): ``val[g]``, or where that
        is not kept, x_j for each coordinate whose error bound is 0 (x̂_j = x_j)."""
        if self.val[g] is not None or not is_point(x):
            return self.val[g]
        return tuple(v if not ej else None for v, ej in zip(x, e)) if not all(e) else None

    def _alternatives(self, g: int, x, e) -> list:
        """Token g's alternatives, or its known values alone ([] where none)."""
        if self.alt[g] is not None:
            return list(self.alt[g])
        v = self._values(g, x, e)
        return [v] if v else []

    def _settle(self, runs, x, bound) -> tuple:
        """(errors, values, alternatives) of a token whose float values are one of ``runs``
        (float_analysis._settle): a coordinate every run knows errs by the largest |x̂ − x|."""
        runs = list(dict.fromkeys(runs))
        if not runs:
            return bound, None, None
        known = [all(r[c] is not None for r in runs) for c in range(len(bound))]
        err = bound if not is_point(x) else tuple(  # an enclosure's bound stands
            up(max(abs(r[c] - xi) for r in runs)) if e and k else e
            for c, (xi, e, k) in enumerate(zip(x, bound, known)))
        if not any(e and k for e, k in zip(err, known)):
            return (err if err != bound else bound), None, None
        values = tuple(runs[0][c] if all(r[c] == runs[0][c] for r in runs) else None for c in range(len(bound)))
        return (err if err != bound else bound), values, (tuple(runs) if 1 < len(runs) <= 16 else None)

    def _mag(self, x, e) -> list:
        """Per coordinate: a bound on |x̂| (and on |x| over the enclosure)."""
        if is_point(x):
            return [up(abs(v) + ej) if v or ej else ZERO for v, ej in zip(x, e)]
        return [up(max(abs(lo), abs(hi)) + ei) for (lo, hi), ei in
                ((coordinate_range(x, j), e[j]) for j in range(self.d))]

    def _refresh(self, flat) -> None:
        """Every token's magnitude bound (``mag``, kept beside ``err`` until
        the token or its error changes), the global per-coordinate maxima of
        |x̂| and the largest error; the reach lists are built again when asked."""
        self.reach: dict[tuple, tuple[Rounded, Ranked]] = {}  # by key(row.exact)
        self.mag = [self._mag(x, e) for x, e in zip(flat, self.err)]
        self.X = [max(column) for column in zip(*self.mag)] if self.mag else [ZERO] * self.d  # mags are ≥ 0
        self.worst = ZERO  # the largest error bound, kept only for give_up_above
        if self.give_up_above is not None:
            self.worst = max((max(e, default=ZERO) for e in self.err), default=ZERO)

    def _widen(self, g: int, x) -> None:
        """Token g is now x with error err[g]: its magnitude, the maxima, and
        its place in each reach list."""
        e = self.err[g]
        self.mag[g] = self._mag(x, e)
        for row, ranked in self.reach.values():
            ranked.move(g, self._slack(row, g, x))
        self.X = list(map(max, self.X, self.mag[g]))
        if self.give_up_above is not None:
            self.worst = max(self.worst, *e)

    def _check_range(self, value: fmpq, what: str) -> None:
        """Every partial sum of terms whose magnitudes add up to ``value`` is at
        most (1 + γ)·value ≤ 2·value: below the largest number, nothing overflows."""
        if 2 * value >= self.fmt.largest:
            raise Failed(f"{what} may overflow {self.fmt.name} (magnitude bound {approx(value)})")

    def _ranges(self, checks) -> None:
        """A layer's range checks on the maxima over every token, and where one fails there, on
        each sequence's own (verify/float_analysis.py)."""
        if all(2 * measure(self.X, self.longest) < self.fmt.largest for measure, _ in checks):
            return
        for j, (start, end) in enumerate(zip(self.offsets, [*self.offsets[1:], len(self.mag)])):
            X = [max(column) for column in zip(*self.mag[start:end])]
            for measure, what in checks:
                self._check_range(measure(X, end - start), f"sequence {j}: {what}")

    def _rounded(self, k: int, layer: str):
        key = (k, layer)
        if key not in self._blocks:
            block = self.model.blocks[k]
            if layer == "ff":
                ff = block.ff
                W = tuple(self._round(r) for r in ff.W)
                writers = tuple(tuple(k for k, (w, h) in enumerate(zip(row.exact, row.hat)) if w or h) for row in W)
                self._blocks[key] = (self._round((ff.eta,)), tuple(self._round(r) for r in ff.U),
                                     self._round(ff.b), W, writers)
            else:
                sa = block.sa
                self._blocks[key] = (Rounded((sa.rho,), self.fmt), matrix(sa.A, self.fmt), matrix(sa.V, self.fmt))
        return self._blocks[key]

    def _round(self, values) -> Rounded:
        """Rounded(values), one per distinct tuple: FF layers repeat their rows."""
        name = key(values)
        if name not in self._rounding:
            self._rounding[name] = Rounded(values, self.fmt)
        return self._rounding[name]

    # ---- driver

    def step(self, step) -> None:
        if self.failure is not None or step.layer == "end":
            return
        flat_before, flat_after = step.flat_before, step.flat_after
        where = f"block {step.block} {step.layer.upper()}"
        try:
            with ctx.workprec(PREC):
                if step.layer == "ff":
                    self._ff(step, flat_before, flat_after, where)
                else:
                    self._sa(step, flat_before, flat_after, where)
                if self.give_up_above is not None and self.worst > self.give_up_above:
                    raise Failed(f"an error bound exceeds {approx(self.give_up_above)}")
        except (Failed, OverflowError) as exc:
            self.failure = f"{where}: {exc}" + (f" (the first ReLU a float run may switch: {self.uncertain})"
                                                 if self.uncertain else "")
        except ArithmeticError as exc:
            self.failure = f"{where}: not checked: {exc}"

    def finish(self) -> None:
        if self.failure is None:
            self.bound = max((max(e, default=ZERO) for e in self.err), default=ZERO)

    # ---- feed-forward

    def _ff(self, step, before, after, where: str) -> None:
        eta, U, b, W, writers = self._rounded(step.block, "ff")
        self._ranges([(lambda X, n, row=row, bk=bk: row.absdot("hat", X) + abs(bk), f"unit {k}'s pre-activation")
                      for k, (row, bk) in enumerate(zip(U, b.hat))])
        todo = self._ff_reach(step, before, U, b, W, eta)
        done: dict[tuple, tuple] = {}  # equal tokens with equal errors (a cluster at a snap): one bound
        for g in todo:
            known = self.val[g] and tuple(None if v is None else (v.p, v.q) for v in self.val[g])
            same = (key(before[g]), key(self.err[g]), known, self.gr[g]) if is_point(before[g]) else None
            if same not in done:
                done[same] = self._ff_token(before[g], self.err[g], self.mag[g], self.val[g], self.gr[g], eta, U, b,
                                            W, writers, lambda: f"{where}: token {self._ref(g)}")
            bound, off, grains = done[same] if same is not None else done.pop(None)
            if eta.hat[0] == 1 and eta.exact[0] == 1 and all(off[k] or not any(w.hat[k] for w in W)
                                                              for k in range(len(U))):
                continue  # x̂ passes unchanged, with its values: a token the fast analysis's reach leaves out
            self.gr[g] = tuple(grains) if any(bound) else None
            runs = self._alternatives(g, before[g], self.err[g]) if any(bound) and is_point(after[g]) else []
            runs = [r for v in runs for r in determined.ff(v, after[g], bound, eta, U, b, W, writers, off, self.fmt,
                                                          determined.CHOICES // len(runs))]
            self.err[g], self.val[g], self.alt[g] = self._settle(runs, after[g], bound)
        if len(todo) == len(before):
            self._refresh(after)
        else:
            for g in todo:
                self._widen(g, after[g])

    def _slack(self, row: Rounded, g: int, x: Vec) -> fmpq:
        """w·x plus a bound on the error of w·x̂ + b̂ for token g (its own
        magnitude and error) but for the bias's part: b's rounding, γ|b̂| and
        the underflow terms, with γ and the underflow counting the bias as a
        term whatever it is. A unit on row w is off for g when this is at
        most −b − that part (as in _ff_token, where it is the error bound)."""
        c = row.count + 1
        return (row.dot(x) + row.absdot("delta", self.mag[g]) + row.absdot("exact", self.err[g])
                + self.fmt.gamma(c) * row.absdot("hat", self.mag[g]))

    def _ff_reach(self, step, before, U, b, W, eta) -> list[int]:
        """Tokens that some unit may reach: every other token has all its
        units off (pre-activation ≤ −its error bound) and η = 1, so x̂ passes
        unchanged. Found by binary search in the tokens sorted by their slack
        on each row (the reach list, kept as tokens change)."""
        if eta.exact[0] != 1 or eta.hat[0] != 1 or not step.exact:
            return list(range(len(before)))
        todo: set[int] = set()
        for k, row in enumerate(U):
            if not any(w.exact[k] or w.hat[k] for w in W):
                continue  # a unit that writes nothing: 0·relu(finite) = 0 exactly
            c = row.count + 1
            threshold = -b.exact[k] - b.delta[k] - self.fmt.gamma(c) * abs(b.hat[k]) - c * self.fmt.tiny
            if not any(row.exact):
                if threshold < 0:
                    return list(range(len(before)))  # a constant unit that may be on: it shifts every token
                continue
            if key(row.exact) not in self.reach:
                self.reach[key(row.exact)] = (row, Ranked([self._slack(row, g, x) for g, x in enumerate(before)]))
            todo.update(self.reach[key(row.exact)][1].inside(threshold, None))
        return sorted(todo)

    def _sterbenz(self, x, e, row: Rounded, b: Rounded, k: int) -> bool:
        """Whether unit k's pre-activation is computed exactly: one input
        coordinate times a power of two (exact, the product staying normal),
        plus a bias that is 0 or within a factor 2 of minus that product —
        Sterbenz's lemma (Higham, Thm 2.5): y/2 ≤ x ≤ 2y makes x − y exact."""
        if row.power is None:
            return False
        j, v = row.power
        lo, hi = (x[j], x[j]) if is_point(x) else coordinate_range(x, j)
        a_lo, a_hi = sorted((v * (lo - e[j]), v * (hi + e[j])))
        y = -b.hat[k]
        if y == 0:
            return a_lo > 0 and a_lo >= self.fmt.normal or a_hi < 0 and -a_hi >= self.fmt.normal
        if y < 0:
            a_lo, a_hi, y = -a_hi, -a_lo, -y
        return a_lo >= y / 2 and a_hi <= 2 * y and a_lo >= self.fmt.normal

    def _grain(self, x, e, j: int, values=None, stored=None) -> int | None:
        """An exponent v with x̂_j a multiple of 2^v (verify/float_analysis.py)."""
        if not e[j] and is_point(x):
            return valuation(x[j])
        if values is not None and values[j] is not None:
            return valuation(values[j])
        lo, hi = (x[j], x[j]) if is_point(x) else coordinate_range(x, j)
        least = (min(abs(lo), abs(hi)) if lo * hi > 0 else ZERO) - e[j]
        v = grain(max(least, ZERO), self.fmt)
        return v if stored is None or stored[j] is None else max(v, stored[j])

    def _floor(self, grains) -> int:
        """The grain of any float evaluation of a sum of terms of these grains (None: 0)."""
        return min((g for g in grains if g is not None), default=self.fmt.emax)

    def _exact(self, terms) -> int | None:
        return exact_sum((t for t in terms if t[1]), self.fmt)

    def _ff_token(self, x, e, mag, values, stored, eta, U, b, W, writers, where) -> tuple:
        """``mag``: the token's magnitude bound; ``writers[i]``: the units with a
        nonzero weight on output coordinate i (exact or rounded); ``where()``
        names the token for a message."""
        fmt, d = self.fmt, self.d
        gx = [self._grain(x, e, j, values, stored) for j in range(d)]
        status, dz, rho, smag, gs = [], [], [], [], []
        for k, row in enumerate(U):
            lo, hi = (row.dot(x),) * 2 if is_point(x) else projection_range(x, row.exact, None)
            lo, hi = lo + b.exact[k], hi + b.exact[k]
            terms = [(b.grains[k], abs(b.hat[k]))] + [(_times(row.grains[j], gx[j]), abs(row.hat[j]) * mag[j])
                                                     for j in row.nonzero["hat"]]
            g = self._exact(terms)
            if g is not None or self._sterbenz(x, e, row, b, k):
                rounding = row.absdot("delta", mag) + b.delta[k]
            else:
                c = row.count + (b.hat[k] != 0)
                scaled = row.absdot("hat", mag) + abs(b.hat[k])
                rounding = row.absdot("delta", mag) + b.delta[k] + fmt.gamma(max(c, 1)) * scaled + c * fmt.tiny
            err = row.absdot("exact", e) + rounding
            least = lo - err
            g = max(self._floor(exp for exp, _ in terms), grain(max(least, ZERO), fmt))
            if err == 0 and lo == hi != 0:  # ẑ_k = z_k: a multiple of its own lowest bit
                g = max(g, valuation(lo))
            if hi + err <= 0:
                status.append("off")
                smag.append(ZERO)
            else:
                status.append("on" if least >= 0 else "uncertain")
                smag.append(max(abs(lo), abs(hi)) + err)
                if status[-1] == "uncertain" and self.uncertain is None:
                    self.uncertain = (f"{where()}: unit {k}'s pre-activation [{approx(lo)}, {approx(hi)}] "
                                      f"is within its error bound {approx(err)} of 0")
            dz.append(err)
            rho.append(rounding)
            gs.append(g)
        copy = eta.exact[0] == 1 and eta.hat[0] == 1
        plain = copy or eta.exact[0] == 0 and eta.hat[0] == 0
        # where no live unit writes, every term but η̂ x̂_i is 0·relu or Ŵ·0: x̂_i + 0 + … = x̂_i, 0·x̂_i + … = 0
        out = list(e) if copy else [ZERO] * d
        grains = list(stored) if copy and stored else [None] * d
        erred = [j for j, v in enumerate(e) if v]
        for i in range(d):
            live = [k for k in writers[i] if status[k] != "off"]
            if plain and not live:
                continue
            total = abs(eta.delta[0]) * mag[i]
            terms = abs(eta.hat[0]) * mag[i]
            lo, hi = (x[i], x[i]) if is_point(x) else coordinate_range(x, i)  # x̂_i's sign, then each term's
            sign = (1 if lo - e[i] >= 0 else -1 if hi + e[i] <= 0 else 0) * ((eta.hat[0] > 0) - (eta.hat[0] < 0))
            grid = [(_times(eta.grains[0], gx[i]), terms, sign)]
            count = int(eta.hat[0] != 0)
            on = []
            for k in live:
                w, wd, wh = W[i].exact[k], W[i].delta[k], W[i].hat[k]
                if status[k] == "on":
                    if w:
                        on.append(k)
                        total += abs(w) * rho[k]
                else:
                    total += abs(w) * dz[k]
                total += wd * smag[k]
                terms += abs(wh) * smag[k]
                grid.append((_times(W[i].grains[k], gs[k]), abs(wh) * smag[k], (wh > 0) - (wh < 0)))
                count += wh != 0
            self._check_range(terms, f"coordinate {i + 1} of the FF output")
            for j in erred:  # |M|·e, M's row i = η e_i + Σ_on W_ik U_k, over the j with e_j ≠ 0
                m = (eta.exact[0] if j == i else ZERO) + sum((W[i].exact[k] * U[k].exact[j] for k in on), ZERO)
                total += abs(m) * e[j]
            if self._exact(grid) is None:
                total += fmt.gamma(max(count, 1)) * terms + count * fmt.tiny
            out[i] = up(total)
            grains[i] = self._floor(t[0] for t in grid)
        return tuple(out), tuple(v == "off" for v in status), grains

    # ---- attention

    def _sa(self, step, before, after, where: str) -> None:
        rho, A, V = self._rounded(step.block, "sa")
        softmax = self.model.attention == "softmax"
        for name, m in (("A", A), ("V", V)):
            self._check_entries(m, name)
        checks = [*self._matrix_checks(A, "A"), *self._matrix_checks(A.transposed, "Aᵀ"), *self._matrix_checks(V, "V"),
                  (lambda X, n: A.bilinear(X, X, "hat"), "an attention score"),
                  # the low-rank form's scale·⟨x_i, x_l⟩ forms ⟨x̂_i, x̂_l⟩ first, with a scale of 0 too (0·inf = NaN)
                  (lambda X, n: sum((x * x for x in X), ZERO), "⟨x_i, x_l⟩ (before the scale)"),
                  (lambda X, n: n * max(X, default=ZERO), "the sum of an attention average")]
        if softmax:
            tau = round_nearest(self.model.temperature, self.fmt)
            checks.append((lambda X, n: A.bilinear(X, X, "hat") / tau, "a scaled attention score"))
        self._ranges(checks)
        if rho.exact[0] == 1 and rho.hat[0] == 1 and V.literal_zero:
            return  # x̂ + 0·(finite) = x̂ exactly
        plain = rho.exact[0] == rho.hat[0] and rho.hat[0] in (0, 1)  # ρ̂ x̂_c is x̂_c or 0, exactly
        copied = [plain and V.zero_row(c) for c in range(self.d)]  # and V's row c is 0: x̂_c + 0 or 0 + 0
        forget = rho.exact[0] == 0 and rho.hat[0] == 0  # the output is V m_i alone
        new, values, gr, alts = [], [], [], []
        for j, seq in enumerate(step.before):
            o = self.offsets[j]
            errs = self.err[o:o + len(seq)]
            mags = self.mag[o:o + len(seq)]
            vals, stored = self.val[o:o + len(seq)], self.gr[o:o + len(seq)]
            known = None  # per token, the known values of its attention mean (hardmax): ``mean(i)``
            if softmax and len(seq) == 1 and is_point(seq[0]):  # ŝ/τ̂ is finite: the checks above
                v = self._values(o, seq[0], errs[0]) or (None,) * self.d
                read = V.columns(self.d)  # the coordinates V reads: the others' values change nothing
                runs = [None if c is None or k not in read else _lone_runs(c, self.fmt) for k, c in enumerate(v)]
                means, known = [self._alone(seq[0], mags[0], errs[0], v, runs)], "alone"
            elif A.literal_zero:
                means = [self._uniform(seq, mags, errs, softmax, V.columns(self.d))] * len(seq)
                known = "tied" if not softmax else None
            elif softmax:
                sa = self.model.blocks[step.block].sa
                means = self._softmax(seq, mags, errs, A, sa, j, V.columns(self.d))
                known = [m[3] if len(m) > 3 else None for m in means]  # a dominated mean's known values
            elif step.attention is None:  # the replay took A (or V, with ρ = 1) as the zero matrix it is
                raise Failed(f"{'A' if step.uniform else 'V'} is the zero matrix but not stored as 0: "
                             f"its float products need not be exact zeros")
            else:
                means = self._hardmax(step.attention[j], seq, mags, errs, vals, stored, A,
                                      self.model.blocks[step.block].sa, j)
                known = [att.argmax[0] for att in step.attention[j]]  # unique: _hardmax proved it
            per_mean, outs, tied = {}, {}, []  # by the mean's identity (a hardmax mean is its argmax's)

            def mean(i: int) -> list:
                """The alternatives of token i's mean's known values: its argmax token's, the tie
                average (once), a lone or dominant token's (each value a run may give)."""
                if known == "alone":
                    return _combinations(runs)
                if softmax and known is not None:
                    return _combinations(known[i]) if known[i] is not None else [None]
                if known != "tied":
                    return (known and self._alternatives(o + known[i], seq[known[i]], errs[known[i]])) or [None]
                if not tied:  # a literal-zero A: every token of the sequence tied
                    tie = determined.mean([self._values(o + l, x, e) for l, (x, e) in
                                           enumerate(zip(seq, errs))], self.fmt, range(self.d))
                    tied.extend([None] if tie is None else _combinations(tie))
                return tied
            for i, e in enumerate(errs):
                which = (id(means[i][0]), id(means[i][1]))
                if which not in per_mean:
                    per_mean[which] = self._sa_out(means[i], rho, V, copied)
                if (slot := which if forget else i) not in outs:  # with ρ = 0 the bound is the mean's alone
                    outs[slot] = per_mean[which](mags[i], e)
                x, found = after[o + i], []
                if any(outs[slot]):
                    fixed = x if is_point(x) else tuple(lo if lo == hi else None for lo, hi in
                                                        (coordinate_range(x, c) for c in range(self.d)))
                    found = [determined.attention(v, determined.forms(m, V, self.fmt, self._rows), rho, copied, fixed,
                                                  outs[slot], self.fmt)
                             for v in self._alternatives(o + i, seq[i], e) for m in mean(i)]
                bound, v, a = self._settle(found, x, outs[slot])
                new.append(bound)
                values.append(v)
                alts.append(a)
                gr.append(tuple(self._sa_grains(rho, V, copied, means[i][2], [
                    self._grain(seq[i], e, c, vals[i], stored[i]) for c in range(self.d)]))
                    if any(bound) and len(means[i]) > 2 else None)
        self.err, self.val, self.gr, self.alt = new, values, gr, alts
        self._refresh(after)

    def _sa_grains(self, rho: Rounded, V: Matrix, copied: list[bool], gm: list, gq: list) -> list:
        """The grains of ρ̂ x̂_c + (V̂ m̂)_c, m̂ a copied token (verify/float_analysis.py)."""
        out = []
        for c in range(self.d):
            terms = [_times(rho.grains[0], gq[c])] if rho.hat[0] else []
            if not copied[c]:
                terms.append(_times(V.scale.grains[0], gm[c]))
                terms += [_times(_times(u.grains[c], v.grains[b]), gm[b])
                          for u, v in V.terms if u.hat[c] for b in v.nonzero["hat"]]
            out.append(self._floor(terms))
        return out

    def _check_entries(self, m: Matrix, name: str) -> None:
        """A dense scale·I + Σ u vᵀ stays finite."""
        entry = abs(m.scale.hat[0]) + sum((max(map(abs, u.hat)) * max(map(abs, v.hat)) for u, v in m.terms), ZERO)
        self._check_range(entry, f"an entry of {name}")

    @staticmethod
    def _matrix_checks(m: Matrix, name: str) -> list:
        """m's product with a token (or a mean of tokens: 2X bounds one) and the low-rank
        intermediates v·x, u·x stay finite."""
        return [(lambda X, n: 2 * max(m.apply_abs(X, "hat")), f"{name} times a token")] + [
            (lambda X, n, u=u, v=v: 2 * max(u.absdot("hat", X), v.absdot("hat", X)), f"a low-rank product of {name}")
            for u, v in m.terms]

    def _uniform(self, seq, mags, errs, softmax: bool, read) -> tuple:
        """The mean over literal-zero scores, hardmax or softmax (verify/float_analysis.py says why),
        on the coordinates V reads (``read``); the others 0, as nothing reads them."""
        fmt, n = self.fmt, len(seq)
        if softmax and not round_nearest(self.model.temperature, fmt) > 0:
            raise Failed(f"the temperature rounds to 0 in {fmt.name}: 0/0 is NaN")
        kappa = 2 * EXP_ULPS * fmt.unit if softmax else ZERO
        rho, beta = (1 + kappa) / (1 - kappa), 2 * kappa / (1 - kappa)
        eta = (1 + fmt.gamma(n + 2)) / (1 - fmt.gamma(n - 1)) - 1 if softmax else fmt.gamma(n + 1)
        em, mm = [ZERO] * self.d, [ZERO] * self.d
        for c in read:
            ranges = [coordinate_range(x, c) for x in seq]
            half = (max(r[1] for r in ranges) - min(r[0] for r in ranges)) / 2
            mean_e = sum((e[c] for e in errs), ZERO) / n
            mean_m = sum((m[c] for m in mags), ZERO) / n
            underflow = fmt.tiny * (n + 1 + n * mean_m)
            em[c] = up(beta * (half + mean_e) + mean_e + eta * rho * mean_m + underflow)
            mm[c] = up((1 + eta) * rho * mean_m + underflow)
        return em, mm

    def _score_error(self, A: Matrix, M, E):
        """A bound on |ŝ_il − s_il| for every l of a sequence (M, E its maxima),
        as a function of token i's magnitude mi, error ei and |x_i|. The
        sequence's side of each bilinear bound, (|u|·M) and the like, is taken
        once here, not once per token."""
        d, r = self.d, len(A.terms)
        sM = sum(M, ZERO)
        s, sd, sh = abs(A.scale.exact[0]), A.scale.delta[0], abs(A.scale.hat[0])
        uM = [(u.absdot("exact", M), u.absdot("exact", E), u.absdot("hat", M), u.absdot("delta", M))
              for u, _ in A.terms]
        u_hat_M = sum((m[2] for m in uM), ZERO)
        g = self.fmt.gamma(2 * A.reach(d) + r + 2)

        def error(mi, ei, xi_abs) -> fmpq:
            lowrank = u_hat_M + sum((v.absdot("hat", mi) for _, v in A.terms), ZERO)  # |u|·|x_l| + |v|·|x_i|
            smi = sum(mi, ZERO)
            # underflows (tiny/2 each, counted as tiny: the slack covers the roundings they pass through),
            # each times what later multiplies it
            underflow = ((r + 1) * smi * sM  # an entry of the dense Â: r + 1 products
                         + (d + r + 1) * (smi + sM)  # a coordinate of Â x̂_i (Âᵀ x̂_l) times x̂_l's (x̂_i's)
                         + d * (lowrank + sh)  # v·x̂_i, u·x̂_l, ⟨x̂_i, x̂_l⟩ times the other factor, the scale
                         + d * d + d + r * (2 * d + 1) + 1)  # the last products
            total = underflow * self.fmt.tiny
            if s or sd or sh:  # the dense part: |scale|·a·b for each bilinear bound
                total += s * (dot(ei, M) + dot(xi_abs, E)) + (sd + g * sh) * dot(mi, M)
            for (_, v), (ue, uE, uh, ud) in zip(A.terms, uM):
                total += (v.absdot("exact", ei) * ue + v.absdot("exact", xi_abs) * uE
                          + v.absdot("delta", mi) * uh + v.absdot("exact", mi) * ud + g * v.absdot("hat", mi) * uh)
            return total
        return error

    def _seq_max(self, vectors) -> list:
        return [max(column) for column in zip(*vectors)]

    def _centred(self, A: Matrix, seq, mags, errs, i: int, a: int, cache: dict):
        """A function of l bounding |(ŝ_l − ŝ_a) − (s_l − s_a)| for query i (verify/float_analysis.py)."""
        zero, xi = [ZERO] * self.d, [abs(v) for v in seq[i]]
        dq = [p + q for p, q in zip(A.apply_delta(mags[i]), A.apply_abs(errs[i]))]
        ax = A.apply_abs(xi)

        def rho(l: int) -> fmpq:
            if l not in cache:
                cache[l] = self._score_error(A, mags[l], zero)
            return cache[l](mags[i], zero, xi)
        rho_a = rho(a)

        def error(l: int) -> fmpq:
            both = [p + q for p, q in zip(errs[l], errs[a])]
            near = [abs(v - w) + b for v, w, b in zip(seq[l], seq[a], both)]
            return up(dot(dq, near) + dot(ax, both) + rho(l) + rho_a)
        return error

    def _hardmax(self, attention, seq, mags, errs, vals, stored, A: Matrix, sa: SA, j: int) -> list:
        M, E = self._seq_max(mags), self._seq_max(errs)
        score_error = self._score_error(A, M, E)
        cache, out = {}, []
        for i, (att, x, e) in enumerate(zip(attention, seq, errs)):
            if len(att.argmax) > 1:
                raise Failed(f"token [{j}, {i}]: tied argmax {list(att.argmax)}; the float run may break the tie")
            a = att.argmax[0]
            delta = up(score_error(mags[i], e, [abs(v) for v in x]))
            if att.gap is not None and not att.gap > 2 * delta:
                s, centred = Scores(sa.A, list(seq)).row(i), self._centred(A, seq, mags, errs, i, a, cache)
                for l, v in enumerate(s):
                    if l != a and not s[a] - v > 2 * delta and not s[a] - v > centred(l):
                        raise Failed(f"token [{j}, {i}]: argmax gap {approx(s[a] - v)} to token {l} ≤ its score "
                                     f"difference's error {approx(centred(l))}")
            out.append((errs[a], mags[a], [self._grain(seq[a], errs[a], c, vals[a], stored[a]) for c in range(self.d)]))
        return out

    def _softmax(self, seq, mags, errs, A: Matrix, sa: SA, j: int, read) -> list:
        """Per token (error, magnitude) of the attention mean, the weights
        taken relative to an exact argmax a (verify/float_analysis.py says
        why): ω_l bounds the error of the float z_l − z_a, the pair's own
        bound where a weight matters, the sequence's elsewhere."""
        if not all(is_point(x) for x in seq):
            raise Failed("softmax attention over enclosures (a second scored layer) is not analysed")
        table = Scores(sa.A, list(seq))
        fmt, n, d = self.fmt, len(seq), self.d
        u = fmt.unit
        tau = self.model.temperature
        tau_hat = round_nearest(tau, fmt)
        inv_err = abs(1 / tau_hat - 1 / tau)
        g = fmt.gamma(n + 2)
        ulp4 = 2 * EXP_ULPS * u
        norm = (1 + u) / ((1 - ulp4) * (1 - g))
        floor = ((2 * n + 2) * (1 + g) * (1 + u) / ((1 - ulp4) * (1 - g)) + fmpq(1, 2)) * fmt.tiny
        any_error = self._score_error(A, self._seq_max(mags), self._seq_max(errs))
        rounding: dict = {}
        out = []
        for i, (x, e) in enumerate(zip(seq, errs)):
            s = [ZERO] * n if A.literal_zero else table.row(i)
            xa = [abs(v) for v in x]
            smax = max(s)
            a = s.index(smax)
            x_a, m_a, e_a = seq[a], mags[a], errs[a]
            dist = [[abs(v - w_) for v, w_ in zip(xl, x_a)] for xl in seq]
            ds = ZERO if A.literal_zero else up(any_error(mags[i], e, xa))
            big = max(abs(v) for v in s)
            scaled = (big + ds) / tau_hat
            self._check_range(scaled, "a scaled attention score")
            worst = up(ds / tau_hat + big * inv_err + 2 * u * scaled + fmt.tiny)
            omega = [up(2 * worst + u * ((smax - v) / tau + 4 * worst)) for v in s]
            omega[a] = ZERO
            with ctx.workprec(PREC):
                w = [arb((v - smax) / tau).exp() for v in s]
                total = sum(w, arb(0))
                zeta_any = arb(max(omega)).exp() / (1 - ulp4) - 1
            heavy = [l for l in range(n) if l != a and not A.literal_zero and w[l] * zeta_any > 2 ** -30]
            centred = self._centred(A, seq, mags, errs, i, a, rounding) if heavy else None
            for l in heavy:
                pair = up(centred(l) / tau_hat + abs(s[l] - smax) * inv_err + 4 * u * scaled + 2 * fmt.tiny
                          + u * ((smax - s[l]) / tau + 4 * worst))
                omega[l] = min(omega[l], pair)
            with ctx.workprec(PREC):
                p = [wl / total for wl in w]
                zeta = [arb(v).exp() / (1 - ulp4) - 1 for v in omega]
                H = bounds(sum((pl * zl for pl, zl in zip(p, zeta)), arb(0)))[1]
                kappa = [None if H >= 1 else bounds((1 + zl) * arb((1 + u) / (1 - g)) / (1 - arb(H)) - 1)[1]
                         for zl in zeta]
                w_hat = [((1 + ulp4) * bounds(wl * arb(v).exp())[1] + EXP_ULPS * fmt.tiny) * norm
                         for wl, v in zip(w, omega)]
                pu = [min(fmpq(1), bounds(pl)[1]) for pl in p]
            em = [None] * d
            if H < 1:
                lo_w = [k * pl + floor for k, pl in zip(kappa, pu)]
                hi_w = [(1 + k) * pl + floor for k, pl in zip(kappa, pu)]
                em = [up(sum((lw * mg[c] + pl * er[c] + g * hw * mg[c]
                              for lw, hw, pl, mg, er in zip(lo_w, hi_w, pu, mags, errs)), ZERO) + n * fmt.tiny)
                      for c in range(d)]
                em = [min(em[c], up(sum((lw * (dl[c] + er[c]) + pl * er[c] + g * hw * mg[c]
                                         for lw, hw, pl, dl, mg, er in zip(lo_w, hi_w, pu, dist, mags, errs)), ZERO)
                                    + (2 * g + g * g) * m_a[c] + n * fmt.tiny)) for c in range(d)]
                mm = [up((1 + g) * sum((hw * mg[c] for hw, mg in zip(hi_w, mags)), ZERO) + n * fmt.tiny) for c in range(d)]
            else:
                mm = [None] * d
            if s.count(smax) == 1:
                others = [l for l in range(n) if l != a]
                sum_error = g + n * fmt.tiny
                for c in range(d):
                    near = sum((w_hat[l] * (dist[l][c] + errs[l][c] + e_a[c] + g * mags[l][c]) for l in others), ZERO)
                    b = up(e_a[c] + (sum_error + g * (1 + g)) * m_a[c] + near + n * fmt.tiny)
                    em[c] = b if em[c] is None else min(em[c], b)
                    b = up((1 + g) * ((1 + sum_error) * m_a[c] + sum((w_hat[l] * (mags[l][c] + m_a[c]) for l in others), ZERO))
                           + n * fmt.tiny)
                    mm[c] = b if mm[c] is None else min(mm[c], b)
            if s.count(smax) == 1 and H < 1:  # the normalisation counted once (float_analysis._sum_error)
                with ctx.workprec(PREC):
                    near = [bounds((1 + zl) / (1 - arb(H)) - 1)[1] for zl in zeta]
                lw = [k * pl + floor for k, pl in zip(near, pu)]
                hw = [(1 + k) * pl + floor for k, pl in zip(near, pu)]
                gn, g3 = fmt.gamma(n - 1), fmt.gamma(3)
                sig = min(gn, (1 + 2 * gn) * sum((hw[l] for l in others), ZERO))
                if sig < fmpq(1, 2):
                    eta = sig / (1 - sig)
                    for c in range(d):
                        mq = sum((h * mg[c] for h, mg in zip(hw, mags)), ZERO)
                        mo = (1 + 2 * gn) * sum((hw[l] * mags[l][c] for l in others), ZERO)
                        b = up(sum((lw[l] * (dist[l][c] + errs[l][c]) + pu[l] * errs[l][c] for l in range(n)), ZERO)
                               + eta * mq + (1 + eta) * (g3 * mq + (1 + g3) ** 2 * min(gn * mq, mo))
                               + fmt.tiny * sum((mg[c] for mg in mags), ZERO) + 2 * n * fmt.tiny)
                        em[c] = b if em[c] is None else min(em[c], b)
            if None in em or None in mm:
                raise Failed(f"token [{j}, {i}]: the softmax weights' errors are unbounded (H = {approx(H)} ≥ 1)")
            out.append(self._dominated(j, a, seq, errs, read, em, mm, w_hat, pu, mags, dist)
                       if s.count(smax) == 1 else (em, mm))
        return out

    def _dominated(self, j: int, a: int, seq, errs, read, em, mm, w_hat, pu, mags, dist) -> tuple:
        """A's values where the other weights vanish in every run (float_analysis._dominated says why)."""
        fmt, d, n = self.fmt, self.d, len(seq)
        others = [l for l in range(n) if l != a]
        grow = 1 + fmt.gamma(n - 1)
        weights = grow * sum((w_hat[l] for l in others), ZERO)
        scale = (1 + fmt.unit) ** 3 / (1 - 2 * EXP_ULPS * fmt.unit)
        lone = self._values(self.offsets[j] + a, seq[a], errs[a]) or (None,) * d
        noise = [sum((pu[l] * dist[l][c] for l in others), ZERO) for c in range(d)]
        em, mm, known = list(em), list(mm), [None] * d
        for c in read:
            live = [l for l in others if mags[l][c]]
            slack = grow * (scale * sum((w_hat[l] * mags[l][c] for l in live), ZERO)
                            + fmt.tiny * (n + sum((mags[l][c] for l in live), ZERO))) if live else ZERO
            if lone[c] is not None and (r := determined.dominated(lone[c], slack, weights, fmt)):
                em[c] = min(em[c], max(abs(v - seq[a][c]) for v in r) + noise[c])
                mm[c] = min(mm[c], max(max(abs(v) for v in r), abs(seq[a][c]) + noise[c]))
                known[c] = frozenset(r)
        if not any(known):
            return em, mm
        grains = [min((valuation(v) for v in known[c] if v), default=None) if known[c] else
                  grain(max(abs(seq[a][c]) - noise[c] - em[c], ZERO), fmt) for c in range(d)]
        return em, mm, grains, tuple(known)

    def _alone(self, x_a, m_a: list, e_a: list, values, runs: list) -> tuple:
        """The softmax mean of one token: ê/ê, exp's error cancels; x̂ times three roundings
        (verify/float_analysis.py says why); where x̂_c is known, the values its runs take."""
        fmt, g3 = self.fmt, self.fmt.gamma(3)
        em = [up(e + g3 * m + 2 * fmt.tiny) if m else e for e, m in zip(e_a, m_a)]
        mm = [up((1 + g3) * m + 2 * fmt.tiny) if m else m for m in m_a]
        grains = [self._grain(x_a, em, c) for c in range(self.d)]
        for c, r in enumerate(runs):
            if r is not None:
                em[c] = e_a[c] + max(abs(m - values[c]) for m in r)  # exact: no 40-bit rounding up
                mm[c] = max(abs(m) for m in r)
                grains[c] = min((valuation(m) for m in r if m), default=None)
        return em, mm, grains

    def _exact_product(self, V: Matrix, gm: list | None, mm: list) -> list[bool]:
        """Per coordinate: whether each form of (V̂ m̂)_c is exact (verify/float_analysis.py)."""
        s, d = V.scale, self.d
        if V.scaled_copy or gm is None:
            return [V.scaled_copy] * d
        inner = [self._exact([(_times(v.grains[b], gm[b]), abs(v.hat[b]) * mm[b]) for b in v.nonzero["hat"]])
                 for _, v in V.terms]
        if None in inner:
            return [False] * d
        rows = range(d) if s.hat[0] else sorted({c for u, _ in V.terms for c in u.nonzero["hat"]})
        cols = range(d) if s.hat[0] else sorted({b for _, v in V.terms for b in v.nonzero["hat"]})
        out = [True] * d
        for c in rows:
            low = self._exact([(_times(s.grains[0], gm[c]), abs(s.hat[0]) * mm[c])] + [
                (_times(u.grains[c], G), abs(u.hat[c]) * v.absdot("hat", mm)) for (u, v), G in zip(V.terms, inner)])
            dense = []
            for b in cols:
                parts = [s.hat[0]] * (c == b) + [u.hat[c] * v.hat[b] for u, v in V.terms]
                if exact_sum([(valuation(q), abs(q)) for q in parts], self.fmt) is None:
                    dense = None
                    break
                entry = sum(parts, ZERO)
                dense.append((_times(valuation(entry), gm[b]), abs(entry) * mm[b]))
            out[c] = low is not None and dense is not None and self._exact(dense) is not None
        return out

    def _sa_out(self, mean, rho, V: Matrix, copied: list[bool]):
        """A token's output bound as a function of its magnitude and error;
        the part that depends on the attention mean alone (|V̂|·|m| and the
        rest of the bound but for the ρ terms) taken once per distinct mean.
        ``copied[c]``: coordinate c is ρ̂ x̂_c + 0 with ρ̂ ∈ {0, 1}, exactly."""
        em, mm, *gm = mean
        g = self.fmt.gamma(V.reach(self.d) + len(V.terms) + 3)
        # dense entries (× |m|), the low-rank v·m (× |u|), the products
        underflow = (len(V.terms) + 1) * sum(mm, ZERO) + self.d + 2 * len(V.terms) + 2
        hat = V.apply_abs(mm, "hat")
        exact = self._exact_product(V, gm[0] if gm else None, mm) if rho.hat[0] == 0 else [False] * self.d
        rest = [a + dv if exact[c] else
                a + dv + g * h + (underflow + self.d * sum((abs(u.hat[c]) for u, _ in V.terms), ZERO)) * self.fmt.tiny
                for c, (a, dv, h) in enumerate(zip(V.apply_abs(em), V.apply_delta(mm), hat))]

        live = [c for c in range(self.d) if not copied[c]]

        def out(mag, e) -> tuple:
            bound = list(e) if rho.hat[0] == 1 else [ZERO] * self.d  # the copied coordinates'
            for c in live:
                rho_mag = abs(rho.hat[0]) * mag[c]
                self._check_range(rho_mag + hat[c], f"coordinate {c + 1} of the attention output")
                bound[c] = up(abs(rho.exact[0]) * e[c] + rho.delta[0] * mag[c] + g * rho_mag + rest[c])
            return tuple(bound)
        return out
