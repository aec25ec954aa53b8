"""The CLI in-process: one JSON document with --json, readable tables, one error line on bad input."""
import json

import pytest

from tfcert.infoflow import recheck
from tfcert.main import main


def run(capsys, *argv):
    rc = main(["infoflow", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_predict_json_is_one_document_with_exponent_and_witness(capsys):
    rc, out, err = run(capsys, "predict", "--target", "pairwise-min", "--T", "16",
                       "--heads", "1,1", "--json")
    assert rc == 0 and err == ""
    doc = json.loads(out)
    assert doc["efficient"] is True
    assert doc["exponent"]["value"] == "1" and doc["exponent"]["formula"] == "max(0, 2*d/E - 1)"
    assert [h["mode"] for layer in doc["witness"]["layers"] for h in layer["heads"]] == ["max", "max"]
    assert doc["witness"]["information_sets"][1]["I(t,l)"] == ["t", "s1.1(t)"]
    assert recheck(doc["proof"]["smt2"]) == "unsat"


def test_predict_one_layer_reports_growth(capsys):
    rc, out, _ = run(capsys, "predict", "--target", "pairwise-min", "--T", "10", "--heads", "1")
    assert rc == 0
    assert "exponent   9 = max(0, T*d/E - 1)" in out and "efficient  no" in out
    assert "I(t,l)" in out


def test_min_heads_json_and_text(capsys):
    rc, out, _ = run(capsys, "min-heads", "--target", "intrinsic-dim:D=3", "--layers", "2",
                     "--T", "64", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["min_heads"] == [3, 3] and doc["efficient"]
    assert [p["heads"] for p in doc["proofs"]] == [[2, 3], [3, 2]]
    assert all(recheck(p["smt2"]) == "unsat" for p in doc["proofs"])
    rc, out, _ = run(capsys, "min-heads", "--target", "triangle-center", "--layers", "2", "--T", "8")
    assert rc == 0 and "min heads  none" in out


def test_table_text_and_json(capsys, monkeypatch):
    import functools
    from tfcert.infoflow import cli
    # the table is computed once; both renderings are checked against it
    monkeypatch.setattr(cli, "predictions_table", functools.lru_cache(cli.predictions_table))
    rc, out, _ = run(capsys, "table", "--json")
    rows = json.loads(out)
    assert rc == 0
    by = {(r["target"], r["architecture"]): r for r in rows}
    assert by["pairwise-min", "L=1, h=(1)"]["values"] == {"8": "7", "16": "15", "64": "63"}
    assert by["pairwise-min", "L=2, h=(1,1)"]["values"] == {"8": "1", "16": "1", "64": "1"}
    assert by["kth-largest:k=2", "L=1, h=(1)"]["values"]["64"] == "61/2"
    assert all(r["values"]["8"] == f"{D},{D}" for D in range(2, 7)
               for r in rows if r["target"] == f"intrinsic-dim:D={D}")
    assert not any(r["efficient"] for r in rows if r["target"] == "triangle-center")
    rc, out, _ = run(capsys, "table")
    assert rc == 0 and out.splitlines()[0].split()[:3] == ["prediction", "target", "architecture"]


@pytest.mark.parametrize("argv,needle", [
    (["predict", "--target", "nope", "--T", "8", "--heads", "1"], "--target: unknown target"),
    (["predict", "--target", "pairwise-min", "--T", "8", "--heads", "1,,2"], "--heads:"),
    (["predict", "--target", "pairwise-min", "--T", "8", "--heads", "1,-1"], "--heads: entry 2"),
    (["predict", "--target", "pairwise-min", "--T", "0", "--heads", "1"], "--T: must be"),
    (["predict", "--target", "pairwise-min", "--T", "x", "--heads", "1"], "--T: expected an integer"),
    (["predict", "--target", "triangle-center", "--T", "2", "--heads", "1"], "--T: T=2"),
    (["predict", "--target", "kth-largest:k=9", "--T", "4", "--heads", "1"], "rank 9"),
    (["predict", "--target", "kth-largest:j=2", "--T", "4", "--heads", "1"], "--target: kth-largest"),
    (["min-heads", "--target", "pairwise-min", "--T", "4", "--layers", "0"], "--layers: must be"),
    (["predict", "--target", "missing.json", "--T", "4", "--heads", "1"], "missing.json: cannot read"),
])
def test_bad_input_is_one_error_line_and_exit_2(capsys, argv, needle):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and needle in err
