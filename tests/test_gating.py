"""The CI gate documented in docs/ci/: the GitHub Actions workflow's command
lines and the pre-commit hook's entry, run on a temporary git repository
holding bundles — they pass on good bundles and fail on a corrupted one."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from conftest import REPO

CI = REPO / "docs" / "ci"
HARDMAX = REPO / "certificates" / "demo-hardmax"


def workflow_commands() -> list[str]:
    """The workflow's ``run:`` lines, less the installation (tfcert is installed here)."""
    runs = re.findall(r"^\s*run:\s*(.+)$", (CI / "tfcert.yml").read_text(), re.MULTILINE)
    return [r.strip() for r in runs if "pip install" not in r]


def hook_command() -> str:
    text = (CI / "pre-commit-config.yaml").read_text()
    assert re.search(r"^\s*pass_filenames:\s*false\s*$", text, re.MULTILINE)
    assert re.search(r"^\s*language:\s*system\s*$", text, re.MULTILINE)
    return re.search(r"^\s*entry:\s*(.+)$", text, re.MULTILINE).group(1).strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(HARDMAX, root / "models" / "demo")
    shutil.copytree(REPO / "certificates" / "demo-softmax", root / "models" / "soft")
    (root / "README.md").write_text("a project gated on its bundles\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "bundles"]):
        subprocess.run(["git", *argv], cwd=root, check=True, env=env, capture_output=True)
    return root


def install_command() -> str:
    """The workflow's one ``pip install`` line."""
    runs = re.findall(r"^\s*run:\s*(.+)$", (CI / "tfcert.yml").read_text(), re.MULTILINE)
    [command] = [r.strip() for r in runs if "pip install" in r]
    return command


def sh(command: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, **(env or {})}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def corrupt(folder: Path) -> None:
    cert = json.loads((folder / "certificate.json").read_text())
    hat = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "hat")
    hat["margin"] = "12345"
    (folder / "certificate.json").write_text(json.dumps(cert))


@pytest.mark.slow
def test_workflow_gates_a_repository(repo):
    commands = workflow_commands()
    assert commands and any(c.startswith("tfcert check") for c in commands)
    for command in commands:
        proc = sh(command, repo)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    suites = ET.parse(repo / "tfcert-junit.xml").getroot()
    assert suites.get("failures") == "0" and len(suites.findall("testsuite")) == 2
    corrupt(repo / "models" / "demo")
    results = [sh(c, repo) for c in commands]
    assert any(p.returncode == 1 for p in results)
    suites = ET.parse(repo / "tfcert-junit.xml").getroot()
    failed = [c.get("name") for c in suites.iter("testcase") if c.find("failure") is not None]
    assert suites.get("failures") == "1" and failed == ["leaders/hat/block 1"]


@pytest.mark.slow
def test_pre_commit_hook_gates_a_repository(repo):
    command = hook_command()
    proc = sh(command, repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 bundle(s): all verify" in proc.stdout
    corrupt(repo / "models" / "soft")
    proc = sh(command, repo)
    assert proc.returncode == 1 and "FAIL models/soft" in proc.stdout and "margin: stated 12345" in proc.stdout


def test_check_without_bundles_is_an_input_error(tmp_path):
    proc = sh("tfcert check", tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "no bundle folders" in proc.stderr


def failing_copy(dst: Path) -> None:
    shutil.copytree(HARDMAX, dst)
    corrupt(dst)


def test_check_refuses_an_incomplete_bundle(tmp_path):
    """A bundle that lost its dataset.json must not drop out of the gate: one error line, exit 2."""
    shutil.copytree(HARDMAX, tmp_path / "good")
    failing_copy(tmp_path / "broken")
    (tmp_path / "broken" / "dataset.json").unlink()
    proc = sh("tfcert check", tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "broken: holds certificate.json but no dataset.json" in proc.stderr


def test_check_follows_symlinked_folders_once(tmp_path):
    """A bundle reached through a symlinked folder is below ROOT; a symlink
    back up the tree neither loops nor checks a bundle twice."""
    (tmp_path / "repo").mkdir()
    shutil.copytree(HARDMAX, tmp_path / "repo" / "good")
    failing_copy(tmp_path / "shared" / "bad")
    os.symlink(tmp_path / "shared", tmp_path / "repo" / "vendored")
    os.symlink(tmp_path / "repo", tmp_path / "repo" / "good" / "loop")
    proc = sh("tfcert check --json", tmp_path / "repo")
    assert proc.returncode == 1, proc.stderr
    paths = [b["path"] for b in json.loads(proc.stdout)["bundles"]]
    assert len(paths) == 2 and paths[1].endswith("vendored/bad"), paths


def source_repository(root: Path) -> str:
    """A git repository at ``root`` holding this project's source, as a user
    pins it in the workflow; returns its commit."""
    pyproject = (REPO / "pyproject.toml").read_text()
    folders = set(re.findall(r'"tfcert(?:\.\w+)?" = "(\w+)"', pyproject))
    assert {"tfcert", "verify", "construct"} <= folders
    root.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, root / name)
    for folder in folders:
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "tfcert"]):
        subprocess.run(["git", *argv], cwd=root, check=True, env=env, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True,
                          text=True).stdout.strip()


