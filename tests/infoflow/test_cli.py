"""The CLI in-process: one JSON document with --json, readable tables, one error line on bad input."""
import json

import pytest

from tfcert.infoflow import recheck
from tfcert.cli.main import main


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
    # layer 1 with two heads fails whatever the later layer has (null: any number of heads);
    # then 6 heads in all are the least, and (3, 3) the only vector of 6
    assert [p["heads"] for p in doc["proofs"]] == [[2, None], [3, 2], [None, None]]
    assert doc["order"].startswith("lexicographic") and doc["least_total"] == 6
    assert doc["pareto"] == [[3, 3]] and doc["pareto_complete"]
    assert all(recheck(p["smt2"]) == "unsat" for p in doc["proofs"])
    rc, out, _ = run(capsys, "min-heads", "--target", "triangle-center", "--layers", "2", "--T", "8")
    assert rc == 0 and "min heads  none" in out


@pytest.mark.slow
def test_table_text_and_json(capsys, monkeypatch):
    import functools
    from tfcert.cli import infoflow as cli
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
    (["min-heads", "--target", "pairwise-min", "--T", "4", "--layers", "65"], "--layers: must be"),
    (["predict", "--target", "pairwise-min", "--T", "8", "--heads", "1" + ",1" * 64], "at most 64"),
    (["predict", "--target", "pairwise-min", "--T", "9" * 5000, "--heads", "1"],
     "--T: expected an integer"),
    (["depth", "--target", "triangle-center", "--T", "2"], "--T: T=2"),
    (["predict", "--target", "missing.json", "--T", "4", "--heads", "1"], "missing.json: cannot read"),
])
def test_bad_input_is_one_error_line_and_exit_2(capsys, argv, needle):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and needle in err


def test_predict_witness_file_is_checked_by_check(capsys, tmp_path):
    path = tmp_path / "w.json"
    rc, out, err = run(capsys, "predict", "--target", "alternation:k=3", "--T", "16",
                       "--heads", "1,1,1", "--witness", str(path))
    assert rc == 0 and err == "" and f"witness    {path}" in out
    doc = json.loads(path.read_text())
    assert doc["format"] == "tfcert.infoflow.witness/1" and doc["exponent"] == "1"
    assert [s["fact"] for s in doc["steps"]] == ["a3(t)", "a2(t)", "a1", "y"]
    assert all(recheck(p["smt2"]) == "unsat" for p in doc["proofs"])
    rc, out, err = run(capsys, "check", str(path))
    assert rc == 0 and err == "" and "valid      yes: exponent 1, T-bounded" in out
    assert out.count("certified  ") == len(doc["proofs"]) + 1  # the derivation, then each proof
    rc, out, _ = run(capsys, "check", str(path), "--json")
    assert rc == 0 and json.loads(out)["valid"] is True


def test_check_names_the_first_wrong_step_and_exits_1(capsys, tmp_path):
    path = tmp_path / "w.json"
    run(capsys, "predict", "--target", "pairwise-min", "--T", "8", "--heads", "1,1",
        "--witness", str(path))
    doc = json.loads(path.read_text())
    del doc["steps"][0]  # g_pmin(t) is no longer derived
    path.write_text(json.dumps(doc))
    rc, out, err = run(capsys, "check", str(path), "--no-proofs")
    assert rc == 1 and err == ""
    assert "invalid    step 1 (pmin at T+1, layer 2, retrieve): premise g_pmin(t) at t is " \
           "not derived by state 1" in out
    rc, out, _ = run(capsys, "check", str(path), "--json", "--no-proofs")
    assert rc == 1 and not json.loads(out)["valid"]


