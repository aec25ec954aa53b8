"""Build the three measurement tables of tests/data/tables/ (tfcert datasets) from the CSV files
that scikit-learn ships: iris, wine and digits. The survey (tests/float_survey.py --tables)
and the tests read the committed JSON; only this script needs scikit-learn.

Run: ``python tests/make_tables.py [--out DIR]`` (scikit-learn installed; the JSON is
byte-identical for the same scikit-learn data files).

Every value is the CSV's own text (no float round trip), so the tables are exact. Rows are put
in a seeded order (Python's ``random.Random(0).shuffle``) and cut into sequences of ``CHUNK``
consecutive rows (a row repeated within a sequence is kept once: tokens of a sequence are
distinct). A sequence's targets are the centroids of the classes among its rows, in class
order — each class's exact mean over the table's rows of that class, a decimal where it
terminates, else a reduced fraction ``p/q``."""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import random
import sys
from fractions import Fraction
from importlib import resources
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "tables"
CHUNK = 10
DIGITS_PER_CLASS = 25  # the first 25 rows of each digit: 250 tokens, centroids k/25 (exact decimals)


def _rows(name: str) -> list[list[str]]:
    """The CSV's data rows as text (its first line is scikit-learn's header: counts and names)."""
    raw = resources.files("sklearn.datasets.data").joinpath(name).read_bytes()
    text = (gzip.decompress(raw) if name.endswith(".gz") else raw).decode()
    rows = list(csv.reader(io.StringIO(text)))
    return rows if name.endswith(".gz") else rows[1:]


def _number(q: Fraction) -> str:
    """q exactly: a decimal if its denominator is 2^a·5^b, else p/q."""
    rest, places = q.denominator, 0
    for prime in (2, 5):
        count = 0
        while rest % prime == 0:
            rest, count = rest // prime, count + 1
        places = max(places, count)
    if rest != 1:
        return f"{q.numerator}/{q.denominator}"
    scaled = str(abs(q.numerator) * 10 ** places // q.denominator).rjust(places + 1, "0")
    text = scaled if places == 0 else f"{scaled[:-places]}.{scaled[-places:]}"
    return ("-" if q < 0 else "") + text


def _canonical(value: str) -> str:
    """A CSV field as the shortest exact decimal ("3.0" → "3", "0.20" → "0.2")."""
    return _number(Fraction(value))


def table(rows: list[list[str]], labels: list[int]) -> dict:
    """The dataset document: rows (feature texts) with their class labels, shuffled and chunked."""
    d = len(rows[0])
    centroid = {}
    for c in sorted(set(labels)):
        members = [r for r, y in zip(rows, labels) if y == c]
        centroid[c] = [_number(sum(Fraction(r[k]) for r in members) / len(members)) for k in range(d)]
    order = list(range(len(rows)))
    random.Random(0).shuffle(order)
    pairs = []
    for start in range(0, len(order), CHUNK):
        chunk = order[start:start + CHUNK]
        tokens = list(dict.fromkeys(tuple(_canonical(v) for v in rows[i]) for i in chunk))
        pairs.append({"input": [list(t) for t in tokens],
                      "output": [centroid[c] for c in sorted({labels[i] for i in chunk})]})
    return {"format": "tfcert.dataset/1", "d": d, "pairs": pairs}


def iris() -> dict:
    rows = _rows("iris.csv")
    return table([r[:4] for r in rows], [int(r[4]) for r in rows])


def wine() -> dict:
    rows = _rows("wine_data.csv")
    return table([r[:13] for r in rows], [int(r[13]) for r in rows])


def digits() -> dict:
    rows = _rows("digits.csv.gz")
    kept, seen = [], {}
    for r in rows:
        label = int(float(r[64]))
        if seen.get(label, 0) < DIGITS_PER_CLASS:
            seen[label] = seen.get(label, 0) + 1
            kept.append(r)
    return table([r[:64] for r in kept], [int(float(r[64])) for r in kept])


TABLES = {"iris": iris, "wine": wine, "digits": digits}


def _check(name: str, doc: dict) -> None:
    """The text agrees with scikit-learn's own loader (the same CSV, read as float64)."""
    import numpy as np
    from sklearn import datasets

    loaded = {"iris": datasets.load_iris, "wine": datasets.load_wine, "digits": datasets.load_digits}[name]()
    known = {tuple(row) for row in np.asarray(loaded.data, dtype=np.float64).tolist()}
    for pair in doc["pairs"]:
        for token in pair["input"]:
            assert tuple(float(Fraction(v)) for v in token) in known, (name, token)


def dumps(doc: dict) -> str:
    """One pair per line: small diffs, readable."""
    pairs = ",\n  ".join(json.dumps(p, separators=(",", ":")) for p in doc["pairs"])
    return f'{{"format": "{doc["format"]}", "d": {doc["d"]},\n "pairs": [\n  {pairs}\n ]}}\n'


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, make in TABLES.items():
        doc = make()
        _check(name, doc)
        (args.out / f"{name}.json").write_text(dumps(doc))
        tokens = sum(len(p["input"]) for p in doc["pairs"])
        print(f"{name}: d={doc['d']} sequences={len(doc['pairs'])} tokens={tokens} "
              f"targets={sum(len(p['output']) for p in doc['pairs'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
