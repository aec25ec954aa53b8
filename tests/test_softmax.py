"""Softmax: the certificate's τ* and snap claims, their corruption, audit,
tightness and the CLI around them."""
from __future__ import annotations

import hashlib
import json
from fractions import Fraction

import pytest
from flint import fmpq

from tfcert.audit.audit import audit, certified_at, largest_certified_temperature
from tfcert.construct.bundle import build
from tfcert.cli.demo import example_path
from tfcert.cli.main import main
from tfcert.verify.check import check_certificate
from tfcert.verify.enclose import Path
from tfcert.verify.layers import apply_ff_token
from tfcert.canonical import dumps
from tfcert.verify.formats import parse_document, read_model

Q = fmpq


@pytest.fixture(scope="module")
def bundle():
    return build(example_path(), "softmax")


def files(bundle):
    return {k: json.loads(v) for k, v in bundle.files.items()}


def run_verify(bundle, model=None, cert=None):
    """Verify (possibly corrupted) model / certificate values; the certificate's
    model hash follows the model so only the claims are under test."""
    model_raw = bundle.files["model.json"] if model is None else dumps(model)
    cert = json.loads(bundle.files["certificate.json"]) if cert is None else cert
    cert["model_sha256"] = hashlib.sha256(model_raw).hexdigest()
    return check_certificate(parse_document("model.json", model_raw),
                             parse_document("dataset.json", bundle.files["dataset.json"]),
                             parse_document("certificate.json", dumps(cert)))


def failed(report) -> set[str]:
    return {r.kind for r in report.results if not r.ok}


def claims(cert, kind):
    return [c for p in cert["phases"] for c in p["claims"] if c["kind"] == kind]


def test_certificate_states_tau_star_and_verifies(bundle):
    cert = files(bundle)["certificate.json"]
    model = files(bundle)["model.json"]
    (claim,) = claims(cert, "tau_star")
    assert cert["tau_star"] == claim["tau_star"] == model["temperature"]
    assert Fraction(claim["closed_form"]) <= Fraction(claim["tau_star"]) + Fraction(claim["step"])
    assert Fraction(claim["noise_bound"]) <= Fraction(claim["radius"])
    assert len(claims(cert, "snap")) == bundle.dataset.total_outputs
    assert not claims(cert, "hat") or all(c["block"] <= claim["block"] for c in claims(cert, "hat"))
    assert bundle.report.ok and any(r.kind == "tau_star" for r in bundle.report.results)


def test_size_against_theorem_1_8(bundle):
    (size,) = claims(files(bundle)["certificate.json"], "size")
    n, sm = len(bundle.dataset.pairs), bundle.dataset.total_outputs
    assert size["theorem"] == "1.8" and size["within"]
    assert size["blocks"] <= 2 * sm + 3 * n and size["width"] <= 4


def test_deterministic(bundle):
    again = build(example_path(), "softmax")
    assert again.files == bundle.files


def test_tau_star_raised_past_the_true_bound_fails(bundle):
    model, cert = files(bundle)["model.json"], files(bundle)["certificate.json"]
    (claim,) = claims(cert, "tau_star")
    raised = str(Fraction(claim["tau_star"]) + 2 * Fraction(claim["step"]))
    model["temperature"] = cert["tau_star"] = claim["tau_star"] = raised
    report = run_verify(bundle, model, cert)
    assert not report.ok and "tau_star" in failed(report)


def test_model_temperature_just_below_tau_star_still_needs_matching_claim(bundle):
    model = files(bundle)["model.json"]
    model["temperature"] = str(Fraction(model["temperature"]) - Fraction(1, 2 ** 60))
    # the float claim's bound was proven for the stated temperature too, so it may fail as well
    assert "tau_star" in failed(run_verify(bundle, model)) <= {"tau_star", "float"}


@pytest.mark.parametrize("field, change", [
    ("tau_star", lambda v: str(Fraction(v) + Fraction(1, 2 ** 60))),
    ("radius", lambda v: "0"),
    ("noise_bound", lambda v: "0"),
    ("step", lambda v: str(Fraction(v) * 2 ** 17)),
    ("closed_form", lambda v: str(Fraction(v) * (1 + Fraction(1, 10 ** 6)))),
])
def test_each_tau_star_field_corrupted_fails(bundle, field, change):
    cert = files(bundle)["certificate.json"]
    (claim,) = claims(cert, "tau_star")
    claim[field] = change(claim[field])
    assert "tau_star" in failed(run_verify(bundle, cert=cert))


