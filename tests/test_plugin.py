"""``pytest --tfcert DIR``: one test item per bundle; a corrupted bundle is
one failure that names its claim."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import REPO

HARDMAX = REPO / "certificates" / "demo-hardmax"


def test_one_good_one_corrupted(pytester):
    root = pytester.path / "bundles"
    shutil.copytree(HARDMAX, root / "good")
    shutil.copytree(HARDMAX, root / "nested" / "bad")
    cert = json.loads((root / "nested" / "bad" / "certificate.json").read_text())
    hat = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "hat")
    hat["margin"] = "12345"
    (root / "nested" / "bad" / "certificate.json").write_text(json.dumps(cert))
    result = pytester.runpytest_inprocess("--tfcert", str(root), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    index = next(i for i, p in enumerate(cert["phases"]) if hat in p["claims"])
    total = sum(len(p["claims"]) for p in cert["phases"]) + 2  # the two sha256 checks
    assert f"1 of {total} claims fail" in text and "leaders/hat/block 1" in text and "margin: stated 12345" in text
    assert f"$.phases[{index}].claims[0]" in text


def test_bad_input_is_a_failure_not_a_crash(pytester):
    root = pytester.path / "b"
    shutil.copytree(HARDMAX, root / "x")
    (root / "x" / "model.json").write_text("{")
    result = pytester.runpytest_inprocess("--tfcert", str(root), "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert "error:" in result.stdout.str() and "malformed JSON" in result.stdout.str()


def test_the_project_certificates_pass(pytester):
    result = pytester.runpytest_inprocess("--tfcert", str(REPO / "certificates"), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(json.loads((REPO / "certificates" / "manifest.json").read_text())))


def test_missing_folder_is_a_usage_error(pytester):
    result = pytester.runpytest_inprocess("--tfcert", str(pytester.path / "nope"))
    assert result.ret != 0 and "not a folder" in result.stderr.str()


@pytest.mark.parametrize("folder", ["build", "dist", "node_modules", "venv"])
def test_collects_what_check_collects(pytester, folder):
    """Bundles below folders pytest does not recurse into (norecursedirs) are
    collected all the same, as `tfcert check` finds them."""
    root = pytester.path / "certs"
    shutil.copytree(HARDMAX, root / "good")
    shutil.copytree(HARDMAX, root / folder / "bad")
    (root / folder / "bad" / "model.json").write_text("{")
    result = pytester.runpytest_inprocess("--tfcert", str(root), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)


def test_incomplete_bundle_is_a_usage_error(pytester):
    root = pytester.path / "certs"
    shutil.copytree(HARDMAX, root / "x")
    (root / "x" / "dataset.json").unlink()
    result = pytester.runpytest_inprocess("--tfcert", str(root))
    assert result.ret != 0 and "holds certificate.json but no dataset.json" in result.stderr.str()
