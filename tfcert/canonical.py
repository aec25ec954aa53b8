"""The canonical bytes of a JSON value: exactly what ``json.dumps(value,
indent=1, ensure_ascii=False)`` writes, and a newline, so that the same
value always gives the same file.

Why not json.dumps itself: with an indent, the standard library takes its
pure-Python encoder, which yields every bracket and comma through nested
generators (0.6 s for a certificate of 9 MB). Most of a bundle is short
lists of strings and integers (rationals, token references), which this
writes with one join; everything else goes the standard library's way,
item by item, so the bytes are the same (tests/test_canonical.py checks it
on random values)."""
from __future__ import annotations

import json
from json.encoder import encode_basestring

_ATOMS = {str: encode_basestring, int: int.__repr__}  # exact types: a bool is an int, and writes as true/false


def dumps(value) -> bytes:
    """The canonical bytes of ``value``."""
    out: list[str] = []
    _write(value, "\n", out)
    return ("".join(out) + "\n").encode("utf-8")


def _write(value, pad: str, out: list[str]) -> None:
    """Append ``value``'s text, nested at ``pad`` (a newline and its indent)."""
    if isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = pad + " "
        kinds = set(map(type, value))
        if kinds <= _ATOMS.keys():
            texts = map(_ATOMS[kinds.pop()], value) if len(kinds) == 1 else (_ATOMS[type(v)](v) for v in value)
            out.append("[" + inner + ("," + inner).join(texts) + pad + "]")
            return
        out.append("[")
        for n, item in enumerate(value):
            out.append("," + inner if n else inner)
            _write(item, inner, out)
        out.append(pad + "]")
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = pad + " "
        out.append("{")
        for n, (name, item) in enumerate(value.items()):
            out.append(("," + inner if n else inner) + _key(name) + ": ")
            _write(item, inner, out)
        out.append(pad + "}")
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def _key(name) -> str:
    """A key as json writes it: a string as it is; a number, true, false or null as its text."""
    if isinstance(name, str):
        return encode_basestring(name)
    if name is None or isinstance(name, (bool, int, float)):
        return encode_basestring(json.dumps(name))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(name).__name__}")
