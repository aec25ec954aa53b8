"""``tfcert experiment``: the quick modes end to end, the targets against brute force,
determinism, and the missing-torch path (which needs no torch)."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from tfcert.main import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def test_missing_torch_is_one_error_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    for name in ("intrinsic-dim", "triangle"):
        assert main(["experiment", name, "--quick", "--out", str(tmp_path)]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert _error_lines(err) == ["error: the experiments need PyTorch: "
                                     "pip install torch==2.13.0 (the CPU build; any torch >= 2.1 works)"]


def test_cli_import_does_not_import_torch():
    code = "import sys, tfcert.main, tfcert.experiments.cli; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


@pytest.mark.parametrize("argv, option", [(["--seed", "-1"], "--seed"), (["--device", "gpu"], None)])
def test_bad_options_exit_2(capsys, tmp_path, argv, option):
    assert main(["experiment", "triangle", "--quick", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    if option:
        assert _error_lines(err) == [f"error: {option}: must be an integer >= 0, got -1"]


def test_cuda_without_gpu_is_an_input_error(torch, capsys, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["experiment", "triangle", "--quick", "--device", "cuda", "--out", str(tmp_path)]) == 2
    assert _error_lines(capsys.readouterr().err)[0].startswith("error: --device: CUDA is not available")


def test_unwritable_out_is_an_input_error(torch, capsys, tmp_path, monkeypatch):
    from tfcert.experiments import triangle
    from tfcert.experiments.train import TrainConfig

    tiny = triangle.Grid((3,), (((1, 1), 8),), TrainConfig(2, 8, 1e-3, 16, 0), quick=True)
    monkeypatch.setattr(triangle, "QUICK", tiny)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["experiment", "triangle", "--quick", "--out", str(blocker / "sub")]) == 2
    assert _error_lines(capsys.readouterr().err)[-1].startswith("error: --out: cannot write")


@pytest.mark.parametrize("name", ["intrinsic-dim", "triangle"])
def test_quick_mode_end_to_end(torch, capsys, tmp_path, name):
    assert main(["experiment", name, "--quick", "--json", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert "step" not in err  # training progress is drawn only on a terminal
    assert doc["experiment"] == name and doc["quick"] is True and doc["seed"] == 0
    assert doc["rows"]
    for row in doc["rows"]:
        assert {"config", "T", "nmse", "prediction", "agrees", "label"} <= set(row)
        assert row["nmse"] >= 0 and row["nmse"] == row["nmse"] and row["nmse"] != float("inf")
        assert isinstance(row["prediction"]["efficient"], bool) and row["prediction"]["text"]
    if name == "intrinsic-dim":
        for row in doc["rows"]:
            D, heads = row["config"]["D"], row["config"]["heads"]
            assert row["prediction"]["min_heads"] == [D, D]
            assert row["prediction"]["efficient"] is (heads == [D, D])
    else:
        assert not any(row["prediction"]["efficient"] for row in doc["rows"])
    assert (tmp_path / f"{name}.png").read_bytes()[:8] == PNG_MAGIC
    assert json.loads((tmp_path / f"{name}.json").read_text()) == doc


def test_text_table(torch, capsys, tmp_path, monkeypatch):
    from tfcert.experiments import intrinsic_dim
    from tfcert.experiments.train import TrainConfig

    tiny = intrinsic_dim.Grid((2,), (3,), 8, TrainConfig(5, 16, 1e-3, 64, 0), quick=True)
    monkeypatch.setattr(intrinsic_dim, "QUICK", tiny)
    assert main(["experiment", "intrinsic-dim", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "configuration" in out and "InfoFlow prediction" in out
    assert "D=2 h=2,2 E=8" in out and "D=2 h=1,2 E=8" in out and "min heads (2, 2)" in out
    assert f"wrote {tmp_path / 'intrinsic-dim.png'}" in out


def test_training_is_deterministic(torch):
    from tfcert.experiments.model import ModelConfig
    from tfcert.experiments.targets import triangle_center
    from tfcert.experiments.train import TrainConfig, train

    def once(seed: int) -> float:
        return train(ModelConfig(d=2, E=8, heads=(1, 1)), triangle_center, 4,
                     TrainConfig(20, 32, 1e-3, 128, seed), torch.device("cpu"), lambda _: None, "t").nmse
    assert once(3) == once(3)
    assert once(3) != once(4)


def test_intrinsic_target_against_brute_force(torch):
    from tfcert.experiments.targets import intrinsic_dim, intrinsic_matrices

    M = intrinsic_matrices(3).numpy()
    assert all((m == -m.T).all() for m in M)  # skew: why min over t≠s equals min over all t, s
    x = [[[1.0, 0, 0, 0], [0, 1, 0, 0], [1, 1, -1, 0]],
         [[0.5, -2, 0, 1], [3, 0, 1, 0], [0, 0, 0, 0]]]
    got = intrinsic_dim(torch.tensor(x, dtype=torch.float64), torch.tensor(M))
    for b, xs in enumerate(x):
        def score(m, t, s):
            return sum(xs[t][i] * m[i][j] * xs[s][j] for i in range(4) for j in range(4))
        off = sum(min(score(m, t, s) for t in range(3) for s in range(3) if t != s) for m in M)
        every = sum(min(score(m, t, s) for t in range(3) for s in range(3)) for m in M)
        assert got[b].item() == pytest.approx(off, abs=1e-12) and off == pytest.approx(every, abs=1e-12)


def test_triangle_target_against_brute_force(torch):
    from tfcert.experiments.targets import triangle_center

    x = [[[1.0, 0], [-1, 0], [0, 0], [5, 5]],  # 1 + (-1) + 0 = 0
         [[1.0, 1], [2, 2], [3, 3], [-1, 4]]]
    got = triangle_center(torch.tensor(x, dtype=torch.float64))
    for b, xs in enumerate(x):
        want = min(sum((a[i] + c[i] + e[i]) ** 2 for i in range(2))
                   for a, c, e in itertools.combinations(xs, 3))
        assert got[b].item() == pytest.approx(want)
    assert got[0].item() == 0.0
    assert got[1].item() == pytest.approx((1 + 2 - 1) ** 2 + (1 + 2 + 4) ** 2)
