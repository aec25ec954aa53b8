"""Region queries as SMT-LIB2 files (--emit-smt) and cvc5's answer beside z3's (--cross-check):
the files are self-contained, exact and re-run to the same answers; a second solver that
disagrees, or gives no answer, fails the claim; without cvc5 the option is one error line."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import z3
from conftest import REPO
from flint import fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

from tfcert.cli import smt
from tfcert.cli.main import main
from tfcert.cli.schemas import load_schema
from tfcert.verify import regions

BUNDLES = sorted(p for p in (REPO / "certificates").iterdir() if (p / "certificate.json").exists())
DEMO = REPO / "certificates" / "demo-softmax"  # hats and snaps
NUMERAL = re.compile(r"(?<![\w.@$|])(\d+(?:\.\d+)?)(?![\w.@$|])")

RERUN = """
import json, sys
from pathlib import Path
folder, solver = Path(sys.argv[1]), sys.argv[2]
for q in json.loads((folder / "index.json").read_text())["queries"]:
    text = (folder / q["file"]).read_text()
    if solver == "z3":
        import z3
        s = z3.Solver()
        s.from_string(text)
        answer = str(s.check())
    else:
        from tfcert.cli.smt import cvc5_answer
        answer = cvc5_answer(text, 60)
    print(q["file"], answer, q["expected"])
"""


def emit(tmp_path: Path, bundle: Path = DEMO, *extra: str) -> Path:
    out = tmp_path / "queries"
    assert main(["-q", "verify", str(bundle), "--emit-smt", str(out), *extra]) == 0
    return out


def rerun(folder: Path, solver: str) -> list[list[str]]:
    """Each emitted file answered by ``solver`` in a fresh process: [file, answer, expected]."""
    proc = subprocess.run([sys.executable, "-c", RERUN, str(folder), solver], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [line.split() for line in proc.stdout.splitlines()]


def drop_first_assertion(text: str) -> str:
    """The query without its first (assert …): for a region query, the region it speaks of."""
    start = text.index("(assert")
    return text[:start] + text[text.index("(assert", start + 1):]


def test_emitted_files_are_self_contained_exact_and_listed(tmp_path, capsys):
    out = emit(tmp_path)
    index = json.loads((out / smt.INDEX).read_text())
    jsonschema.validate(index, load_schema("smt-index"))
    files = sorted(p.name for p in out.iterdir() if p.suffix == ".smt2")
    assert index["format"] == smt.INDEX_FORMAT and sorted(q["file"] for q in index["queries"]) == files
    kinds = {q["kind"] for q in index["queries"]}
    assert kinds == {"hat", "snap"} and all(q["expected"] == "unsat" == q["z3"] for q in index["queries"])
    snap = [q for q in index["queries"] if q["kind"] == "snap"]
    assert len(snap) == 2 * len({q["claim"] for q in snap})  # plateau and support: two files a snap
    for name in files:
        text = (out / name).read_text()
        assert text.startswith("(set-logic QF_LRA)\n") and text.count("(check-sat)") == 1
        assert "(declare-fun s () Real)" in text and "(assert" in text
        # exact: every numeral is an integer (z3 writes 1/3 as (/ 1.0 3.0)), never a rounded decimal
        assert all(re.fullmatch(r"\d+(\.0)?", n) for n in NUMERAL.findall(text)), name
    capsys.readouterr()


def test_emitted_files_rerun_in_a_fresh_process(tmp_path):
    out = emit(tmp_path)
    answers = rerun(out, "z3")
    assert answers and all(answer == expected for _, answer, expected in answers)


def test_emission_is_deterministic(tmp_path):
    a, b = emit(tmp_path / "a"), emit(tmp_path / "b")
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    assert all((a / p.name).read_bytes() == (b / p.name).read_bytes() for p in a.iterdir())


@settings(max_examples=60, deadline=None)
@given(st.integers(-10**60, 10**60), st.integers(1, 10**60))
def test_rationals_are_written_exactly(p, q):
    """A constant as the kernel writes it reads back as the same rational, with no decimal digits."""
    x = fmpq(p, q)
    solver = z3.Solver()
    solver.add(z3.Real("s") == regions.q(x))
    text = solver.to_smt2()
    assert all(re.fullmatch(r"\d+(\.0)?", n) for n in NUMERAL.findall(text))
    back = z3.Solver()
    back.from_string(text)
    assert back.check() == z3.sat
    value = back.model()[z3.Real("s")]
    assert fmpq(value.numerator_as_long(), value.denominator_as_long()) == x


def test_emit_refuses_a_folder_with_files_and_writes_nothing_on_bad_input(tmp_path, capsys):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("x")
    assert main(["-q", "verify", str(DEMO), "--emit-smt", str(full)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --emit-smt:")
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    bundle = tmp_path / "bundle"
    shutil.copytree(DEMO, bundle)
    (bundle / "model.json").write_text("{")
    assert main(["-q", "verify", str(bundle), "--emit-smt", str(tmp_path / "q")]) == 2
    assert not (tmp_path / "q").exists() and regions.OBSERVERS == []


def test_a_second_answer_that_differs_fails_the_claim(tmp_path, monkeypatch, capsys):
    """Whatever cvc5 says other than z3's answer (sat for unsat, unknown) fails the claim, naming both."""
    monkeypatch.setattr(smt, "cvc5_available", lambda: True)
    for second in ("sat", "unknown"):
        monkeypatch.setattr(smt, "cvc5_answer", lambda text, seconds, second=second: second)
        assert main(["-q", "verify", str(DEMO), "--cross-check", "cvc5", "--json"]) == 1
        doc = json.loads(capsys.readouterr().out)
        failed = [r for r in doc["results"] if r["failures"]]
        assert {r["kind"] for r in failed} == {"hat", "snap"}
        assert all(f.startswith(f"cross-check: z3 says unsat, cvc5 says {second}: ") for r in failed
                   for f in r["failures"])
    monkeypatch.setattr(smt, "cvc5_answer", lambda text, seconds: "unsat")
    assert main(["-q", "verify", str(DEMO), "--cross-check", "cvc5"]) == 0
    assert regions.OBSERVERS == []


