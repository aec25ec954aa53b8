"""Everyday use of the command line: --version, help on every option, docs
that stand alone, bundle folders, '-' for stdin, files in the wrong slot,
nulls named as nulls, no silent overwrite, one JSON style, JUnit times,
progress only on a terminal, and the pictures."""
from __future__ import annotations

import argparse
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from conftest import REPO, run

from tfcert.cli.main import build_parser, main
from tfcert.report import json_text

DEMO = REPO / "tfcert" / "examples" / "demo.json"
CERTS = REPO / "certificates"
HARDMAX = CERTS / "demo-hardmax"
PNG = b"\x89PNG\r\n\x1a\n"


def explicit(folder: Path) -> list:
    return ["--model", folder / "model.json", "--dataset", folder / "dataset.json",
            "--certificate", folder / "certificate.json"]


# ---------------------------------------------------------------- version, help, docs

def test_version_comes_from_the_installed_metadata(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"tfcert {version('tfcert')}"
    import tfcert

    assert tfcert.__version__ == version("tfcert")


def parsers(parser: argparse.ArgumentParser, name: str = "tfcert"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(sub, f"{name} {sub_name}")


def test_every_option_has_help():
    missing = [f"{name} {'/'.join(a.option_strings) or a.dest}"
               for name, p in parsers(build_parser()) for a in p._actions
               if not isinstance(a, argparse._SubParsersAction) and not (a.help and a.help.strip())]
    assert missing == []


STANDALONE = re.compile(r"\bDESIGN\b|INFOFLOW\.md|STYLE\.md|(?i:design notes?|seed 00\d|the seed's|seed is a summary)")


def test_docs_and_help_stand_alone():
    """No pointers to notes outside the repository; the papers are cited instead."""
    docs = [REPO / "README.md", CERTS / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    bad = [f"{p.relative_to(REPO)}:{i}: {line.strip()}" for p in docs
           for i, line in enumerate(p.read_text().splitlines(), 1) if STANDALONE.search(line)]
    helps = [p.format_help() for _, p in parsers(build_parser())]
    bad += [f"--help: {m.group(0)}" for text in helps for m in [STANDALONE.search(text)] if m]
    assert bad == []
    text = "\n".join(p.read_text() for p in docs)
    assert "2502.02270" in text and "2605.17930" in text


def test_readme_set_up_commands_tour_and_guide():
    readme = (REPO / "README.md").read_text()
    assert "```sh\npip install . && tfcert demo\n```" in readme
    assert "```sh\npip install -e '.[test]' && python -m pytest\n```" in readme
    assert "## 30-second tour" in readme and "(docs/guide.md)" in readme and "(docs/api.md)" in readme
    assert "## 30-second tour" in (REPO / "docs" / "guide.md").read_text()


def _block(text: str, heading: str, lang: str) -> str:
    """The first ```lang block after ``heading``."""
    return text.split(heading, 1)[1].split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def test_readme_puts_the_basics_first():
    """construct, verify, audit, check and the pytest plugin under "Command line"; experiments,
    bench, export and InfoFlow after it, under "Beyond the basics"."""
    readme = (REPO / "README.md").read_text()
    basics = _block(readme, "## Command line", "sh")
    for command in ("tfcert construct", "tfcert verify", "tfcert audit", "tfcert check", "pytest --tfcert"):
        assert command in basics
    assert readme.index("## Command line") < readme.index("## Beyond the basics")
    more = _block(readme, "## Beyond the basics", "sh")
    for command in ("tfcert experiment", "tfcert bench", "tfcert export", "tfcert infoflow"):
        assert command not in basics and command in more


@pytest.mark.slow
@pytest.mark.parametrize("page", ["README.md", "docs/guide.md"])
def test_the_tours_run_twice(page, tmp_path, monkeypatch, capsys):
    """Every command of a page's 30-second tour, and its Python, run in a fresh folder; then
    all of it again (a second run must not stop at the bundle the first one wrote)."""
    text = (REPO / page).read_text()
    lines = _block(text, "## 30-second tour", "sh").splitlines()
    code = _block(text, "## 30-second tour", "python")
    (tmp_path / "tfcert" / "examples").mkdir(parents=True)
    shutil.copy(DEMO, tmp_path / "tfcert" / "examples")
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        for line in lines:
            argv = shlex.split(line.split("&&")[-1], comments=True)  # `pip install . && tfcert demo`: installed
            if argv[0] == "tfcert":
                assert main(argv[1:]) == 0, (line, capsys.readouterr().err)
            else:
                assert argv[:3] == ["python", "-m", "pytest"], line
                run = subprocess.run([sys.executable, *argv[1:], "-p", "no:cacheprovider"], capture_output=True,
                                     text=True, timeout=600)
                assert run.returncode == 0, run.stdout[-2000:]
        exec(code, {})


def test_experiments_install_line_matches_the_readme():
    readme = (REPO / "README.md").read_text()
    line = next(l for l in (REPO / "docs" / "experiments.md").read_text().splitlines() if "pip install" in l)
    assert "'.[experiments]'" in line and "'.[experiments]'" in readme and "tfcert[experiments]" not in line


# ---------------------------------------------------------------- bundle folders, stdin, wrong slots

def test_verify_and_audit_take_a_bundle_folder(capsys):
    by_folder = run(["verify", HARDMAX, "--json"], capsys)
    by_flags = run(["verify", *explicit(HARDMAX), "--json"], capsys)
    assert by_folder[0] == 0 and json.loads(by_folder[1])["claims"] == json.loads(by_flags[1])["claims"]
    rc, out, _ = run(["audit", HARDMAX, "--json"], capsys)
    assert rc == 0 and json.loads(out)["interpolates"] is True


def test_flags_override_the_folder(tmp_path, capsys):
    cert = json.loads((HARDMAX / "certificate.json").read_text())
    cert["model_sha256"] = "0" * 64
    other = tmp_path / "cert.json"
    other.write_text(json.dumps(cert))
    rc, out, _ = run(["verify", HARDMAX, "--certificate", other, "--json"], capsys)
    assert rc == 1 and [r["kind"] for r in json.loads(out)["results"] if not r["ok"]] == ["model_sha256"]


def test_not_a_bundle_folder(tmp_path, capsys):
    rc, out, err = run(["verify", tmp_path], capsys)
    assert rc == 2 and out == "" and err.startswith(f"error: {tmp_path}: not a bundle folder")
    assert "model.json is missing" in err
    rc, _, err = run(["verify"], capsys)
    assert rc == 2 and "give a bundle folder" in err


def test_stdin(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((HARDMAX / "certificate.json").read_bytes())))
    rc, out, _ = run(["verify", HARDMAX, "--certificate", "-", "--json"], capsys)
    assert rc == 0 and json.loads(out)["ok"] is True
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(DEMO.read_bytes())))
    rc, _, err = run(["construct", "-", "-o", tmp_path / "b"], capsys)
    assert rc == 0, err
    assert (tmp_path / "b" / "dataset.json").read_bytes() == DEMO.read_bytes()
    rc, _, err = run(["verify", "--model", "-", "--dataset", "-", "--certificate", "x"], capsys)
    assert rc == 2 and "only one file can come from stdin" in err


