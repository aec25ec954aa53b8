"""Enclosures turn arb balls into rationals outward, within a bounded range:
exp of huge arguments must neither lie nor exhaust memory."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
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


@pytest.mark.slow
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
            "from tfcert.cli.main import main; "
            f"sys.exit(main(['construct', {str(path)!r}, '-o', {str(tmp_path / 'out')!r}, '--attention', 'softmax']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    cert = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert parse_number(cert["tau_star"], "tau_star") > 0


small = st.fractions(-20, 20, max_denominator=8)


@pytest.mark.slow
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


def test_a_path_past_max_vertices_is_its_bounding_box():
    """A zigzag of MAX_VERTICES + 1 vertices becomes a box holding every vertex (and so the path,
    which lies in their hull); one of MAX_VERTICES vertices stays a path."""
    from tfcert.verify.enclose import MAX_VERTICES, Box, Path, path

    zigzag = [(fmpq(k, 3), fmpq((-1) ** k * 10 ** 40 + k, 7)) for k in range(MAX_VERTICES + 1)]
    assert isinstance(path(zigzag[:-1]), Path)
    enclosure = path(zigzag)
    assert isinstance(enclosure, Box)
    assert all(ball.contains(arb(v)) for vertex in zigzag for ball, v in zip(enclosure.balls, vertex))


def test_softmax_paths_stay_short_when_a_target_is_huge(tmp_path):
    """Ten collinear tokens and a target at (0, 1e300): the collapse's enclosure at the model's
    temperature (arb at 128 bits around coordinates near 2^1000) is wider than every snap window,
    and its path folded through the snaps, tripling its vertices at each (39 358 after ten). Construction replayed it for
    float bounds it then dropped; now that replay stops once no bound is left, and any replay
    encloses such a path by its box."""
    from tfcert.construct.bundle import build
    from tfcert.verify.enclose import MAX_VERTICES, Path
    from tfcert.verify.evaluate import Replay

    pairs = [{"input": [[str(k), "0"] for k in range(10)],
              "output": [[str(k), "0"] for k in range(9)] + [["0", "1e300"]]}]
    (tmp_path / "ds.json").write_text(json.dumps({"format": "tfcert.dataset/1", "d": 2, "pairs": pairs}))
    bundle = build(tmp_path / "ds.json", "softmax")
    replay = Replay(bundle.construction.model, [p.input for p in bundle.dataset.pairs])
    longest = max((len(x.vertices) for step in replay.steps() for x in step.flat_after if isinstance(x, Path)),
                  default=0)
    assert longest <= MAX_VERTICES
