"""``tfcert experiment regularization``: ‖θ_c‖² exact, the trainable twin against the exported
module, the flag on a run that is certainly not at the global minimum and not on θ_c itself, the
CLI end to end on a tiny plan, and bad input (one ``error:`` line naming the file, exit 2)."""
from __future__ import annotations

import json
import sys
from fractions import Fraction

import pytest
from conftest import REPO

from tfcert.cli.main import main

DEMO = REPO / "tfcert" / "examples" / "demo.json"


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


@pytest.fixture(scope="module")
def problem(torch):
    from tfcert.experiments.regularization import prepare

    return prepare(DEMO)


def _plan(steps: int, seeds: int = 1, rates_c: tuple[float, ...] = (1e-11,)):
    """ε = the lowest exponent only (two decades below 1/‖θ_c‖², where the bound is ~1e-2)."""
    from tfcert.experiments.regularization import Plan
    from tfcert.experiments.train import TrainConfig

    return Plan(1, seeds, TrainConfig(steps=steps, batch=0, eval_size=0, checkpoints=1), 3e-2, rates_c)


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def test_norm_is_exact(problem):
    """‖θ_c‖² against an independent sum of Fractions over every number of model.json."""
    from tfcert.api import construct

    model = json.loads(construct(DEMO, "softmax").files["model.json"])
    numbers = []
    for block in model["blocks"]:
        ff, sa = block["ff"], block["sa"]
        numbers += [ff["eta"], *sum(ff["U"], []), *ff["b"], *sum(ff["W"], []), sa["rho"]]
        for key in ("A", "V"):
            numbers.append(sa[key]["scale"])
            numbers += [x for term in sa[key]["low_rank"] for x in term["u"] + term["v"]]
    assert problem.norm2 == sum(Fraction(x) ** 2 for x in numbers)
    assert problem.size == len(numbers) == 358  # the certificate's size claim counts 358 parameters


def test_twin_agrees_with_the_exported_module(torch, problem):
    """At θ_c both are float64 runs the certificate covers, so they lie within 2B of each other."""
    import tfcert.export as tx
    from tfcert.api import construct
    from tfcert.experiments.regularization import forward
    from tfcert.export.rounding import round_to
    from tfcert.verify.formats import read_model

    module = tx.to_torch(read_model(construct(DEMO, "softmax").documents()["model"]))
    sizes = problem.mask.sum(1)
    want = module(problem.x, sizes)
    got = forward(problem.theta_float()[None], problem.slots, problem.x, problem.mask, round_to(problem.tau))[0]
    assert problem.float_bound is not None and float(problem.float_bound) < 1e-9
    assert Fraction((got - want).abs().max().item()) <= 2 * problem.float_bound


def test_theta_c_untrained_is_not_flagged(torch, problem):
    from tfcert.experiments.regularization import run

    rec, = run(problem, _plan(0, seeds=0), 0, lambda _: None)
    assert rec["start"] == "theta_c, lr 1e-11" and rec["steps"] == 0
    assert rec["set_loss"] <= rec["theta_c"]["set_loss_slack"] < 1e-20  # ≈ 0, within the certified float bound
    assert rec["objective"] <= rec["threshold"] and not rec["flagged"]
    assert rec["bound"] == pytest.approx(rec["epsilon"] * float(problem.norm2))


def test_untrained_random_start_is_flagged(torch, problem):
    """A random point has a set loss of order 1, far above ε‖θ_c‖² ≈ 2e-2 at the lowest ε."""
    from tfcert.experiments.regularization import run

    for steps in (0, 2):
        rec, = run(problem, _plan(steps, rates_c=()), 0, lambda _: None)
        assert rec["start"] == "seed 0" and rec["steps"] == steps
        assert rec["bound"] < 0.1 < rec["objective"] and rec["flagged"]


