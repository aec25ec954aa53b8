"""Exact numbers as the file formats define them (DESIGN.md §6).

A number is a JSON integer, a bare JSON float (read as the exact decimal
written, so 0.1 is 1/10), or a string holding an integer, a decimal
("-1.25", "3e-4") or a fraction ("7/12"). Everything becomes a python-flint
``fmpq``; nothing ever passes through a binary float.
"""
from __future__ import annotations

import re

from flint import fmpq

from tfcert.verify.errors import InputError

Vec = tuple  # tuple[fmpq, ...]; a token of R^d

MAX_DIGITS = 4000  # longest numerator/denominator/mantissa accepted
MAX_EXPONENT = 4000  # largest |e| accepted in "xe±e"

# re.ASCII: \d must not match other scripts' digits ("١", "５"), which int() would accept
_FRACTION = re.compile(r"([+-]?\d+)/(\d+)", re.ASCII)
_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?", re.ASCII)


_JSON_NAMES = {type(None): "null", dict: "an object", list: "a list"}  # as the file says it


class FloatLiteral(str):
    """The source text of a bare JSON float, kept so it is read exactly."""


def parse_number(value: object, where: str) -> fmpq:
    """Turn one JSON value into an exact rational, or raise InputError naming ``where``."""
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a number, got a boolean")
    if isinstance(value, int):
        if abs(value).bit_length() > MAX_DIGITS * 4:
            raise InputError(f"{where}: number too large")
        return fmpq(value)
    if not isinstance(value, str):
        raise InputError(f"{where}: expected a number, got {_JSON_NAMES.get(type(value), type(value).__name__)}")
    text = value.strip()
    if not text:
        raise InputError(f"{where}: empty string is not a number")
    if len(text) > MAX_DIGITS + 16:
        raise InputError(f"{where}: number too large ({len(text)} characters)")
    match = _FRACTION.fullmatch(text)
    if match:
        den = int(match.group(2))
        if den == 0:
            raise InputError(f"{where}: zero denominator in {text!r}")
        return fmpq(int(match.group(1)), den)
    match = _DECIMAL.fullmatch(text)
    if not match or not (match.group(2) or match.group(3)):
        raise InputError(f"{where}: malformed number {text!r}")
    sign, whole, frac, exp = match.groups()
    frac = frac or ""
    exponent = int(exp) if exp else 0
    if abs(exponent) > MAX_EXPONENT:
        raise InputError(f"{where}: exponent out of range in {text!r}")
    mantissa = int((whole or "0") + frac) * (-1 if sign == "-" else 1)
    shift = exponent - len(frac)
    if shift >= 0:
        return fmpq(mantissa * 10**shift)
    return fmpq(mantissa, 10**-shift)


def parse_vector(value: object, d: int, where: str) -> Vec:
    """A token: a list of exactly ``d`` numbers."""
    if not isinstance(value, list):
        raise InputError(f"{where}: expected a list of {d} numbers")
    if len(value) != d:
        raise InputError(f"{where}: expected {d} numbers, got {len(value)}")
    return tuple(parse_number(x, f"{where}[{i}]") for i, x in enumerate(value))


def fmt(x: fmpq) -> str:
    """Canonical text of a rational: "5", "-7/12"."""
    return str(x)


def dot(a: Vec, b: Vec) -> fmpq:
    total = fmpq(0)
    for x, y in zip(a, b):
        total += x * y
    return total


def add(a: Vec, b: Vec) -> Vec:
    return tuple(x + y for x, y in zip(a, b))


def sub(a: Vec, b: Vec) -> Vec:
    return tuple(x - y for x, y in zip(a, b))


def scale(c: fmpq, a: Vec) -> Vec:
    return tuple(c * x for x in a)


def unit(d: int, k: int) -> Vec:
    """e_k in R^d (0-based k)."""
    return tuple(fmpq(1 if i == k else 0) for i in range(d))


def zero(d: int) -> Vec:
    return tuple(fmpq(0) for _ in range(d))


def norm1(a: Vec) -> fmpq:
    total = fmpq(0)
    for x in a:
        total += abs(x)
    return total
