"""The garbage collector's pace: a command runs under tfcert.process.RARE and hands the
interpreter back as it found it (a notebook, a test run, a Dask worker keep their own)."""
from __future__ import annotations

import gc

import pytest

from tfcert.cli.main import main
from tfcert.process import RARE, rare_collection


@pytest.fixture
def thresholds():
    """A caller's own thresholds, put back after the test whatever it does."""
    old = gc.get_threshold()
    gc.set_threshold(1234, 11, 12)
    yield (1234, 11, 12)
    gc.set_threshold(*old)


def test_rare_collection_sets_rare_thresholds_and_restores_the_callers(thresholds):
    with rare_collection():
        assert gc.get_threshold() == RARE
    assert gc.get_threshold() == thresholds


def test_rare_collection_restores_the_thresholds_after_an_exception(thresholds):
    with pytest.raises(KeyError), rare_collection():
        raise KeyError("x")
    assert gc.get_threshold() == thresholds


def test_a_command_runs_with_rare_collection_and_restores_the_callers(thresholds, monkeypatch):
    seen = []
    monkeypatch.setattr("tfcert.cli.main.cmd_schema", lambda args: seen.append(gc.get_threshold()) or 0)
    assert main(["schema", "dataset"]) == 0
    assert seen == [RARE] and gc.get_threshold() == thresholds
