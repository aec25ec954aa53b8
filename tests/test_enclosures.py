"""Enclosures turn arb balls into rationals outward, within a bounded range:
exp of huge arguments must neither lie nor exhaust memory."""
from __future__ import annotations

import json
import subprocess
import sys

from flint import arb, fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

from tfcert.verify.enclose import LIMIT, bounds, dyadic
from tfcert.verify.numbers import parse_number


@settings(max_examples=200, deadline=None)
@given(st.integers(-2**50, 2**50), st.integers(-3 * LIMIT, LIMIT // 2))
def test_dyadic_rounds_outward(man, exp):
    """man·2^exp: exact within range, else the nearest multiple of 2^-LIMIT on each side."""
    x = arb(man) * arb(2) ** exp if exp >= 0 else arb(man) / arb(2) ** (-exp)
    assert x.is_exact()
    value = fmpq(man) * fmpq(2) ** exp if exp >= 0 else fmpq(man, 2 ** (-exp))
    lo, hi = dyadic(x, False), dyadic(x, True)
    assert lo <= value <= hi
    assert hi - lo <= fmpq(1, 2 ** LIMIT)
    if exp >= -LIMIT:
        assert lo == value == hi


def test_exp_of_a_huge_negative_argument_is_a_tiny_enclosure():
    lo, hi = bounds((-arb(10) ** 40).exp())
    assert lo <= 0 < hi <= fmpq(1, 2 ** (LIMIT - 1))


def test_softmax_on_huge_tokens_stays_in_memory(tmp_path):
    """Tokens near 10^40 make collapse gaps near 10^80: τ* must come out without
    forming 2^(10^80)-sized rationals (run under a 2 GiB address-space limit)."""
    ds = {"format": "tfcert.dataset/1", "d": 2, "pairs": [
        {"input": [["1e40", "0"], ["1e40", "1e-30"], ["0", "0"]], "output": [["1e20", "-1e20"], ["0", "7/3"]]},
        {"input": [["1e40", "0"], ["0", "0"]], "output": [["1e20", "-1e20"]]},
        {"input": [["1e40", "1e-30"], ["0", "0"], ["-1e40", "-1e-30"]], "output": [["5", "5"], ["6", "6"], ["7", "7"]]}]}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(ds))
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
            "from tfcert.main import main; "
            f"sys.exit(main(['construct', {str(path)!r}, '-o', {str(tmp_path / 'out')!r}, '--attention', 'softmax']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    cert = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert parse_number(cert["tau_star"], "tau_star") > 0


small = st.fractions(-20, 20, max_denominator=8)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 4).flatmap(lambda d: st.tuples(
    st.lists(st.tuples(*[small] * d), min_size=2, max_size=4, unique=True),
    st.tuples(*[small] * d), st.fractions(0, 1), st.integers(0, 2))))
def test_projection_range_contains_every_point_of_a_path(case):
    """The replay skips an enclosure whose projection range misses a unit
    group's support, so the range must contain u·x for every x on the path."""
    from tfcert.verify.enclose import Path, axis_of, projection_range
    from tfcert.verify.numbers import dot
    raw_vertices, raw_u, s, edge = case
    vertices = tuple(tuple(fmpq(v.numerator, v.denominator) for v in p) for p in raw_vertices)
    u = tuple(fmpq(v.numerator, v.denominator) for v in raw_u)
    a, b = vertices[edge % (len(vertices) - 1)], vertices[edge % (len(vertices) - 1) + 1]
    t = fmpq(s.numerator, s.denominator)
    x = tuple(p + t * (q - p) for p, q in zip(a, b))
    lo, hi = projection_range(Path(vertices), u, axis_of(u))
    assert lo <= dot(u, x) <= hi