@pytest.mark.parametrize("slot, given, kind", [("--model", "dataset.json", "dataset"),
                                              ("--dataset", "certificate.json", "certificate"),
                                              ("--certificate", "model.json", "model")])
def test_a_file_in_the_wrong_slot_is_named(slot, given, kind, capsys):
    argv = ["verify", HARDMAX, slot, HARDMAX / given]
    rc, out, err = run(argv, capsys)
    expected = slot.lstrip("-")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"this is a {kind} (tfcert.{kind}/1), expected a {expected} (tfcert.{expected}/1)" in err


def test_null_is_reported_as_null(tmp_path, capsys):
    data = json.loads(DEMO.read_text())
    data["pairs"][0]["input"][0][1] = None
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(data))
    rc, _, err = run(["construct", path, "-o", tmp_path / "o"], capsys)
    assert rc == 2 and err.strip().endswith("$.pairs[0].input[0][1]: expected a number, got null")
    assert "NoneType" not in err
    data["format"] = None
    path.write_text(json.dumps(data))
    rc, _, err = run(["construct", path, "-o", tmp_path / "o"], capsys)
    assert rc == 2 and err.strip().endswith("$.format: expected 'tfcert.dataset/1', got null")


# ---------------------------------------------------------------- overwriting

def test_construct_refuses_to_replace_a_bundle(tmp_path, capsys):
    out_dir = tmp_path / "b"
    assert run(["construct", DEMO, "-o", out_dir], capsys)[0] == 0
    before = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    (out_dir / "model.json").write_text("{}")  # a change that --force would undo
    rc, out, err = run(["construct", DEMO, "-o", out_dir, "--attention", "softmax"], capsys)
    assert rc == 2 and out == "" and "already holds a bundle" in err and "--force" in err
    assert (out_dir / "model.json").read_text() == "{}"
    assert run(["construct", DEMO, "-o", out_dir, "--force"], capsys)[0] == 0
    assert {p.name: p.read_bytes() for p in out_dir.iterdir()} == before