def test_flag_at_the_bound(torch, problem, monkeypatch):
    """The hard cases, next to θ_c where objectives are within a hair of the bound ε‖θ_c‖² (the
    lowest ε of the sweep): a point whose objective ends within 10x of the bound — θ_c moved along
    a random direction, the largest step 10^-k that stays within 10x — is still flagged; one past
    it — θ_c shrunk by the least 10^-k that brings the objective below the bound, at a set loss
    above 0 — is not flagged. (How far each moves depends on θ_c, so the steps are found, not fixed.)"""
    from tfcert.experiments import regularization

    theta = problem.theta_float()
    eps = torch.tensor([10.0 ** _plan(0).exponents(problem.norm2)[0]], dtype=torch.float64)
    bound = float(Fraction(eps.item()) * problem.norm2)

    def objective(point):
        return float(sum(regularization.objective_parts(problem, point[None], eps))[0])
    direction = torch.randn(theta.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    near = max((theta + 10.0 ** -k * direction for k in range(4, 17)),
               key=lambda x: (objective(x) <= 10 * bound, objective(x)))
    past = next(theta * (1 - 10.0 ** -k) for k in range(16, 2, -1) if objective(theta * (1 - 10.0 ** -k)) < bound)
    monkeypatch.setattr(regularization, "starts", lambda *_: [("near", near, 0.0), ("past", past, 0.0)])
    near, past = regularization.run(problem, _plan(0, seeds=0, rates_c=()), 0, lambda _: None)
    assert near["start"] == "near" and past["start"] == "past" and near["bound"] == bound
    assert 0 < near["set_loss"] and bound < near["objective"] <= 10 * bound and near["flagged"]
    assert 0 < past["set_loss"] and past["objective"] < bound and not past["flagged"]


def test_runs_are_deterministic(torch, problem):
    from tfcert.experiments.regularization import run

    assert run(problem, _plan(3), 5, lambda _: None) == run(problem, _plan(3), 5, lambda _: None)


@pytest.mark.slow
def test_cli_end_to_end(torch, capsys, tmp_path, monkeypatch):
    import jsonschema

    from tfcert.experiments import regularization
    from tfcert.cli.schemas import load_schema

    monkeypatch.setattr(regularization, "QUICK", _plan(3, rates_c=(0.0,)))  # θ_c stays put
    argv = ["experiment", "regularization", "--dataset", str(DEMO), "--quick", "--out", str(tmp_path)]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(load_schema("experiment-output")).validate(doc)
    assert doc["experiment"] == "regularization" and doc["quick"] is True and "not" in doc["scope"]
    assert [r["start"] for r in doc["records"]] == ["theta_c, lr 0", "seed 0"]
    assert doc["rows"][0]["theta_c"]["norm2"].count("/") == 1
    assert (tmp_path / "regularization.png").read_bytes()[:4] == b"\x89PNG"
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert regularization.PAPER in out and "what this run can show: " + regularization.QUICK_SCOPE in out
    assert "|theta_c|^2, exact" in out and "FLAGGED" in out and "verdict: 1 of 2 runs flagged" in out


def test_missing_and_malformed_dataset(torch, capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": ')
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"format": "tfcert.dataset/1", "d": 2, "pairs": [{"input": [["1"]], "output": [["1", "2"]]}]}')
    for path in (tmp_path / "missing.json", bad, wrong):
        out_dir = tmp_path / "out"
        assert main(["experiment", "regularization", "--dataset", str(path), "--quick", "--out", str(out_dir)]) == 2
        out, err = capsys.readouterr()
        lines = _error_lines(err)
        assert out == "" and len(lines) == 1 and lines[0].startswith(f"error: {path}")
        assert "Traceback" not in err and not out_dir.exists()


def test_missing_torch_is_one_error_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["experiment", "regularization", "--dataset", str(DEMO), "--out", str(tmp_path)]) == 2
    assert _error_lines(capsys.readouterr().err) == [
        "error: the experiments need PyTorch: pip install torch==2.13.0 (the CPU build; any torch >= 2.1 works)"]
