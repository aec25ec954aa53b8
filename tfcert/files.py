"""Where a command's files come from: bundle folders, explicit paths, ``-``
for stdin, and a clear message when a file sits in the wrong slot (a
dataset given as the model)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from tfcert.errors import InputError
from tfcert.verify.formats import CERTIFICATE_FORMAT, DATASET_FORMAT, MODEL_FORMAT, Document, load_document, \
    parse_document

BUNDLE_FILES = {"model": "model.json", "dataset": "dataset.json", "certificate": "certificate.json"}
FORMATS = {"dataset": DATASET_FORMAT, "model": MODEL_FORMAT, "certificate": CERTIFICATE_FORMAT}
STDIN = "-"


def find_bundles(root: str | Path) -> list[Path]:
    """Every bundle folder at or below ``root``, sorted: each folder holding a
    certificate.json, through symlinked folders too (each real folder once),
    hidden folders (.git, .venv) skipped. A certificate.json without its
    model.json or dataset.json is an InputError: a gate must not pass over it."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: not a folder")
    found, seen = [], set()
    for folder, subfolders, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # reached again through a symlink
            subfolders[:] = []
            continue
        seen.add(real)
        subfolders[:] = [name for name in subfolders if not name.startswith(".")]
        if BUNDLE_FILES["certificate"] in files:
            missing = [name for name in BUNDLE_FILES.values() if not (Path(folder) / name).is_file()]
            if missing:
                raise InputError(f"{folder}: holds certificate.json but no {' or '.join(missing)}: "
                                 f"an incomplete bundle")
            found.append(Path(folder))
    return sorted(found)


def bundle_file(bundle: str | Path, slot: str) -> Path:
    """The file for ``slot`` in a bundle folder, or an error naming what is missing."""
    folder = Path(bundle)
    if not folder.is_dir():
        raise InputError(f"{bundle}: not a bundle folder (expected a folder holding "
                         f"{', '.join(BUNDLE_FILES.values())})")
    path = folder / BUNDLE_FILES[slot]
    if not path.is_file():
        raise InputError(f"{bundle}: not a bundle folder: {BUNDLE_FILES[slot]} is missing")
    return path


def resolve(bundle: str | None, explicit: dict[str, str | None]) -> dict[str, str]:
    """Paths for each slot: an explicit ``--slot`` wins over the bundle folder's file."""
    out = {}
    for slot, path in explicit.items():
        if path is None and bundle is None:
            raise InputError(f"--{slot}: required (or give a bundle folder)")
        out[slot] = path if path is not None else str(bundle_file(bundle, slot))
    stdin = [slot for slot, path in out.items() if path == STDIN]
    if len(stdin) > 1:
        raise InputError(f"--{stdin[1]}: only one file can come from stdin ('-'); --{stdin[0]} already does")
    return out


def describe(value: object) -> str | None:
    """Which kind of tfcert file a JSON value is, from its format tag."""
    if isinstance(value, dict):
        for slot, tag in FORMATS.items():
            if value.get("format") == tag:
                return slot
    return None


def load(path: str | Path, slot: str) -> Document:
    """Read the file for ``slot`` (``-``: stdin); a file of another kind is
    refused by name before any field is read."""
    if str(path) == STDIN:
        doc = parse_document("<stdin>", sys.stdin.buffer.read())
    else:
        doc = load_document(path)
    if isinstance(doc.value, dict) and "format" in doc.value and doc.value["format"] is None:
        raise InputError(f"{doc.path}: $.format: expected {FORMATS[slot]!r}, got null")
    kind = describe(doc.value)
    if kind is not None and kind != slot:
        raise InputError(f"{doc.path}: $.format: this is a {kind} ({FORMATS[kind]}), expected a {slot} ({FORMATS[slot]})")
    return doc