@pytest.mark.slow
def test_force_replaces_the_bundle_folder_whole(tmp_path, capsys):
    """The pictures of the bundle --force replaces go with it: the folder then holds only
    what this construct wrote."""
    out_dir = tmp_path / "b"
    assert run(["construct", DEMO, "-o", out_dir], capsys)[0] == 0
    assert run(["plot", out_dir], capsys)[0] == 0
    assert {p.name for p in out_dir.iterdir()} >= {"phases.png", "profile.png"}
    assert run(["construct", DEMO, "-o", out_dir, "--force"], capsys)[0] == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["certificate.json", "dataset.json", "model.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]  # no temporary or old folder left


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("with_bundle", [False, True])
def test_construct_never_replaces_a_folder_holding_other_files(tmp_path, capsys, force, with_bundle):
    """A folder holding a file tfcert did not write is refused, with or without --force, and
    left as it was: construct never deletes a user's file, nor mixes a bundle into a folder."""
    out_dir = tmp_path / "mine"
    if with_bundle:
        assert run(["construct", DEMO, "-o", out_dir], capsys)[0] == 0
    out_dir.mkdir(exist_ok=True)
    (out_dir / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    rc, out, err = run(["construct", DEMO, "-o", out_dir, *(["--force"] if force else [])], capsys)
    assert rc == 2 and out == ""
    assert err.splitlines() == [f"error: {out_dir}: holds notes.txt, which tfcert did not write; a bundle is "
                                "written to a new or empty folder, or replaces a folder holding only a bundle "
                                "and its pictures"]
    assert {p.name: p.read_bytes() for p in out_dir.iterdir()} == before


def test_construct_into_an_empty_folder(tmp_path, capsys):
    assert run(["construct", DEMO, "-o", tmp_path], capsys)[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["certificate.json", "dataset.json", "model.json"]


def test_construct_says_which_float_runs_are_certified_and_why_not_the_others(tmp_path, capsys):
    """One line per format: the bound of the claim, or the layer where the analysis stopped — a
    user who needs float32 learns it from construct, not by reading the certificate."""
    rc, out, _ = run(["construct", REPO / "tfcert" / "examples" / "random-d20.json", "-o", tmp_path,
                      "--width", "12"], capsys)
    lines = [line for line in out.splitlines() if line.startswith("float ")]
    assert rc == 0 and [line.split(":")[0] for line in lines] == [
        "float binary64", "float binary32", "float binary16", "float bfloat16"]
    assert lines[0].startswith("float binary64: every output within ")
    assert lines[1].startswith("float binary32: every output within ")
    assert re.match(r"float binary16: no claim: block \d+ (FF|SA): ", lines[2])
    cert = json.loads((tmp_path / "certificate.json").read_text())
    claimed = {c["format"] for ph in cert["phases"] for c in ph["claims"] if c["kind"] == "float"}
    assert claimed == {line.split()[1][:-1] for line in lines if "no claim" not in line} == {"binary64", "binary32"}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["construct", "plot"])
def test_an_output_folder_below_a_file_is_named(tmp_path, capsys, command):
    """-o afile/sub: the file in the way is named, where mkdir said only "File exists"."""
    afile = tmp_path / "afile"
    afile.write_text("")
    argv = ["construct", DEMO] if command == "construct" else ["plot", HARDMAX]
    rc, out, err = run([*argv, "-o", afile / "sub"], capsys)
    assert rc == 2 and out == ""
    assert err.splitlines() == [f"error: {afile / 'sub'}: {afile} is a file, not a folder"]
    rc, _, err = run([*argv, "-o", afile], capsys)
    assert rc == 2 and err.splitlines() == [f"error: {afile}: is a file, not a folder"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_gitignore_covers_the_demo_folder():
    assert "/tfcert-demo/" in (REPO / ".gitignore").read_text().split()


# ---------------------------------------------------------------- output style

@pytest.mark.parametrize("argv", [["verify", HARDMAX, "--json"], ["audit", HARDMAX, "--json"],
                                  ["check", CERTS / "demo-hardmax", "--json"],
                                  ["infoflow", "predict", "--target", "pairwise-min", "--T", "4", "--heads", "1,1",
                                   "--json"]])
def test_one_json_style(argv, capsys):
    rc, out, _ = run(argv, capsys)
    assert rc == 0 and out == json_text(json.loads(out)) + "\n"


def test_junit_testcases_have_times(tmp_path, capsys):
    xml = tmp_path / "junit.xml"
    assert run(["verify", HARDMAX, "--junit", xml], capsys)[0] == 0
    suite = ET.parse(xml).getroot()
    cases = suite.findall("testcase")
    assert cases and all(float(c.get("time")) >= 0 for c in cases)
    assert float(suite.get("time")) == pytest.approx(sum(float(c.get("time")) for c in cases), abs=1e-3)


# ---------------------------------------------------------------- progress

def test_no_progress_unless_stderr_is_a_terminal(capsys):
    rc, _, err = run(["verify", HARDMAX], capsys)
    assert rc == 0 and err == ""


def test_progress_on_a_terminal_and_quiet(monkeypatch):
    from tfcert import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for quiet, shown in ((False, True), (True, False)):
        fake = Tty()
        monkeypatch.setattr(sys, "stderr", fake)
        monkeypatch.setattr(sys, "stdout", io.StringIO())
        argv = ["-q"] if quiet else []
        assert main([*argv, "audit", str(CERTS / "demo-softmax")]) == 0
        assert ("bisecting tau" in fake.getvalue()) is shown
        assert "audit" not in sys.stdout.getvalue().splitlines()[0]
    progress.set_quiet(False)


# ---------------------------------------------------------------- pictures

@pytest.mark.slow
def test_plot_d2_and_high_d(tmp_path, capsys):
    rc, out, _ = run(["plot", HARDMAX, "-o", tmp_path / "h", "--json"], capsys)
    files = json.loads(out)["files"]
    assert rc == 0 and set(files) == {"phases", "profile"}
    assert all(Path(f).read_bytes()[:8] == PNG for f in files.values())
    rc, out, _ = run(["plot", CERTS / "random-d20-wide", "-o", tmp_path / "w", "--json"], capsys)
    assert rc == 0 and set(json.loads(out)["files"]) == {"profile"}  # d = 20: no token picture


@pytest.mark.slow
def test_plot_reads_phases_from_the_certificate(tmp_path, capsys):
    """Phase names and block ranges come from the file: renamed phases are drawn under their new names."""
    from tfcert.cli.plot import PhaseSpan, snapshot_ends

    folder = tmp_path / "b"
    shutil.copytree(HARDMAX, folder)
    assert snapshot_ends([PhaseSpan("a", 0, 3), PhaseSpan("b", 2, 3), PhaseSpan("c", 3, 5),
                          PhaseSpan("all", 0, 5)], 5) == {3: "after a + b", 5: "after c"}
    assert snapshot_ends([PhaseSpan("audit", 0, 5)], 5) == {5: "after audit"}
    assert run(["plot", folder, "--json"], capsys)[0] == 0
    assert (folder / "phases.png").is_file()


def test_plot_of_an_audit_certificate(tmp_path, capsys):
    folder = tmp_path / "a"
    shutil.copytree(HARDMAX, folder)
    assert run(["audit", folder, "-o", folder / "certificate.json"], capsys)[0] == 0
    assert run(["plot", folder], capsys)[0] == 0


@pytest.mark.slow
def test_bench_draws_its_plots(tmp_path, capsys):
    rc, out, _ = run(["bench", "--quick", "--json", "--out", tmp_path], capsys)
    files = json.loads(out)["files"]
    assert rc == 0 and all(Path(files[k]).read_bytes()[:8] == PNG for k in ("scaling", "width"))


@pytest.mark.slow
def test_plots_render_headless(tmp_path):
    """A child without any display, as CI runs it."""
    code = f"import sys; from tfcert.cli.main import main; sys.exit(main(['plot', {str(HARDMAX)!r}, '-o', {str(tmp_path)!r}]))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "MPLBACKEND": ""})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "profile.png").read_bytes()[:8] == PNG
