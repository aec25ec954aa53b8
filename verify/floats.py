"""IEEE 754 binary formats: exact rounding of rationals to the nearest
representable number, and the constants of the standard model of floating
point arithmetic (Higham, *Accuracy and Stability of Numerical Algorithms*,
2nd ed., §2.2 and Lemma 3.1):

    fl(a op b) = (a op b)(1 + δ) + η,   |δ| ≤ u,  |η| ≤ tiny/2,  δη = 0,

with u = 2^-p the unit roundoff and tiny the spacing of the subnormal
numbers; additions and subtractions are exact when the result is subnormal
(η = 0 for them). A sum of k products evaluated in any order, with or
without fused multiply-add, then errs by at most γ_k = ku/(1 − ku) times the
sum of the products' magnitudes, plus k·tiny/2 for underflow.

Every bound here is an exact rational; ``up`` rounds a bound upward to a
short dyadic so that bounds carried through thousands of layers stay small.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

from flint import fmpq, fmpz

from tfcert.verify.numbers import ZERO, show

BOUND_BITS = 40  # significant bits kept by ``up``
EXP_ULPS = 2  # documented accuracy of exp: 2 ulps (relative error ≤ 4u; 2·tiny below the normal range)


@dataclass(frozen=True)
class Format:
    """An IEEE 754 binary format: ``precision`` significand bits (the hidden
    bit included), normal exponents ``emin`` … ``emax``."""
    name: str
    precision: int
    emin: int
    emax: int

    def __hash__(self) -> int:
        return hash(self.name)  # gamma's cache hashes self at every call: the name alone, not every field

    @cached_property
    def unit(self) -> fmpq:
        """u = 2^-p: round to nearest errs by at most u relative."""
        return fmpq(1, 2 ** self.precision)

    @cached_property
    def tiny(self) -> fmpq:
        """The spacing of the subnormal numbers (the least positive number)."""
        return fmpq(1, 2 ** (self.precision - 1 - self.emin))

    @cached_property
    def normal(self) -> fmpq:
        """The least positive normal number."""
        return fmpq(2) ** self.emin

    @cached_property
    def largest(self) -> fmpq:
        return fmpq(2 ** self.precision - 1) * fmpq(2) ** (self.emax - self.precision + 1)

    @lru_cache(maxsize=None)
    def gamma(self, k: int) -> fmpq:
        """γ_k = ku/(1 − ku): the relative error of k roundings in a row."""
        ku = k * self.unit
        if ku >= fmpq(1, 2):
            raise ArithmeticError(f"{self.name}: {k} roundings in a row exceed the error model (ku ≥ 1/2)")
        return ku / (1 - ku)


# IEEE 754 binary64, binary32 and binary16, and bfloat16 (binary32's exponent range with 8 significant bits;
# a framework that computes a bfloat16 operation in binary32 and rounds the result rounds twice, which
# gives the correctly rounded result for +, −, ×, ÷ since 24 ≥ 2·8 + 2 — Figueroa, "When is double
# rounding innocuous?", SIGNUM Newsletter 30(3), 1995 — and likewise binary16, 24 ≥ 2·11 + 2)
FORMATS = {"binary64": Format("binary64", 53, -1022, 1023), "binary32": Format("binary32", 24, -126, 127),
           "binary16": Format("binary16", 11, -14, 15), "bfloat16": Format("bfloat16", 8, -126, 127)}


def _floor_log2(num: int, den: int) -> int:
    """⌊log2(num/den)⌋ for positive integers (int or fmpz)."""
    e = num.bit_length() - den.bit_length()
    if (num << max(-e, 0)) < (den << max(e, 0)):
        e -= 1
    return e


def round_nearest(q: fmpq, fmt: Format) -> fmpq:
    """The number of ``fmt`` nearest to q, ties to even. OverflowError when
    it would be infinite (|q| at least the largest number plus half an ulp)."""
    if q == 0 or q.q == 1 and q.p.bit_length() <= fmt.precision:
        return q  # an integer of at most p bits is a number of the format
    num, den = int(q.p), int(q.q)
    try:
        if not den & (den - 1):  # a dyadic, as every sum and product of numbers of a format is
            return fmpq(round_scaled(num, 1 - den.bit_length(), fmt), den)
        # else q lies strictly inside (n, n + 1)·2^-k, on whose grid every midpoint between two
        # numbers of the format near q lies: the grid's midpoint (2n + 1)·2^-(k+1) rounds as q does
        k = fmt.precision + 1 - _floor_log2(abs(num), den)
        n = (abs(num) << k) // den if k >= 0 else abs(num) // (den << -k)
        return fmpq(round_scaled(2 * n + 1, -k - 1, fmt)) * fmpq(2) ** (-k - 1) * (1 if num > 0 else -1)
    except OverflowError:
        raise OverflowError(f"{show(q)} overflows {fmt.name}") from None


def round_scaled(m: int, e: int, fmt: Format) -> int:
    """The number of ``fmt`` nearest to m·2^e, ties to even, as a multiple of 2^e: the integer
    arithmetic of rounding (round_nearest's, and determined.runs', which adds and rounds on
    one scale). OverflowError when it would be infinite."""
    a = abs(m)
    drop = max(a.bit_length() - 1 + e, fmt.emin) - fmt.precision + 1 - e  # the bits below the spacing
    if drop > 0:
        a, rest = a >> drop, a & ((1 << drop) - 1)
        if 2 * rest > 1 << drop or 2 * rest == 1 << drop and a & 1:
            a += 1
        a <<= drop
    top = fmt.emax - fmt.precision + 1 - e  # the largest number is (2^p − 1)·2^(top + e)
    if (a > ((1 << fmt.precision) - 1) << top) if top >= 0 else (a << -top > (1 << fmt.precision) - 1):
        raise OverflowError(f"{fmt.name}: overflow")
    return a if m > 0 else -a


def up(q: fmpq) -> fmpq:
    """A dyadic with at most BOUND_BITS significant bits that is ≥ q ≥ 0, or
    q itself when it is already short: a dyadic of at most BOUND_BITS bits,
    or numerator and denominator of at most 64 bits each."""
    num, den = q.p, q.q  # FLINT integers: shifts and divisions without converting to int
    if num <= 0:
        return ZERO
    if q.height_bits() <= 64 or num.bit_length() <= BOUND_BITS and not den & (den - 1):
        return q  # short already (a dyadic of at most BOUND_BITS bits is its own rounding)
    if not den & (den - 1):  # a dyadic: the top BOUND_BITS bits of num, rounded up
        s = num.bit_length() - BOUND_BITS
        m, k = -(-num >> s), den.bit_length() - 1 - s
        return fmpq(m, fmpz(1) << k) if k >= 0 else fmpq(m << -k)
    shift = BOUND_BITS - 1 - _floor_log2(num, den)
    top, bottom = (num << shift, den) if shift >= 0 else (num, den << -shift)
    m = -(-top // bottom)
    return fmpq(m, fmpz(1) << shift) if shift >= 0 else fmpq(m << -shift)


@lru_cache(maxsize=None)
def exp_zero(fmt: Format) -> tuple[fmpq, ...]:
    """Every value a float run's exp(0) may take: the numbers of the format within 2·EXP_ULPS·u of 1."""
    near = (1 + k * fmt.unit for k in range(-2 * EXP_ULPS, 2 * EXP_ULPS + 1))
    return tuple(v for v in near if round_nearest(v, fmt) == v)


