"""Exact rational → IEEE binary64 / binary32 / binary16 or bfloat16, round to nearest, ties to even.

Every parameter of an exported model is the model file's exact rational
rounded *once* to the target format. Going through float64 first would round
twice: 1 + 2^-24 + 2^-60 rounds to the binary64 tie 1 + 2^-24, which then
rounds to even (1.0) in binary32, while the nearest binary32 is 1 + 2^-23.
Likewise through float32 for the 16-bit formats (torch converts a float64 to
bfloat16 through float32): 1 + 2^-8 + 2^-40 becomes the tie 1 + 2^-8, then 1.0,
while the nearest bfloat16 is 1 + 2^-7.
"""
from __future__ import annotations

import math
from fractions import Fraction

# format: (precision p including the hidden bit, emin, emax)
FORMATS = {"binary64": (53, -1022, 1023), "binary32": (24, -126, 127), "binary16": (11, -14, 15),
           "bfloat16": (8, -126, 127)}
DTYPES = {"float64": "binary64", "float32": "binary32", "float16": "binary16", "bfloat16": "bfloat16"}


def as_fraction(x) -> Fraction:
    """An exact Fraction from an int, a float, a Fraction, a python-flint fmpq or a
    tfcert number string ("7/12", "-1.25", "3e-4")."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(x, int):
        return Fraction(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"{x} is not a finite number")
        return Fraction(x)
    if hasattr(x, "p") and hasattr(x, "q"):  # flint.fmpq
        return Fraction(int(x.p), int(x.q))
    if isinstance(x, str):
        from tfcert.verify.numbers import parse_number
        return as_fraction(parse_number(x, repr(x)))
    raise TypeError(f"cannot read {type(x).__name__} {x!r} as an exact number")


def round_to(x, fmt: str = "binary64") -> float:
    """The binary ``fmt`` number nearest to the exact value of ``x`` (ties to even),
    returned as a Python float (exact: every binary32 number is a binary64 number).
    OverflowError when it rounds to ±infinity."""
    p, emin, emax = FORMATS[DTYPES.get(fmt, fmt)]
    q = as_fraction(x)
    a, b = abs(q.numerator), q.denominator
    if a == 0:
        return 0.0
    # e = ⌊log2(a/b)⌋
    e = a.bit_length() - b.bit_length()
    if (a << max(-e, 0)) < (b << max(e, 0)):
        e -= 1
    qe = max(e, emin) - (p - 1)  # exponent of one unit in the last place (subnormals: 2^(emin-p+1))
    num, den = (a << -qe, b) if qe <= 0 else (a, b << qe)
    n, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and n & 1):
        n += 1
    if n.bit_length() + qe > emax + 1:  # n·2^qe ≥ 2^(emax+1): rounds to infinity
        raise OverflowError(f"{q} overflows {DTYPES.get(fmt, fmt)}")
    value = math.ldexp(float(n), qe)  # exact: n < 2^(p+1) and the result is representable
    return -value if q < 0 else value
