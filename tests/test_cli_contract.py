"""The command-line contract: one JSON document for --json,
JUnit XML for CI, the verdict line, demo, determinism of construct, --width,
a quiet exit when stdout's reader goes away and one error line when stdout cannot be written."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from conftest import REPO, run

from tfcert.cli.main import main

DEMO = REPO / "tfcert" / "examples" / "demo.json"
FILES = ("dataset.json", "model.json", "certificate.json")


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "demo"
    assert main(["construct", str(DEMO), "-o", str(out)]) == 0
    return out


def verify_argv(d: Path, cert: Path | None = None) -> list:
    return ["verify", "--model", d / "model.json", "--dataset", d / "dataset.json",
            "--certificate", cert or d / "certificate.json"]


@pytest.fixture(scope="module")
def failing_cert(bundle_dir, tmp_path_factory) -> tuple[Path, int]:
    """The demo certificate with two claims wrong: a hat margin and a cluster count."""
    cert = json.loads((bundle_dir / "certificate.json").read_text())
    hat = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "hat")
    hat["margin"] = "12345"
    clusters = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "clusters")
    clusters["distinct"][0] += 1
    path = tmp_path_factory.mktemp("bad") / "certificate.json"
    path.write_text(json.dumps(cert))
    return path, 2


# ---------------------------------------------------------------- verify outputs

def test_verify_json_is_one_document(bundle_dir, capsys):
    rc, out, err = run([*verify_argv(bundle_dir), "--json"], capsys)
    assert rc == 0 and err == ""
    doc = json.loads(out)  # the whole of stdout
    assert doc["ok"] is True and doc["failed"] == 0
    assert doc["claims"] == len(doc["results"]) > 2
    kinds = {r["kind"] for r in doc["results"]}
    assert {"model_sha256", "dataset_sha256", "uniform_attention", "separation", "hat", "argmax", "clusters",
            "exact", "size"} <= kinds
    assert all(r["ok"] and r["failures"] == [] for r in doc["results"])


def test_verify_json_failing(bundle_dir, failing_cert, capsys):
    cert, n_bad = failing_cert
    rc, out, err = run([*verify_argv(bundle_dir, cert), "--json"], capsys)
    doc = json.loads(out)
    # the hash of the certificate is not checked; the model and dataset are untouched
    assert rc == 1 and doc["ok"] is False and doc["failed"] == n_bad
    bad = [r for r in doc["results"] if not r["ok"]]
    assert sorted(r["kind"] for r in bad) == ["clusters", "hat"]
    assert all(r["failures"] and "stated" in r["failures"][0] for r in bad)


def test_junit_passing(bundle_dir, tmp_path, capsys):
    xml = tmp_path / "junit.xml"
    rc, out, _ = run([*verify_argv(bundle_dir), "--json", "--junit", xml], capsys)
    assert rc == 0
    doc = json.loads(out)  # --junit does not disturb the JSON document
    root = ET.parse(xml).getroot()
    assert root.tag == "testsuite"
    cases = root.findall("testcase")
    assert len(cases) == doc["claims"] == int(root.get("tests"))
    assert root.get("failures") == "0" and root.findall(".//failure") == []
    assert len({(c.get("classname"), c.get("name")) for c in cases}) == len(cases)  # names tell claims apart


def test_junit_names_unique_when_hats_share_a_block(tmp_path, capsys):
    """--width 12 puts several hats in one FF layer: their testcases must
    still have distinct names (CI tools merge equal ones)."""
    out_dir = tmp_path / "w12"
    assert run(["construct", DEMO, "-o", out_dir, "--width", "12"], capsys)[0] == 0
    xml = tmp_path / "junit.xml"
    rc, out, _ = run([*verify_argv(out_dir), "--json", "--junit", xml], capsys)
    assert rc == 0
    cases = ET.parse(xml).getroot().findall("testcase")
    blocks = [r["block"] for r in json.loads(out)["results"] if r["kind"] == "hat"]
    assert len(blocks) > len(set(blocks))  # the situation under test
    assert len({(c.get("classname"), c.get("name")) for c in cases}) == len(cases) == json.loads(out)["claims"]


def test_junit_failing(bundle_dir, failing_cert, tmp_path, capsys):
    cert, n_bad = failing_cert
    xml = tmp_path / "junit.xml"
    rc, out, _ = run([*verify_argv(bundle_dir, cert), "--junit", xml], capsys)
    assert rc == 1
    root = ET.parse(xml).getroot()
    cases = root.findall("testcase")
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == n_bad == int(root.get("failures"))
    assert int(root.get("tests")) == len(cases)
    names = sorted(c.get("name") for c in failed)
    assert names[0].startswith("collapse/clusters/block ") and names[1].startswith("leaders/hat/block 1")
    for c in failed:
        f = c.find("failure")
        assert f.get("message") and "stated" in f.get("message") and f.text


def test_human_verdict_line(bundle_dir, failing_cert, capsys):
    rc, out, _ = run(verify_argv(bundle_dir), capsys)
    n = json.loads(run([*verify_argv(bundle_dir), "--json"], capsys)[1])["claims"]
    assert rc == 0 and out.rstrip("\n").splitlines()[-1] == f"{n} claims checked: all claims hold"
    cert, n_bad = failing_cert
    rc, out, _ = run(verify_argv(bundle_dir, cert), capsys)
    lines = out.rstrip("\n").splitlines()
    assert rc == 1 and lines[-1] == f"{n} claims checked: {n_bad} claim(s) FAIL"
    fails = [l for l in lines if l.startswith("FAIL ")]
    assert len(fails) == n_bad
    assert any("hat" in l and "margin: stated 12345" in l for l in fails)


# ---------------------------------------------------------------- demo

@pytest.mark.slow
def test_demo_hardmax(tmp_path, capsys):
    out_dir = tmp_path / "demo"
    rc, out, err = run(["demo", "-o", out_dir], capsys)
    assert rc == 0, err
    png = (out_dir / "phases.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert all((out_dir / f).is_file() for f in FILES)
    assert (out_dir / "dataset.json").read_bytes() == DEMO.read_bytes()
    assert "all claims hold" in out
    assert run(verify_argv(out_dir), capsys)[0] == 0


# ---------------------------------------------------------------- construct: determinism and width

def construct_in_process(out_dir: Path, capsys, *extra) -> int:
    return run(["construct", DEMO, "-o", out_dir, *extra], capsys)[0]


@pytest.mark.slow
def test_construct_is_deterministic_across_processes(tmp_path, bundle_dir):
    """Byte-identical model and certificate from separate processes with
    different hash seeds (set iteration order must not leak into the files)."""
    digests = []
    for seed in ("1", "2"):
        out_dir = tmp_path / f"run{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-m", "tfcert", "construct", str(DEMO), "-o", str(out_dir)],
                              capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        assert (out_dir / "dataset.json").read_bytes() == DEMO.read_bytes()
        digests.append({f: hashlib.sha256((out_dir / f).read_bytes()).hexdigest() for f in FILES})
    in_process = {f: hashlib.sha256((bundle_dir / f).read_bytes()).hexdigest() for f in FILES}
    assert digests[0] == digests[1] == in_process


def test_construct_twice_same_bytes(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert construct_in_process(a, capsys) == 0 and construct_in_process(b, capsys) == 0
    for f in FILES:
        assert (a / f).read_bytes() == (b / f).read_bytes()
    # the certificate names exactly these bytes
    cert = json.loads((a / "certificate.json").read_text())
    assert cert["model_sha256"] == hashlib.sha256((a / "model.json").read_bytes()).hexdigest()
    assert cert["dataset_sha256"] == hashlib.sha256(DEMO.read_bytes()).hexdigest()


def test_width_packs_hats(tmp_path, capsys):
    sizes = {}
    for width in (4, 12):
        out_dir = tmp_path / f"w{width}"
        rc, out, err = run(["construct", DEMO, "-o", out_dir, "--width", width, "--json"], capsys)
        assert rc == 0, err
        sizes[width] = json.loads(out)["size"]
        model = json.loads((out_dir / "model.json").read_text())
        assert len(model["blocks"]) == sizes[width]["blocks"]
        assert max(len(b["ff"]["U"]) for b in model["blocks"]) == sizes[width]["width"] <= width
        assert run(verify_argv(out_dir), capsys)[0] == 0
    assert sizes[12]["blocks"] < sizes[4]["blocks"]
    assert sizes[12]["width"] > sizes[4]["width"]


def test_width_two_is_an_error(tmp_path, capsys):
    rc, out, err = run(["construct", DEMO, "-o", tmp_path / "o", "--width", "2"], capsys)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and err.startswith("error: --width")
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- closed pipe

@pytest.mark.parametrize("command", ["verify", "audit"])
def test_closed_stdout_is_quiet(bundle_dir, command):
    """`tfcert verify --json | head -c 0`: the reader is gone before anything is
    written. No traceback, no "Exception ignored", an exit code that is not
    one of the verdicts (141 = 128 + SIGPIPE, as a shell reports it)."""
    argv = verify_argv(bundle_dir) if command == "verify" else [
        "audit", "--model", bundle_dir / "model.json", "--dataset", bundle_dir / "dataset.json"]
    proc = subprocess.Popen([sys.executable, "-m", "tfcert", *map(str, argv), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the child has imported anything
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 141
    assert err == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["verify --json", "verify", "construct"])
def test_full_stdout_is_one_error_line(bundle_dir, tmp_path, command):
    """`tfcert verify --json > /dev/full`: every write to stdout fails with ENOSPC. The output
    is lost, so the run cannot report its verdict: one error line and exit 2, no traceback."""
    argv = (["construct", DEMO, "-o", tmp_path / "out"] if command == "construct"
            else [*verify_argv(bundle_dir), *command.split()[1:]])
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "tfcert", *map(str, argv)], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: stdout: cannot write the output: No space left on device"]


def test_pipe_into_head(bundle_dir):
    """Through a real shell pipeline with a reader that stops early."""
    argv = " ".join(f"'{a}'" for a in map(str, verify_argv(bundle_dir)))
    script = f"{sys.executable} -m tfcert {argv} --json | head -c 1; echo; echo status=${{PIPESTATUS[0]}} >&2"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
    status = int(proc.stderr.strip().rsplit("status=", 1)[1])
    assert status in (0, 141)  # 0 when the whole document fit in the pipe before head exited