def minimum_version(requirements: str, name: str) -> tuple[int, ...] | None:
    """The ``>=`` bound on ``name`` in a TOML list of requirement strings, or None."""
    match = re.search(rf'"{re.escape(name)}\s*>=\s*([0-9][0-9.]*)"', requirements)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def pyproject_list(key: str) -> str:
    """The one-line TOML list assigned to ``key`` in pyproject.toml."""
    text = (REPO / "pyproject.toml").read_text()
    return re.search(rf"^{re.escape(key)}\s*=\s*(\[.*\])\s*$", text, re.MULTILINE).group(1)


# setuptools 70.1 ships the bdist_wheel command; older ones need the `wheel` package to build one.
BDIST_WHEEL_IN_SETUPTOOLS = (70, 1)


def test_the_test_extra_holds_what_the_offline_build_needs():
    """The pinned-source test builds tfcert offline without build isolation,
    so with the test environment's own setuptools. A fresh venv made per
    README (Python 3.11) holds setuptools 65.5 and no `wheel`: the build
    died with ``invalid command 'bdist_wheel'``. The test extra asks for a
    setuptools that builds wheels itself and meets [build-system]."""
    wanted = minimum_version(pyproject_list("test"), "setuptools")
    assert wanted is not None, "the test extra names no setuptools>=..."
    assert wanted >= BDIST_WHEEL_IN_SETUPTOOLS
    assert wanted >= minimum_version(pyproject_list("requires"), "setuptools")


def test_environment_can_build_tfcert_without_isolation():
    """What the test extra promises holds here: this environment's setuptools
    meets [build-system] and has bdist_wheel."""
    from importlib.metadata import version
    have = tuple(int(part) for part in re.findall(r"\d+", version("setuptools"))[:2])
    assert have >= minimum_version(pyproject_list("requires"), "setuptools")[:2], \
        f"setuptools {version('setuptools')} is older than [build-system] asks: pip install '.[test]'"
    from setuptools.dist import Distribution
    from distutils.errors import DistutilsModuleError  # after setuptools: its own distutils
    try:
        Distribution().get_command_class("bdist_wheel")
    except DistutilsModuleError:
        pytest.fail(f"setuptools {version('setuptools')} cannot build a wheel: pip install '.[test]'")


@pytest.mark.slow
def test_workflow_installs_tfcert_from_its_pinned_source(repo, tmp_path):
    """The workflow ran ``pip install tfcert``, a distribution the package index
    does not hold: every run failed at its first step. It installs
    TFCERT_SOURCE, a pinned git URL or path; here a git repository holding
    this project at one commit, built offline into a folder, whose tfcert
    then gates the repository."""
    test_environment_can_build_tfcert_without_isolation()  # else pip's error is far from the cause
    commit = source_repository(tmp_path / "tfcert-source")
    site = tmp_path / "site"
    proc = sh(install_command(), repo, {
        "TFCERT_SOURCE": f"git+file://{tmp_path / 'tfcert-source'}@{commit}",
        "PIP_TARGET": str(site), "PIP_NO_DEPS": "1", "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0"})  # pip reads 0 here as --no-build-isolation: this venv's setuptools builds
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installed = {"PYTHONPATH": str(site), "PATH": f"{site / 'bin'}{os.pathsep}{Path(sys.executable).parent}"
                                                  f"{os.pathsep}{os.environ.get('PATH', '')}"}
    where = sh("python -c 'import tfcert.verify.check as c; print(c.__file__)'", repo, installed)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    for command in workflow_commands():
        proc = sh(command, repo, installed)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ET.parse(repo / "tfcert-junit.xml").getroot().get("failures") == "0"
    text = (CI / "tfcert.yml").read_text()  # the value the user replaces: a pinned git URL
    assert re.search(r'^\s*TFCERT_SOURCE:\s*"git\+https://\S+@\S+"\s*$', text, re.MULTILINE)


def test_no_install_instruction_asks_the_package_index_for_tfcert():
    """tfcert is not on the package index: no gate file or page may tell a
    user to ``pip install tfcert`` (the pre-commit hook's note included)."""
    bare = re.compile(r"pip install\s+[\"']?tfcert[\"']?(\s|$)")
    pages = [*CI.iterdir(), *(REPO / "docs").glob("*.md"), REPO / "README.md"]
    offending = [p.name for p in pages if bare.search(p.read_text())]
    assert not offending
    assert "git+" in (CI / "pre-commit-config.yaml").read_text()


def test_no_install_hint_asks_the_package_index_for_a_tfcert_extra():
    """``pip install 'tfcert[onnx]'`` (export's message, docs/export.md), ``'tfcert[export]'``
    and ``'tfcert[cross-check]'`` asked the package index for tfcert too, which it does
    not hold. No page, message or help text names a tfcert extra that way: they name the
    packages themselves (``pip install onnx onnxruntime``) or a checkout's ``'.[onnx]'``."""
    pyproject = (REPO / "pyproject.toml").read_text()
    folders = set(re.findall(r'"tfcert(?:\.\w+)?" = "(\w+)"', pyproject))
    files = [*CI.iterdir(), *(REPO / "docs").rglob("*.md"), REPO / "README.md",
             *(p for folder in folders for p in (REPO / folder).rglob("*.py"))]
    extra = re.compile(r"pip install[^\n]*?[\"']?tfcert\[")
    offending = [str(p.relative_to(REPO)) for p in files if extra.search(p.read_text())]
    assert not offending
    from tfcert.export import NEED_TORCH
    from tfcert.export.onnxgraph import NEED_ONNX
    assert "pip install torch==" in NEED_TORCH and "pip install onnx " in NEED_ONNX