def test_noise_bound_below_recomputed_fails(bundle):
    cert = files(bundle)["certificate.json"]
    (claim,) = claims(cert, "tau_star")
    claim["noise_bound"] = str(Fraction(claim["noise_bound"]) * (1 - Fraction(1, 10 ** 6)))
    assert failed(run_verify(bundle, cert=cert)) == {"tau_star"}


def test_top_level_tau_star_must_match(bundle):
    cert = files(bundle)["certificate.json"]
    cert["tau_star"] = str(Fraction(cert["tau_star"]) + Fraction(1, 2 ** 60))
    assert failed(run_verify(bundle, cert=cert)) == {"tau_star"}
    del cert["tau_star"]
    assert "tau_star" in failed(run_verify(bundle, cert=cert))


TINY = Fraction(1, 2 ** 70)


@pytest.mark.parametrize("field, change", [
    ("center", lambda v: str(Fraction(v) + TINY)),
    ("radius", lambda v: str(Fraction(v) + TINY)),
    ("radius", lambda v: str(Fraction(v) - TINY)),
    ("reach", lambda v: str(Fraction(v) - TINY)),
    ("to", lambda v: [str(Fraction(v[0]) + TINY)] + v[1:]),
    ("moves", lambda v: v[1:]),
])
def test_each_snap_field_corrupted_fails(bundle, field, change):
    cert = files(bundle)["certificate.json"]
    snap = claims(cert, "snap")[0]
    snap[field] = change(snap[field])
    report = run_verify(bundle, cert=cert)
    # tau_star's radius (the radius left around the codes, r − 2^-9) stays within a snap radius
    # smaller by 2^-70, so the snap claim alone fails
    assert failed(report) == {"snap"}
    bad = next(r for r in report.results if not r.ok and r.kind == "snap")
    assert bad.block == snap["block"] and bad.failures


def test_snap_weight_corrupted_is_caught_by_z3(bundle):
    model = files(bundle)["model.json"]
    snap = claims(files(bundle)["certificate.json"], "snap")[0]
    W = model["blocks"][snap["block"]]["ff"]["W"]
    W[1][2] = str(Fraction(W[1][2]) + TINY)  # the plateau no longer lands on the target
    report = run_verify(bundle, model)
    assert "snap" in failed(report)
    assert any("z3" in f for r in report.results for f in r.failures)


def test_path_through_a_snap_is_exact():
    bundle = build(example_path(), "softmax")
    model = bundle.construction.model
    cert = files(bundle)["certificate.json"]
    snap = claims(cert, "snap")[0]
    ff = model.blocks[snap["block"]].ff
    c, r, R = (Q(*Fraction(snap[k]).as_integer_ratio()) for k in ("center", "radius", "reach"))
    to = tuple(Q(*Fraction(v).as_integer_ratio()) for v in snap["to"])
    on = lambda t: (Q(0), t)  # noqa: E731 — the snap's axis is coordinate 2
    inside = Path((on(c - r), on(c + r / 2)))
    assert apply_ff_token(ff, inside) == to
    straddle = apply_ff_token(ff, Path((on(c - R), on(c))))
    assert isinstance(straddle, Path) and straddle.vertices[0] == on(c - R) and straddle.vertices[-1] == to
    outside = Path((on(c + R), on(c + R + 1)))
    assert apply_ff_token(ff, outside) == outside


def test_audit_softmax_and_tightness(bundle):
    model = read_model(parse_document("model.json", bundle.files["model.json"]))
    report = audit(model, bundle.dataset)
    assert report.interpolates and all(s.width == 0 for s in report.sequences)
    tau_emp = report.largest_certified_temperature
    assert tau_emp >= model.temperature and model.temperature / tau_emp >= Q(1, 2)
    assert certified_at(model, bundle.dataset, tau_emp)
    assert not certified_at(model, bundle.dataset, 2 * tau_emp)
    hot = audit(model, bundle.dataset, temperature=4 * tau_emp)
    assert not hot.interpolates and any(s.verdict == "not certified" for s in hot.sequences)
    assert largest_certified_temperature(model, bundle.dataset, 64 * tau_emp) == tau_emp


def write_bundle(tmp_path, bundle):
    for name, data in bundle.files.items():
        (tmp_path / name).write_bytes(data)
    return str(tmp_path / "model.json"), str(tmp_path / "dataset.json"), str(tmp_path / "certificate.json")


