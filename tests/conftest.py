"""Shared test helpers: hypothesis strategies for datasets of every shape the
assumptions allow, and small builders."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parent.parent

pytest_plugins = ["pytester"]  # the pytest plugin's own tests run pytest in-process


@pytest.fixture(autouse=True)
def _checker_limits():
    """The checker's limits as each test found them: ``main([... "--limit", ...])`` sets the
    process-wide LIMITS (a command runs once per process), and a test calling the library
    afterwards must not inherit a test's bits=8."""
    from dataclasses import fields

    from tfcert.verify.numbers import LIMITS

    saved = {f.name: getattr(LIMITS, f.name) for f in fields(LIMITS)}
    yield
    for name, value in saved.items():
        setattr(LIMITS, name, value)


def dataset_json(d: int, pairs: list[tuple[list, list]]) -> dict:
    return {"format": "tfcert.dataset/1", "d": d,
            "pairs": [{"input": [[str(v) for v in t] for t in X], "output": [[str(v) for v in t] for t in Y]}
                      for X, Y in pairs]}


@st.composite
def datasets(draw, max_d: int = 24, max_n_seq: int = 30, max_len: int = 20, max_tokens: int = 160):
    """Random valid datasets, biased towards the hard cases: shared tokens,
    subsets of other sequences, equal means with shared tokens, targets equal
    to inputs, repeated targets, m = n and m = 1."""
    d = draw(st.integers(2, max_d))
    n_seq = draw(st.integers(1, max_n_seq))
    cap = max(1, min(max_len, max_tokens // n_seq))
    small = st.integers(-3, 3)
    pool = [tuple(draw(small) for _ in range(d)) for _ in range(draw(st.integers(1, 6)))]
    pairs: list[tuple[list, list]] = []
    seen: set[frozenset] = set()
    for _ in range(n_seq):
        how = draw(st.sampled_from(["fresh", "pool", "subset", "same-mean", "superset"])) if pairs else "fresh"
        base = draw(st.sampled_from(pairs))[0] if pairs else []
        n = draw(st.integers(1, cap))
        if how == "subset" and len(base) > 1:
            X = base[:draw(st.integers(1, len(base) - 1))]
        elif how == "same-mean" and len(base) >= 2:
            # move two tokens by ±v: the mean is unchanged and the other tokens are shared
            v = tuple(draw(st.integers(1, 2)) for _ in range(d))
            a, b = base[0], base[1]
            X = [tuple(x + y for x, y in zip(a, v)), tuple(x - y for x, y in zip(b, v))] + base[2:]
        elif how == "superset" and len(base) < cap:
            X = base + [tuple(draw(st.integers(-9, 9)) for _ in range(d))]
        elif how == "pool":
            X = list(pool[:n]) + [tuple(draw(small) for _ in range(d)) for _ in range(max(0, n - len(pool)))]
        else:
            X = [tuple(draw(st.integers(-9, 9)) for _ in range(d)) for _ in range(n)]
        X = list(dict.fromkeys(X))
        if frozenset(X) in seen:
            continue
        seen.add(frozenset(X))
        m = draw(st.sampled_from([1, len(X), draw(st.integers(1, len(X)))]))
        target = draw(st.sampled_from(["random", "inputs", "repeat"]))
        if target == "inputs":
            Y = X[:m]
        elif target == "repeat" and pairs:
            Y = list(draw(st.sampled_from(pairs))[1])[:m]
        else:
            Y = [tuple(draw(st.fractions(-5, 5, max_denominator=4)) for _ in range(d)) for _ in range(m)]
        Y = list(dict.fromkeys(Y))[:len(X)]
        pairs.append((X, Y))
    return dataset_json(d, pairs)


def run(argv, capsys) -> tuple[int, str, str]:
    """``tfcert ARGV`` in-process: its exit code, stdout and stderr (earlier output dropped)."""
    from tfcert.cli.main import main

    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def write_json(path: Path, value: dict) -> Path:
    path.write_text(json.dumps(value))
    return path


@pytest.fixture
def demo_dataset() -> Path:
    return REPO / "tfcert" / "examples" / "demo.json"
