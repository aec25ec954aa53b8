"""Progress off a terminal: a long run prints labelled phase lines on stderr
every interval (TFCERT_PROGRESS_INTERVAL), none with -q, and stdout stays JSON."""
from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import REPO

DEMO = REPO / "tfcert" / "examples" / "demo.json"


def construct(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    code = "import sys; from tfcert.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *flags, "construct", str(DEMO), "-o", str(tmp_path / "b"),
                           "--attention", "softmax", "--force", "--json"], capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "TFCERT_PROGRESS_INTERVAL": "0.01"})


def test_progress_lines_off_a_terminal_name_the_phase(tmp_path):
    proc = construct(tmp_path)
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)
    lines = proc.stderr.splitlines()
    assert lines and all(line.startswith("construct: ") for line in lines)
    assert all(any(f"{phase}: " in line for phase in ("building", "certifying", "verifying")) for line in lines)
    assert any("verifying: replay, block " in line and "/" in line for line in lines)


def test_quiet_prints_no_progress(tmp_path):
    proc = construct(tmp_path, "-q")
    assert proc.returncode == 0 and proc.stderr == ""


def test_docs_say_what_progress_does_off_a_terminal():
    """README said bars are drawn "only when it is a terminal" and the guide
    "never in pipes or CI logs", while off a terminal a long stage prints a line
    per TFCERT_PROGRESS_INTERVAL seconds: both pages name the variable and its
    default, and neither promises silence off a terminal."""
    from tfcert.progress import INTERVAL

    for page in ("README.md", "docs/guide.md"):
        text = " ".join((REPO / page).read_text().split())
        assert "TFCERT_PROGRESS_INTERVAL" in text, page
        assert f"default {INTERVAL:g}" in text, page
        assert "only when it is a terminal" not in text and "never in pipes" not in text, page
    guide = " ".join((REPO / "docs" / "guide.md").read_text().split())
    example = re.search(r"e\.g\. `(construct: [^`]+)`", guide).group(1)
    assert re.fullmatch(r"construct: (building|certifying|verifying): [a-z ,]+ \d+/\d+ \[\d+s\]", example)
