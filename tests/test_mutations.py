"""The mutation campaign: random single changes to constructed bundles,
decided by an independent judge (tfcert/selftest/oracle.py), must be accepted by the
checker exactly when every claim still holds."""
from __future__ import annotations

import ast
import json
import random
from collections import Counter

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfcert.cli.main import main
from tfcert.selftest.oracle import judge
from tfcert.selftest.selftest import without_float_claims
from tfcert.selftest.selftest import KINDS, campaign, make_bundles, mutate


@pytest.fixture(scope="module")
def bundles():
    return make_bundles(seed=7)


def test_bundles_cover_both_attentions(bundles):
    attentions = Counter(json.loads(b["model.json"])["attention"] for b in bundles)
    assert attentions["hardmax"] >= 2 and attentions["softmax"] >= 2
    assert all(judge(b["model.json"], b["dataset.json"], b["certificate.json"]) == (True, "") for b in bundles)


@pytest.mark.slow
def test_campaign_of_200_has_no_survivor(bundles):
    result = campaign(220, seed=11, bundles=bundles)
    assert result["survivors"] == [] and result["score"] == 1.0, result["survivors"][:5]
    assert result["caught"] + result["kept"] == result["mutations"] == 220
    assert result["caught"] > 100 and result["kept"] > 5  # both ways are exercised


@pytest.mark.slow
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32))
def test_campaign_any_seed(seed, bundles):
    assert campaign(40, seed=seed, bundles=bundles)["survivors"] == []


def test_every_kind_of_change_is_drawn(bundles):
    rng = random.Random(3)
    seen = Counter(mutate(rng, rng.choice(bundles))[1].split(" ")[0] for _ in range(400))
    words = {"parameter": "model", "claim": "certificate", "block-order": "model", "dataset-token": "dataset",
             "sha256": "certificate", "field-added": None, "field-removed": None, "list": "certificate"}
    assert set(words) == set(KINDS) and {"model", "certificate", "dataset"} <= set(seen)


@pytest.mark.parametrize("name", ["demo-hardmax", "demo-softmax", "equal-means-hardmax"])
def test_judge_accepts_the_committed_bundles(name):
    folder = REPO / "certificates" / name
    files = without_float_claims({f: (folder / f).read_bytes() for f in ("model.json", "dataset.json", "certificate.json")})
    assert judge(files["model.json"], files["dataset.json"], files["certificate.json"]) == (True, "")


def test_judge_shares_no_code_with_the_checker():
    tree = ast.parse((REPO / "tfcert" / "selftest" / "oracle.py").read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and m.startswith("tfcert") for m in modules), modules


@pytest.mark.slow
def test_cli_selftest_json(capsys):
    assert main(["selftest", "--mutations", "30", "--seed", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mutations"] == 30 and out["score"] == 1.0 and out["survivors"] == []
    assert out["caught"] + out["kept"] == 30
    assert main(["selftest", "--mutations", "0"]) == 2
    assert capsys.readouterr().err.startswith("error: --mutations")


@pytest.mark.slow
def test_campaign_has_teeth(bundles, monkeypatch):
    """With the hat claim's check switched off the campaign finds survivors:
    it can tell a checker that misses false claims."""
    from tfcert.verify.claims import hat

    monkeypatch.setattr(hat, "check", lambda *args: [])
    result = campaign(120, seed=1, bundles=bundles)
    assert result["survivors"] and all(s["checker"] == "accepted" for s in result["survivors"])