# ---------------------------------------------------------------- exact evaluation

def valuation(q: fmpq) -> int | None:
    """The v with q = odd·2^v (None for 0): every number of a binary format, and
    every product of two, is such a dyadic; ValueError for any other rational."""
    if not q:
        return None
    num, den = int(q.p), int(q.q)
    if den & (den - 1):
        raise ValueError(f"{q} is not a dyadic")
    return (num & -num).bit_length() - den.bit_length()


def grain(lower: fmpq, fmt: Format) -> int:
    """An exponent v such that every number of the format of magnitude at least
    ``lower`` (≥ 0) is a multiple of 2^v: its binade's spacing, or the subnormal
    spacing when ``lower`` is below the normal range."""
    if lower < fmt.normal:
        return fmt.emin - fmt.precision + 1
    return _floor_log2(int(lower.p), int(lower.q)) - fmt.precision + 1


def exact_limit(exp: int, fmt: Format) -> fmpq | None:
    """The exact evaluation lemma's bound on the terms' magnitudes for terms
    that are multiples of 2^exp (None when 2^exp is finer than the subnormal
    spacing: no bound then).

    Lemma. Let each term be a number of the format or the product of two, every
    term a multiple of 2^E, 2^E at least the subnormal spacing, and let the
    magnitudes of the terms that may be positive sum to at most S, and those of
    the terms that may be negative too, S ≤ min(2^(p+E), the largest number).
    Then every product, partial sum and fused a·b + c of these terms is the sum
    of some of them: a multiple of 2^E in [−S, S], an integer m times 2^E with
    |m| ≤ 2^p, so a number of the format (m of at most p bits at an exponent no
    finer than the subnormal spacing, or m = ±2^p, a power of two not above the
    largest number). Rounding returns a representable result unchanged (Higham,
    §2.2), so a float run computes the sum exactly, in any order, with or
    without fused multiply-add. (A term of unknown sign counts on both sides:
    with no signs known this asks the sum of all magnitudes to be at most S.)"""
    if fmpq(2) ** exp < fmt.tiny:
        return None
    return min(fmt.largest, fmpq(2) ** (fmt.precision + exp))


def exact_sum(terms, fmt: Format) -> int | None:
    """The lemma (exact_limit) on ``terms``, tuples (exponent, magnitude bound)
    or (exponent, magnitude bound, sign) — exponent None for a term that is
    exactly 0, sign 1 (the term is ≥ 0 in every run), −1 (≤ 0) or 0 (either):
    the exponent of the sum's grid when a float run computes the sum exactly,
    else None (an all-zero sum: the format's largest exponent)."""
    exps, pos, neg = [], fmpq(0), fmpq(0)
    for exp, mag, *sign in terms:
        if exp is not None:
            exps.append(exp)
            pos += mag if not sign or sign[0] >= 0 else 0
            neg += mag if not sign or sign[0] <= 0 else 0
    if not exps:
        return fmt.emax
    limit = exact_limit(min(exps), fmt)
    return min(exps) if limit is not None and max(pos, neg) <= limit else None
