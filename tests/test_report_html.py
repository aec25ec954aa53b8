"""``tfcert report``: one self-contained HTML page of a bundle — verdict, phases and claims with margins,
float bounds, pictures inline — with verify's exit codes; and the page in a real headless browser."""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from flint import fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from tfcert.cli.htmlreport import number
from tfcert.cli.main import main

BUNDLE = REPO / "certificates" / "equal-means-hardmax"
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](?!data:|#)|<link\b|url\(|@import""", re.I)


def _copy(tmp_path: Path, name: str = "bundle") -> Path:
    folder = tmp_path / name
    shutil.copytree(BUNDLE, folder)
    return folder


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The page of a bundle that verifies, written twice (rc, stdout, text, bytes of the second run)."""
    tmp = tmp_path_factory.mktemp("report")
    out, again = tmp / "report.html", tmp / "again.html"
    rc = main(["report", str(BUNDLE), "-o", str(out), "-q"])
    main(["report", str(BUNDLE), "-o", str(again), "-q"])
    return rc, out, out.read_text(encoding="utf-8"), again.read_bytes()


@pytest.mark.slow
def test_report_of_a_bundle_that_verifies(written, capsys):
    rc, out, text, again = written
    assert rc == 0
    assert out.read_bytes() == again  # deterministic
    assert 'id="verdict" class="verdict holds">VERIFIED: all ' in text
    assert not EXTERNAL.search(text), EXTERNAL.search(text)  # nothing fetched
    cert = json.loads((BUNDLE / "certificate.json").read_text())
    for phase in cert["phases"]:
        assert f'id="phase-{html.escape(phase["name"])}"' in text
    claims = [c for p in cert["phases"] for c in p["claims"]]
    floats = sum(c["kind"] == "float" for c in claims)
    assert text.count('<tr class="holds">') == len(claims) + 2 + floats  # the sha256 checks, the float table
    assert text.count('<tr class="fails">') == 0
    assert text.count("data:image/png;base64,") == 2  # phases (d = 2) and profile
    bound = next(c["bound"] for p in cert["phases"] for c in p["claims"] if c["kind"] == "float")
    assert f'title="{bound}"' in text  # the exact bound behind its decimal approximation
    hat = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "hat")
    assert "isolation margin" in text and html.escape(hat["margin"]) in text


@pytest.mark.slow
def test_report_of_a_failing_certificate_shows_the_failure(tmp_path, capsys):
    """A hat claiming a larger margin than the model keeps: exit 1, and the page is still written."""
    folder = _copy(tmp_path)
    cert = json.loads((folder / "certificate.json").read_text())
    hat = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "hat")
    hat["margin"] = "1000"
    (folder / "certificate.json").write_text(json.dumps(cert))
    out = tmp_path / "report.html"
    assert main(["report", str(folder), "-o", str(out), "-q"]) == 1
    assert "1 claim(s) FAIL" in capsys.readouterr().out
    text = out.read_text(encoding="utf-8")
    assert 'class="verdict fails">NOT VERIFIED: 1 of ' in text
    assert text.count('<tr class="fails">') == 1 and "FAILS" in text
    assert 'isolation margin <span class="exact">1000</span>' in text


@pytest.mark.parametrize("content, message", [(b"{", "malformed JSON"),
                                              (b'{"format": "tfcert.certificate/1"}', "certificate.json")])
def test_report_bad_input_writes_nothing(tmp_path, capsys, content, message):
    folder = _copy(tmp_path)
    (folder / "certificate.json").write_bytes(content)
    out = tmp_path / "report.html"
    assert main(["report", str(folder), "-o", str(out), "-q"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not out.exists()


def test_report_refuses_to_overwrite_an_input(tmp_path, capsys):
    folder = _copy(tmp_path)
    before = (folder / "model.json").read_bytes()
    assert main(["report", str(folder), "-o", str(folder / "model.json"), "-q"]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert (folder / "model.json").read_bytes() == before


@settings(max_examples=200, deadline=None)
@given(st.integers(-10 ** 60, 10 ** 60), st.integers(1, 10 ** 60))
def test_numbers_keep_their_exact_value(p, q):
    """Short rationals are shown as they are; long ones as a decimal whose title is the exact value."""
    x = fmpq(p, q)
    shown = number(x)
    exact = re.search(r'title="([^"]*)"', shown)
    if len(str(x)) <= 14:
        assert exact is None and html.unescape(re.sub(r"<[^>]+>", "", shown)) == str(x)
    else:
        assert Fraction(html.unescape(exact.group(1))) == Fraction(p, q) and "≈" in shown


# ---------------------------------------------------------------- a real browser

def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "chromium-headless-shell", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.slow
def test_page_loads_in_headless_chromium(written, tmp_path):
    """The page loads in a browser with scripts on: its script ran (a DOM marker), no console error, the
    verdict and the pictures are in the rendered DOM."""
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium binary")
    _, out, _, _ = written
    run = subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr",
                          "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    assert 'data-script="ran"' in dom
    assert "VERIFIED: all " in dom and dom.count("<img ") == 2
    assert "Uncaught" not in run.stderr and "CONSOLE" not in run.stderr, run.stderr[-2000:]