def test_cli_audit_softmax(tmp_path, bundle, capsys):
    model, dataset, _ = write_bundle(tmp_path, bundle)
    cert = str(tmp_path / "audit.json")
    assert main(["audit", "--model", model, "--dataset", dataset, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["interpolates"] and out["largest_certified_temperature"] is not None
    assert {s["verdict"] for s in out["sequences"]} == {"exact"}
    # a certificate of one temperature cannot state what a softmax certificate must prove
    assert main(["audit", "--model", model, "--dataset", dataset, "-o", cert]) == 2
    assert "tau_star" in capsys.readouterr().err and not (tmp_path / "audit.json").exists()
    assert main(["audit", "--model", model, "--dataset", dataset, "--temperature", "1000"]) == 1
    assert "not certified" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--temperature", "0"], "--temperature"),
    (["--temperature", "abc"], "--temperature"),
    (["--temperature", "1", "-o", "CERT"], "-o"),
])
def test_cli_audit_bad_temperature(tmp_path, bundle, capsys, argv, message):
    model, dataset, _ = write_bundle(tmp_path, bundle)
    argv = [str(tmp_path / "c.json") if a == "CERT" else a for a in argv]
    assert main(["audit", "--model", model, "--dataset", dataset, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "c.json").exists()


def test_cli_construct_softmax_and_width(tmp_path, capsys):
    assert main(["construct", str(example_path()), "-o", str(tmp_path / "b"), "--attention", "softmax"]) == 0
    assert "Theorem 1.8" in capsys.readouterr().out
    assert main(["construct", str(example_path()), "-o", str(tmp_path / "c"), "--attention", "softmax",
                 "--width", "3"]) == 2
    assert "a snap needs 4 units" in capsys.readouterr().err and not (tmp_path / "c").exists()
    assert main(["construct", str(example_path()), "-o", str(tmp_path / "w"), "--attention", "softmax",
                 "--width", "8"]) == 0


@pytest.mark.slow
def test_demo_softmax_prints_tightness(tmp_path, capsys):
    assert main(["demo", "-o", str(tmp_path / "demo"), "--attention", "softmax"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("tightness"))
    assert float(line.split("=")[1]) >= 0.5 and "tau* =" in out


def plain_bisection(model, dataset, start, steps=16):
    """The search as specified: every sequence replayed at every step (start certified)."""
    lo = start
    while certified_at(model, dataset, 2 * lo):
        lo *= 2
    hi = 2 * lo
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if certified_at(model, dataset, mid) else (lo, mid)
    return lo


def test_audit_replays_the_dataset_a_few_times_not_once_per_step(bundle, monkeypatch):
    """Audit cost ~19 replays of the whole dataset (one per bracketing and
    bisection step); the search now replays only the sequences that failed,
    and every sequence at the answer: three whole replays with the audit's
    own, and the same answer as the plain bisection."""
    from tfcert.audit import audit as audit_module

    model = read_model(parse_document("model.json", bundle.files["model.json"]))
    expected = plain_bisection(model, bundle.dataset, model.temperature)
    sizes = []
    real = audit_module.Replay

    def counting(model, inputs, **kwargs):
        sizes.append(len(inputs))
        return real(model, inputs, **kwargs)

    monkeypatch.setattr(audit_module, "Replay", counting)
    report = audit(model, bundle.dataset)
    assert report.largest_certified_temperature == expected
    n = len(bundle.dataset.pairs)
    assert sizes.count(n) <= 3 and sum(sizes) < 8 * n, sizes


def test_audit_prints_long_rationals_with_their_decimal(bundle):
    """A 1600-digit gap or float bound was printed in full with no decimal beside it."""
    import dataclasses

    from tfcert.audit.audit import AttentionLayer, FloatBound
    from tfcert.report import audit_human, audit_json

    model = read_model(parse_document("model.json", bundle.files["model.json"]))
    report = audit(model, bundle.dataset)
    gap, bound = Q(10**1600 + 1, 7 * 10**1599), Q(3, 10**1600 + 7)
    report = dataclasses.replace(report, layers=(AttentionLayer(3, gap, (), ()),),
                                 floats=(FloatBound("binary64", bound, None),))
    lines = audit_human(report).splitlines()
    assert "attention block 3: least argmax gap 1" in lines[-5] and lines[-5].endswith("(≈ 1.42857)")
    assert "(≈ 3.0e-1600))" in lines[-3] and "within 3.0e-1600 of" in lines[-3]
    assert max(map(len, lines)) < 300
    out = audit_json(report)
    assert out["attention_layers"][0]["min_gap"] == str(gap) and out["float"][0]["bound"] == str(bound)
