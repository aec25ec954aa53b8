"""The JSON Schemas shipped with tfcert: one per file format (dataset,
model, certificate) and one per ``--json`` output. They describe shape; the
readers check more (d numbers per token, claims that recompute), so a file
that validates can still be refused, never the other way round.
"""
from __future__ import annotations

import json
from importlib import resources

from tfcert.errors import InputError

SUFFIX = ".schema.json"


def names() -> list[str]:
    """Every schema's name, e.g. ``dataset`` or ``verify-output``."""
    folder = resources.files("tfcert") / "schemas"
    return sorted(p.name[:-len(SUFFIX)] for p in folder.iterdir() if p.name.endswith(SUFFIX))


def load_schema(name: str) -> dict:
    if name not in names():
        raise InputError(f"schema {name!r}: unknown; one of {', '.join(names())}")
    return json.loads((resources.files("tfcert") / "schemas" / f"{name}{SUFFIX}").read_text(encoding="utf-8"))