def test_agreement_does_not_hide_a_false_claim(tmp_path, monkeypatch, capsys):
    """The observer only adds failures: a hat that is not zero outside its window fails with
    z3's counterexample even when the second solver agrees with z3."""
    bundle = tmp_path / "bundle"
    shutil.copytree(DEMO, bundle)
    cert = json.loads((bundle / "certificate.json").read_text())
    hat = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "hat")
    lo, hi = (fmpq(*map(int, (str(v).split("/") + ["1"])[:2])) for v in hat["window"])
    hat["window"] = [str(lo), str(lo + (hi - lo) / 8)]  # a narrower window: the hat is non-zero past it
    (bundle / "certificate.json").write_text(json.dumps(cert))
    monkeypatch.setattr(smt, "cvc5_available", lambda: True)
    monkeypatch.setattr(smt, "cvc5_answer", lambda text, seconds: "sat")
    assert main(["-q", "verify", str(bundle), "--cross-check", "cvc5"]) == 1
    # the demo's leader hats also move every token past their window (``above``)
    assert "z3: the group is not the stated move above its window at t = " in capsys.readouterr().out


def test_without_cvc5_the_option_is_one_error_line(monkeypatch, capsys):
    monkeypatch.setattr(smt, "cvc5_available", lambda: False)
    for argv in (["verify", str(DEMO)], ["check", str(DEMO)], ["audit", str(DEMO)]):
        assert main(["-q", *argv, "--cross-check", "cvc5"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: --cross-check cvc5: the cvc5 package is not installed")


# ---------------------------------------------------------------- with cvc5 installed


def test_both_solvers_agree_on_every_bundle(monkeypatch, capsys):
    pytest.importorskip("cvc5")
    asked = []
    real = smt.cvc5_answer
    monkeypatch.setattr(smt, "cvc5_answer", lambda text, seconds: asked.append(text) or real(text, seconds))
    assert main(["-q", "check", *map(str, BUNDLES), "--cross-check", "cvc5"]) == 0
    assert f"{len(BUNDLES)} bundle(s): all verify" in capsys.readouterr().out
    assert len(asked) >= len(BUNDLES) and all(real(text, 60) == "unsat" for text in asked[:3])


def test_cvc5_reruns_the_emitted_files_and_a_weakened_query_is_sat_in_both(tmp_path):
    pytest.importorskip("cvc5")
    out = emit(tmp_path, DEMO, "--cross-check", "cvc5")
    answers = rerun(out, "cvc5")
    assert answers and all(answer == expected for _, answer, expected in answers)
    for name in ("phase2-claim0-block1-hat-1.smt2", "phase2-claim0-block1-hat-2.smt2", "phase4-claim0-block8-snap-2.smt2"):
        weak = drop_first_assertion((out / name).read_text())  # the region goes: the group acts inside it
        solver = z3.Solver()
        solver.from_string(weak)
        assert str(solver.check()) == "sat" == smt.cvc5_answer(weak, 60), name


def test_cvc5_reads_only_one_query():
    pytest.importorskip("cvc5")
    assert smt.cvc5_answer("(set-logic QF_LRA)\n(check-sat)\n(check-sat)\n", 5).startswith("not one query")
    assert smt.cvc5_answer("(set-logic QF_LRA)\n(assert (frobnicate))\n", 5).startswith("not a query")


# ---------------------------------------------------------------- InfoFlow's proofs


def infoflow_proofs() -> list:
    from tfcert.infoflow import Architecture, builtin_target, min_heads, predict

    return [*predict(builtin_target("pairwise-min"), Architecture(16, heads=(1, 1))).proofs,
            *min_heads(builtin_target("intrinsic-dim:D=3"), 16, 2).proofs]


def test_infoflow_proofs_are_plain_smtlib():
    """The search's proofs open with their logic and hold no z3-only term (its at-most, which
    the head bounds use in the search), so any SMT-LIB2 solver reads them; z3 re-reads them unsat."""
    proofs = infoflow_proofs()
    assert any("heads in layer" in p.claim or "head(s) in layer" in p.claim for p in proofs)
    for p in proofs:
        assert p.smt2.startswith("(set-logic QF_LIRA)\n") and "at-most" not in p.smt2, p.claim
        solver = z3.Solver()
        solver.from_string(p.smt2)
        assert solver.check() == z3.unsat, p.claim


def test_cvc5_answers_infoflow_proofs_unsat():
    pytest.importorskip("cvc5")
    assert all(smt.cvc5_answer(p.smt2, 60) == "unsat" for p in infoflow_proofs())


# ---------------------------------------------------------------- infoflow check --emit-smt / --cross-check


def infoflow_witness(tmp_path: Path) -> Path:
    path = tmp_path / "w.json"
    assert main(["infoflow", "predict", "--target", "pairwise-min", "--T", "8", "--heads", "1",
                 "--witness", str(path)]) == 0
    return path


def test_infoflow_check_emits_the_queries_it_certifies(tmp_path, capsys):
    witness = infoflow_witness(tmp_path)
    out = tmp_path / "queries"
    capsys.readouterr()
    assert main(["infoflow", "check", str(witness), "--emit-smt", str(out), "--json"]) == 0
    certified = [c for c in json.loads(capsys.readouterr().out)["certified"] if c["smt2"] is not None]
    index = json.loads((out / smt.INDEX).read_text())
    jsonschema.validate(index, load_schema("smt-index"))
    assert [q["claim"] for q in index["queries"]] == [c["statement"] for c in certified] and certified
    assert [(out / q["file"]).read_text() for q in index["queries"]] == [c["smt2"] for c in certified]
    assert all(answer == expected == "unsat" for _, answer, expected in rerun(out, "z3"))
    assert main(["infoflow", "check", str(witness), "--emit-smt", str(out)]) == 2  # DIR not empty
    assert capsys.readouterr().err.startswith("error: --emit-smt: ")


def test_infoflow_check_cross_check_fails_on_a_disagreement(tmp_path, monkeypatch, capsys):
    witness = infoflow_witness(tmp_path)
    monkeypatch.setattr(smt, "cvc5_available", lambda: False)
    capsys.readouterr()
    assert main(["infoflow", "check", str(witness), "--cross-check", "cvc5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --cross-check cvc5: the cvc5 package is not installed")
    monkeypatch.setattr(smt, "cvc5_available", lambda: True)
    monkeypatch.setattr(smt, "cvc5_answer", lambda text, seconds: "sat")
    assert main(["infoflow", "check", str(witness), "--cross-check", "cvc5", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert not doc["valid"] and any(e.startswith("cross-check: z3 says unsat, cvc5 says sat: a counterexample to: ")
                                    for e in doc["errors"])


def test_infoflow_check_cross_check_with_cvc5(tmp_path, capsys):
    pytest.importorskip("cvc5")
    witness = infoflow_witness(tmp_path)
    assert main(["infoflow", "check", str(witness), "--cross-check", "cvc5"]) == 0
