"""The shipped JSON Schemas: valid schemas, every file format and every
``--json`` output validates against its schema, and ``tfcert schema``
prints them."""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO

from tfcert.cli.main import build_parser, main
from tfcert.cli.schemas import load_schema, names

CERTS = REPO / "certificates"
HARDMAX, SOFTMAX = CERTS / "demo-hardmax", CERTS / "demo-softmax"
DEMO = REPO / "tfcert" / "examples" / "demo.json"


def validate(doc: object, name: str) -> None:
    schema = load_schema(name)
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(doc)


def json_out(argv: list, capsys) -> object:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out = capsys.readouterr().out
    assert rc in (0, 1), out
    return json.loads(out)


def test_every_schema_is_a_valid_schema():
    assert {"dataset", "model", "certificate", "verify-output", "audit-output", "construct-output", "check-output",
            "plot-output", "bench-output", "infoflow-predict-output", "infoflow-min-heads-output",
            "infoflow-table-output", "experiment-output", "smt-index",
            "infoflow-check-output", "infoflow-depth-output", "selftest-output"} == set(names())
    for name in names():
        jsonschema.Draft202012Validator.check_schema(load_schema(name))


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(CERTS.glob("*/*.json")) + sorted((REPO / "tfcert" / "examples").glob("*.json")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_file_validates(path):
    validate(json.loads(path.read_text()), path.stem if path.parent.parent == CERTS else "dataset")


def test_schemas_refuse_what_the_readers_refuse():
    model = json.loads((SOFTMAX / "model.json").read_text())
    del model["temperature"]
    with pytest.raises(jsonschema.ValidationError):
        validate(model, "model")
    data = json.loads(DEMO.read_text())
    data["pairs"][0]["input"][0][0] = None
    with pytest.raises(jsonschema.ValidationError):
        validate(data, "dataset")


@pytest.mark.slow
def test_cli_outputs_validate(tmp_path, capsys):
    validate(json_out(["construct", DEMO, "-o", tmp_path / "b", "--json"], capsys), "construct-output")
    for folder in (HARDMAX, SOFTMAX):
        validate(json_out(["verify", folder, "--json"], capsys), "verify-output")
        validate(json_out(["audit", folder, "--json"], capsys), "audit-output")
    bad = tmp_path / "bad"
    shutil.copytree(HARDMAX, bad)
    cert = json.loads((bad / "certificate.json").read_text())
    next(c for c in cert["phases"][-1]["claims"] if c["kind"] == "size")["blocks"] = 1
    (bad / "certificate.json").write_text(json.dumps(cert))
    failing = json_out(["verify", bad, "--json"], capsys)
    assert failing["ok"] is False
    validate(failing, "verify-output")
    validate(json_out(["check", CERTS, "--json"], capsys), "check-output")
    validate(json_out(["plot", HARDMAX, "-o", tmp_path / "p", "--json"], capsys), "plot-output")
    validate(json_out(["bench", "--quick", "--json", "--out", tmp_path / "bench"], capsys), "bench-output")


def test_audit_output_with_failures_validates(tmp_path, capsys):
    """A model that does not interpolate: FAIL verdicts and Hausdorff distances."""
    data = json.loads((HARDMAX / "dataset.json").read_text())
    data["pairs"][0]["output"][0][0] = "7"
    (tmp_path / "d.json").write_text(json.dumps(data))
    doc = json_out(["audit", "--model", HARDMAX / "model.json", "--dataset", tmp_path / "d.json", "--json"], capsys)
    assert doc["interpolates"] is False
    validate(doc, "audit-output")


def test_infoflow_outputs_validate(capsys):
    validate(json_out(["infoflow", "predict", "--target", "pairwise-min", "--T", "16", "--heads", "1,1", "--json"],
                      capsys), "infoflow-predict-output")
    validate(json_out(["infoflow", "predict", "--target", "pairwise-min", "--T", "16", "--heads", "1", "--json"],
                      capsys), "infoflow-predict-output")
    validate(json_out(["infoflow", "min-heads", "--target", "intrinsic-dim:D=2", "--layers", "2", "--T", "8",
                       "--json"], capsys), "infoflow-min-heads-output")


def test_infoflow_check_output_validates(tmp_path, capsys):
    """Valid, invalid, no-derivation and --no-proofs reports of real witness files."""
    w, none = tmp_path / "w.json", tmp_path / "none.json"
    json_out(["infoflow", "predict", "--target", "pairwise-min", "--T", "8", "--heads", "1", "--json",
              "--witness", w], capsys)
    json_out(["infoflow", "depth", "--target", "triangle-center", "--T", "8", "--json", "--witness", none],
             capsys)
    for argv in ([w], [w, "--no-proofs"], [none]):
        doc = json_out(["infoflow", "check", *argv, "--json"], capsys)
        assert doc["valid"] is True
        validate(doc, "infoflow-check-output")
    bad = json.loads(w.read_text())
    bad["exponent"] = "1"
    w.write_text(json.dumps(bad))
    doc = json_out(["infoflow", "check", w, "--json"], capsys)
    assert doc["valid"] is False and doc["errors"][0].startswith("claimed exponent 1")
    validate(doc, "infoflow-check-output")


def _json_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every command (as its words) that takes --json."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _json_commands(sub, (*path, name))
        elif "--json" in action.option_strings:
            yield path


def test_every_json_option_has_a_schema():
    """`tfcert X --json` is described by `tfcert schema X-output` (every experiment by one schema)."""
    commands = list(_json_commands(build_parser()))
    assert ("infoflow", "depth") in commands and ("selftest",) in commands
    for words in commands:
        name = "experiment-output" if words[0] == "experiment" else "-".join(words) + "-output"
        assert name in names(), f"tfcert {' '.join(words)} --json has no schema {name}"


def test_infoflow_depth_output_validates(capsys):
    """A depth with its witness and the cost of one layer fewer, and a target with no depth."""
    doc = json_out(["infoflow", "depth", "--target", "alternation:k=3", "--T", "16", "--json"], capsys)
    assert doc["depth"] == 3 and doc["fewer_layers"]["efficient"] is False
    validate(doc, "infoflow-depth-output")
    doc = json_out(["infoflow", "depth", "--target", "triangle-center", "--T", "8", "--json"], capsys)
    assert doc["depth"] is None and doc["fewer_layers"] is None
    validate(doc, "infoflow-depth-output")


def test_selftest_output_validates(capsys, monkeypatch):
    """Written like every --json output (json_text), with and without survivors."""
    from tfcert.selftest import selftest
    from tfcert.report import json_text

    capsys.readouterr()
    assert main(["selftest", "--mutations", "3", "--seed", "1", "--json"]) == 0
    out = capsys.readouterr().out
    assert out == json_text(json.loads(out)) + "\n"
    validate(json.loads(out), "selftest-output")
    monkeypatch.setattr(selftest, "checker", lambda files: "accepted")  # a checker that accepts every mutant
    assert main(["selftest", "--mutations", "3", "--seed", "1", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["survivors"]
    validate(doc, "selftest-output")


def test_bench_shards_output_validates(tmp_path, capsys):
    doc = json_out(["bench", "--shards", "2", "--shapes", "6x5x2x4", "--json", "--out", tmp_path], capsys)
    assert doc["shard_costs"][0]["merged_equals_full"] is True
    validate(doc, "bench-output")


@pytest.mark.slow
def test_infoflow_table_validates(monkeypatch, capsys):
    """The table's rows, from a cheaper T grid (the full table has its own test)."""
    from tfcert.infoflow import table

    monkeypatch.setattr(table, "TABLE_T", (4,))
    monkeypatch.setattr("tfcert.cli.infoflow.TABLE_T", (4,))
    validate(json_out(["infoflow", "table", "--json"], capsys), "infoflow-table-output")


@pytest.mark.slow
def test_experiment_output_validates(monkeypatch, capsys, tmp_path):
    pytest.importorskip("torch")
    doc = json_out(["experiment", "triangle", "--quick", "--json", "--out", tmp_path], capsys)
    validate(doc, "experiment-output")
    validate(json.loads(Path(doc["files"]["json"]).read_text()), "experiment-output")


def test_schema_command(capsys):
    assert main(["schema"]) == 0
    assert capsys.readouterr().out.split() == names()
    assert main(["schema", "certificate"]) == 0
    assert json.loads(capsys.readouterr().out) == load_schema("certificate")
    assert main(["schema", "nope"]) == 2
    assert "unknown" in capsys.readouterr().err


def test_audit_output_when_the_replay_stops_validates(capsys):
    """``audit --json --limit bits=8``: the replay stops before any verdict; the
    output is interpolates false and why, which the schema admits (it required
    ``sequences`` and refused this document)."""
    doc = json_out(["audit", HARDMAX, "--json", "--limit", "bits=8"], capsys)
    assert doc == {"interpolates": False, "not_checked": doc["not_checked"]}
    assert "over the limit bits=8" in doc["not_checked"]
    validate(doc, "audit-output")
    for bad in ({"interpolates": True, "not_checked": "x"}, {**doc, "sequences": []}, {"interpolates": False}):
        with pytest.raises(jsonschema.ValidationError):
            validate(bad, "audit-output")
