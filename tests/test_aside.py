"""The float analyses a construction runs in a second process (construct/aside.py,
on large datasets) give the bundles, bounds and messages one process gives."""
from __future__ import annotations

import json
import os

import pytest
from conftest import REPO

from tfcert.construct import aside, bundle
from tfcert.verify.formats import load_document, read_dataset, read_model
from tfcert.verify.numbers import LIMITS

MANIFEST = json.loads((REPO / "certificates" / "manifest.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["demo-softmax", "random-d20-wide", "one-sequence-d8"])
def test_a_bundle_built_with_the_analyses_aside_is_the_committed_one(name, monkeypatch):
    spec = MANIFEST[name]
    monkeypatch.setattr(bundle, "ASIDE_TOKENS", 0)  # every dataset: the analyses but binary64's aside
    started = []
    monkeypatch.setattr(bundle, "Aside", lambda *args: started.append(aside.Aside(*args)) or started[-1])
    built = bundle.build(REPO / "tfcert" / "examples" / spec["dataset"], spec["attention"], spec["width"])
    assert started and started[0].process.returncode == 0 and not os.path.exists(started[0].job)
    for file in ("model.json", "certificate.json"):
        assert built.files[file] == (REPO / "certificates" / name / file).read_bytes(), file
    monkeypatch.setattr(bundle, "ASIDE_TOKENS", 10**9)  # one process
    alone = bundle.build(REPO / "tfcert" / "examples" / spec["dataset"], spec["attention"], spec["width"])
    assert built.floats == alone.floats and [f[0] for f in built.floats] == ["binary64", "binary32", "binary16",
                                                                            "bfloat16"]


def test_where_the_replay_stops_every_analysis_aside_fails(monkeypatch):
    """A replay stopped by a limit proves nothing past it: each analysis fails, none states a bound."""
    folder = REPO / "certificates" / "demo-hardmax"
    model = read_model(load_document(folder / "model.json"))
    dataset = read_dataset(load_document(folder / "dataset.json"))
    monkeypatch.setattr(LIMITS, "bits", 8)
    done = aside.run(model, dataset, ("binary32", "binary16"))
    assert all(a.bound is None and "the replay stopped" in a.failure for a in done)


def test_an_aside_stopped_early_leaves_no_process_and_no_file():
    folder = REPO / "certificates" / "demo-hardmax"
    model = read_model(load_document(folder / "model.json"))
    dataset = read_dataset(load_document(folder / "dataset.json"))
    started = aside.Aside(model, dataset, ("binary32",))
    started.stop()
    assert started.process.poll() is not None and not os.path.exists(started.job)