def test_check_builds_its_own_queries(capsys, tmp_path):
    """The file's query is the search's, for any solver: the checker builds the statement's
    query itself, so a replaced query changes nothing and a stronger claim fails."""
    path = tmp_path / "w.json"
    run(capsys, "predict", "--target", "pairwise-min", "--T", "8", "--heads", "1",
        "--witness", str(path))
    doc = json.loads(path.read_text())
    doc["proofs"][0]["smt2"] = "(declare-const B Real)\n(assert (> B 0.0))\n(check-sat)\n"
    path.write_text(json.dumps(doc))
    rc, out, _ = run(capsys, "check", str(path))
    assert rc == 0 and "certified  no derivation has exponent < 7 at T = 8" in out
    doc["proofs"][0]["claim"] = "no derivation has exponent < 8 at T = 8"
    path.write_text(json.dumps(doc))
    rc, out, _ = run(capsys, "check", str(path))
    assert rc == 1 and "invalid    proof 1: least_exponent: claim 'no derivation has exponent < 8" in out


def test_unreachable_prediction_writes_its_proof(capsys, tmp_path):
    tree = tmp_path / "first.json"
    tree.write_text(json.dumps({"tree": {"op": "max", "over": "t", "of": {
        "op": "score", "name": "f", "args": ["t", 1]}}}))
    path = tmp_path / "w.json"
    rc, out, _ = run(capsys, "predict", "--target", str(tree), "--T", "8", "--heads", "1,1",
                     "--witness", str(path))
    assert rc == 0 and "exponent   none" in out
    assert json.loads(path.read_text())["derivation"] is False
    rc, out, _ = run(capsys, "check", str(path))  # the checker builds the query itself
    assert rc == 0 and "valid      yes: no derivation" in out
    assert "certified  no derivation reaches the target at the readout, for every T >= 1" in out
    rc, out, _ = run(capsys, "predict", "--target", str(tree), "--T", "8", "--heads", "1,1",
                     "--positional")
    assert rc == 0 and "exponent   1 " in out and "attends to position(s) 1" in out


def test_witness_never_overwrites_the_target(capsys, tmp_path):
    tree = tmp_path / "t.json"
    tree.write_text(json.dumps({"comparisons": [{"name": "a", "order": 2}]}))
    before = tree.read_text()
    rc, out, err = run(capsys, "predict", "--target", str(tree), "--T", "8", "--heads", "1,1",
                       "--witness", str(tree))
    assert rc == 2 and out == "" and "is the --target file" in err and tree.read_text() == before


def test_witness_to_an_unwritable_place_is_one_error(capsys, tmp_path):
    rc, out, err = run(capsys, "predict", "--target", "pairwise-min", "--T", "8", "--heads", "1",
                       "--witness", str(tmp_path / "missing" / "w.json"))
    assert rc == 2 and out == "" and err.startswith("error: --witness:") and "cannot write" in err


