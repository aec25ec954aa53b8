"""Exact numbers as the file formats define them (docs/certificates.md, Numbers).

A number is a JSON integer, a bare JSON float (read as the exact decimal
written, so 0.1 is 1/10), or a string holding an integer, a decimal
("-1.25", "3e-4") or a fraction ("7/12"). Everything becomes a python-flint
``fmpq``; nothing ever passes through a binary float.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from flint import fmpq, fmpz

from tfcert.verify.errors import InputError

Vec = tuple  # tuple[fmpq, ...]; a token of R^d
ZERO, ONE = fmpq(0), fmpq(1)

MAX_DIGITS = 4000  # a dataset's numbers (the format): longest numerator/denominator/mantissa
MAX_EXPONENT = 4000  # largest |e| accepted in "xe±e"


@dataclass
class Limits:
    """What the readers and the replay accept (docs/certificates.md, "Limits");
    the CLI sets them with ``--limit NAME=VALUE``. Past ``bits`` a replay stops
    and its claims fail as "not checked"; past ``z3_seconds`` a region query is
    "undecided" and its claim fails; past ``tokens`` a dataset is refused
    before any work whose time grows with it."""
    file_bytes: int = 256 * 2**20  # any file read
    tokens: int = 10_000  # a dataset's input tokens, all sequences together
    digits: int = 64_000  # a model's or certificate's numbers (a dataset's: MAX_DIGITS)
    bits: int = 2**20  # numerator or denominator of any number the replay forms
    z3_seconds: float = 60.0  # one region query


LIMITS = Limits()


class LimitError(ArithmeticError):
    """A number of the replay grew past ``LIMITS.bits``: nothing is proved beyond it."""


def bounded(x: Vec) -> Vec:
    """``x``, or LimitError if one of its numbers is too large for the replay."""
    for v in x:
        if v.height_bits() > LIMITS.bits:
            raise LimitError(f"a number reached {v.height_bits()} bits, over the limit bits={LIMITS.bits}")
    return x

# re.ASCII: \d must not match other scripts' digits ("١", "５"), which int() would accept
_FRACTION = re.compile(r"([+-]?\d+)/(\d+)", re.ASCII)
_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?", re.ASCII)


_JSON_NAMES = {type(None): "null", dict: "an object", list: "a list"}  # as the file says it


class FloatLiteral(str):
    """The source text of a bare JSON float, kept so it is read exactly."""


class NonFinite(str):
    """NaN / Infinity as written bare in a file; rejected with its JSON path when read as a number."""


_SHORT: dict[str, fmpq] = {}  # texts of at most 16 characters already read (files repeat small numbers)


def parse_number(value: object, where: str, digits: int = MAX_DIGITS, index: int | None = None) -> fmpq:
    """Turn one JSON value into an exact rational, or raise InputError naming
    ``where`` (entry ``index`` of it, when given: that path is formed only for
    a message); at most ``digits`` digits (and |exponent| ≤ MAX_EXPONENT)."""
    if isinstance(value, str) and value in _SHORT:  # no limit refuses 16 characters: the value is the same
        return _SHORT[value]
    number = _parse(value, where if index is None else f"{where}[{index}]", digits)
    if isinstance(value, str) and len(value) <= 16 and len(_SHORT) < 100_000:
        _SHORT[value] = number
    return number


def _parse(value: object, where: str, digits: int) -> fmpq:
    if isinstance(value, NonFinite):
        raise InputError(f"{where}: {value} is not a finite number")
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a number, got a boolean")
    if isinstance(value, int):
        bits = abs(value).bit_length()  # 2^(3·digits) < 10^digits < 2^(4·digits): 10^digits formed only near it
        if bits > 3 * digits and (bits > 4 * digits or abs(value) >= 10**digits):  # more than ``digits`` digits
            raise InputError(f"{where}: number too large (over {digits} digits, limit digits={digits})")
        return fmpq(value)
    if not isinstance(value, str):
        raise InputError(f"{where}: expected a number, got {_JSON_NAMES.get(type(value), type(value).__name__)}")
    text = value.strip()
    if not text:
        raise InputError(f"{where}: empty string is not a number")
    if len(text) > 2 * digits + 16:  # a fraction of two longest parts, signed; a mantissa, point and exponent
        raise InputError(f"{where}: number too large ({len(text)} characters, limit digits={digits})")
    match = _FRACTION.fullmatch(text)
    if match:
        _digits(where, digits, match.group(1).lstrip("+-"), match.group(2))
        den = _integer(match.group(2))
        if den == 0:
            raise InputError(f"{where}: zero denominator in {show(repr(text))}")
        return fmpq(_integer(match.group(1)), den)
    match = _DECIMAL.fullmatch(text)
    if not match or not (match.group(2) or match.group(3)):
        raise InputError(f"{where}: malformed number {show(repr(text))}")
    sign, whole, frac, exp = match.groups()
    frac = frac or ""
    _digits(where, digits, (whole or "") + frac)
    exponent = int(exp) if exp else 0
    if abs(exponent) > MAX_EXPONENT:
        raise InputError(f"{where}: exponent out of range in {show(repr(text))}")
    mantissa = _integer((whole or "0") + frac) * (-1 if sign == "-" else 1)
    shift = exponent - len(frac)
    if shift >= 0:
        return fmpq(mantissa * fmpz(10)**shift)
    return fmpq(mantissa, fmpz(10)**-shift)


def _digits(where: str, digits: int, *parts: str) -> None:
    """The text's own limit: ``digits`` digits in a numerator, a denominator or a
    mantissa (its characters were bounded before the match, sign and exponent included)."""
    if (longest := max(map(len, parts))) > digits:
        raise InputError(f"{where}: number too large ({longest} digits, limit digits={digits})")


def _integer(digits: str) -> fmpz:
    """ASCII digits with an optional sign, of any length (Python's int()
    refuses more than 4300 digits)."""
    body = digits.lstrip("+-")
    return -fmpz(body) if digits.startswith("-") else fmpz(body)


def parse_vector(value: object, d: int, where: str, digits: int = MAX_DIGITS) -> Vec:
    """A token: a list of exactly ``d`` numbers."""
    if not isinstance(value, list):
        raise InputError(f"{where}: expected a list of {d} numbers")
    if len(value) != d:
        raise InputError(f"{where}: expected {d} numbers, got {len(value)}")
    return tuple([parse_number(x, where, digits, i) for i, x in enumerate(value)])


def fmt(x: fmpq) -> str:
    """Canonical text of a rational: "5", "-7/12"."""
    return str(x)


def show(x: object, digits: int = 200) -> str:
    """A value for a message: exact when short, else its leading digits and
    size, so a report stays readable however large the numbers are."""
    text = str(x)
    if len(text) <= digits:
        return text
    return f"{text[:digits // 2]}…({len(text)} characters)"


def key(v: Vec) -> tuple:
    """A dict key for a vector: its numerators, then its denominators (an fmpq
    is always in lowest terms, so equal vectors give equal keys). Hashing fmpq
    itself goes through fractions.Fraction, and str() is slower still."""
    return tuple([x.p for x in v] + [x.q for x in v])


def each_once(values) -> Iterable:
    """The values, each object once (by id; ``values`` holds them alive): a cluster's tokens share
    the replay's tuple and a parse's equal numbers one object, so work on each is done once."""
    return {id(v): v for v in values}.values()


def dot(a: Vec, b: Vec) -> fmpq:
    total = fmpq(0)
    for x, y in zip(a, b):
        total += x * y
    return total


def add(a: Vec, b: Vec) -> Vec:
    return tuple(x + y if y else x for x, y in zip(a, b))  # adding 0 keeps x itself: cheaper, and equal


def sub(a: Vec, b: Vec) -> Vec:
    return tuple(x - y for x, y in zip(a, b))


def scale(c: fmpq, a: Vec) -> Vec:
    return a if c == 1 else tuple(c * x for x in a)


def unit(d: int, k: int) -> Vec:
    """e_k in R^d (0-based k)."""
    return tuple(fmpq(1 if i == k else 0) for i in range(d))


def zero(d: int) -> Vec:
    return tuple(fmpq(0) for _ in range(d))

