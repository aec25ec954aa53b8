"""Every number in docs/experiments.md's measured sections (quick modes, results, the
regularization run) comes from a committed file under docs/results/: it appears there, or a
number there rounds to it in the same notation. A number with no data behind it fails."""
from __future__ import annotations

import re

import pytest
from conftest import REPO

DOC = REPO / "docs" / "experiments.md"
RESULTS = REPO / "docs" / "results"
SECTIONS = ("## Quick modes", "## Results", "## The regularization diagnostic")
NUMBER = re.compile(r"(?<![\w.^/])\d[\d,]*(?:\.\d+)?(?:e[-+−]?\d+)?(?![\w.]*[a-df-zA-Z_])")


def _sections(text: str) -> str:
    """The measured sections, without code (commands and identifiers are not measurements)."""
    parts = re.split(r"(?m)^(?=## )", text)
    kept = "\n".join(p for p in parts if p.startswith(SECTIONS))
    kept = re.sub(r"```.*?```", " ", kept, flags=re.S)
    return re.sub(r"`[^`]*`", " ", kept)


def numbers(text: str) -> list[str]:
    """Number tokens, thousands separators and the minus sign's spelling dropped."""
    return [t.replace(",", "").replace("−", "-").rstrip(",") for t in NUMBER.findall(text.replace("\u2212", "-"))]


def _format_like(token: str, value: float) -> str:
    """``value`` in ``token``'s notation (e.g. 6.0e-5, 0.954, 333)."""
    if "e" in token:
        mantissa, exponent = token.split("e")
        digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
        m, e = f"{value:.{digits}e}".split("e")
        return f"{m}e{int(e)}"
    digits = len(token.split(".")[1]) if "." in token else 0
    return f"{value:.{digits}f}"


def _canonical(token: str) -> str:
    if "e" in token:
        m, e = token.split("e")
        return f"{m}e{int(e)}"
    return token


def backed(token: str, committed: set[str], values: list[float]) -> bool:
    if _canonical(token) in committed:
        return True
    return any(_format_like(token, v) == _canonical(token) for v in values)


def _committed() -> tuple[set[str], list[float]]:
    tokens = set()
    for path in sorted(RESULTS.rglob("*")):
        if path.suffix in (".json", ".jsonl", ".txt"):
            tokens.update(_canonical(t) for t in numbers(path.read_text()))
    values = sorted({float(t) for t in tokens})
    return tokens, values


def test_the_checker_catches_a_number_without_data():
    committed, values = {"2.7e-3", "0.954", "576", "333.4"}, [2.7e-3, 0.954, 576.0, 333.4]
    assert backed("2.7e-3", committed, values) and backed("0.95", committed, values)
    assert backed("333", committed, values) and backed("3.3e2", committed, values)
    assert not backed("1128", committed, values) and not backed("6.0e-5", committed, values)
    assert numbers(_sections("## Results\nmodels 1,128 at 8.7e-3 vs `6489364` −0.65")) == ["1128", "8.7e-3", "0.65"]


def test_every_measured_number_in_the_docs_is_in_a_results_file():
    committed, values = _committed()
    text = _sections(DOC.read_text())
    assert "## Results" not in text or text  # the sections exist
    missing = sorted({t for t in numbers(text) if not backed(t, committed, values)}, key=float)
    assert not missing, f"numbers in docs/experiments.md with no committed data behind them: {missing}"


@pytest.mark.parametrize("section", SECTIONS)
def test_sections_exist(section):
    assert any(line.startswith(section) for line in DOC.read_text().splitlines())