def test_min_heads_none_witness_and_depth(capsys, tmp_path):
    path = tmp_path / "w.json"
    rc, out, _ = run(capsys, "min-heads", "--target", "triangle-center", "--layers", "2",
                     "--T", "8", "--witness", str(path))
    assert rc == 0 and "min heads  none" in out
    rc, out, _ = run(capsys, "check", str(path))  # no derivation: the checker builds the query
    assert rc == 0 and "certified  no T-bounded derivation with 2 layer(s) and any number" in out
    rc, out, _ = run(capsys, "depth", "--target", "alternation:k=3", "--T", "16", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["depth"] == 3 and doc["min_heads"] == [1, 1, 1]
    assert doc["fewer_layers"]["layers"] == 2 and not doc["fewer_layers"]["efficient"]
    assert doc["fewer_layers"]["exponent"]["value"] == "15"
    assert all(recheck(p["smt2"]) == "unsat" for p in doc["proofs"])
    rc, out, _ = run(capsys, "depth", "--target", "triangle-center", "--T", "16")
    assert rc == 0 and "depth      none" in out and "stopped growing" in out


@pytest.mark.parametrize("content,needle", [
    (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    (bytes(range(256)) * 8, "not UTF-8"),
    (b'{"comparisons": [{"name": "a", "order": ' + b"7" * 5000 + b"}]}", "comparisons[0].order"),
    (b'{"tree": {"op": "score", "name": "f", "args": [' + b"7" * 5000 + b"]}}", "args[0]"),
    (b"{", "malformed JSON"),
    (b"", "malformed JSON"),
])
@pytest.mark.parametrize("command", ["predict", "check"])
def test_hostile_files_are_one_error_line_and_exit_2(capsys, tmp_path, content, needle, command):
    """Issue 9: the target and witness loaders use the verifier's JSON loader and its guards."""
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    argv = ["predict", "--target", str(path), "--T", "8", "--heads", "1"] \
        if command == "predict" else ["check", str(path)]
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and len(err) < 400
    if command == "predict" or needle in ("nested too deeply", "not UTF-8", "malformed JSON"):
        assert needle in err


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d.pop("steps"), "missing required key 'steps'"),
    (lambda d: d.update(format="other"), "$.format"),
    (lambda d: d.update(colour=1), "unknown key"),
    (lambda d: d["layers"][0]["heads"][0].update(mode="best"), ".mode: expected one of"),
    (lambda d: d.update(exponent="1.5"), "$.exponent"),
    (lambda d: d["architecture"].update(T=True), "$.architecture.T"),
    (lambda d: d["steps"][0].update(rule="magic"), "$.steps[0].rule"),
    (lambda d: d["tree"].update(over=["zz"]), "$.tree.of"),
])
def test_a_document_that_is_not_a_witness_exits_2(capsys, tmp_path, mutate, needle):
    path = tmp_path / "w.json"
    run(capsys, "predict", "--target", "pairwise-min", "--T", "8", "--heads", "1,1",
        "--witness", str(path))
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    rc, out, err = run(capsys, "check", str(path))
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and needle in err


def test_a_forged_unreachability_claim_is_not_valid():
    """pairwise-min is reachable with heads (1,1); a file claiming the opposite,
    backed by a genuine unsat query about another tree, must not be valid: the checker builds
    the statement's query from the file's tree and architecture, and z3 finds it sat."""
    from tfcert.infoflow import Architecture, builtin_target, predict
    from tfcert.infoflow.check import check_document

    pm = predict(builtin_target("pairwise-min"), Architecture(T=8, heads=(1, 1)))
    assert pm.witness is not None and pm.exponent == 1
    tri = predict(builtin_target("triangle-center"), Architecture(T=8, heads=(1, 1)))
    other = next(p.smt2 for p in tri.proofs if "T-bounded" in p.claim)
    forged = {k: pm.witness.to_json()[k] for k in ("format", "target", "tree", "architecture")}
    claim = "no derivation reaches the target at the readout, for every T >= 2"
    forged.update(derivation=False, proofs=[{"kind": "no_derivation", "claim": claim, "smt2": other}])
    report = check_document("forged", forged)
    assert not report.valid and report.certified == []
    assert report.errors[0] == f"proof 1 ({claim}): z3 says sat on the checker's query, not unsat"


def test_a_reduction_named_y_is_refused(capsys, tmp_path):
    """"y" names the readout's fact: a reduction called so gave a witness its own checker refused."""
    target = tmp_path / "y.json"
    target.write_text(json.dumps({"tree": {"op": "min", "over": "t", "name": "y",
                                           "of": {"op": "score", "name": "f", "args": ["t"]}}}))
    rc, out, err = run(capsys, "predict", "--target", str(target), "--T", "8", "--heads", "1")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "$.tree.name: 'y' is reserved" in err


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_comparison_number_too_long_to_print_is_one_error_line(capsys, tmp_path, json_flag):
    """C(10^300, 32) has about 9 600 digits, past what Python writes: an error line, not a traceback."""
    target = tmp_path / "o32.json"
    target.write_text(json.dumps({"comparisons": [{"name": "c", "order": 32}]}))
    rc, out, err = run(capsys, "predict", "--target", str(target), "--T", "1" + "0" * 300, "--heads", "1",
                       *json_flag)
    assert rc == 2 and out == "" and err.startswith("error: --T: ") and "digits" in err
