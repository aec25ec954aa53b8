"""``tfcert experiment``: the quick modes end to end, the bank of models against its contract
(masked parts are inert, the parameter count is honest, members do not interact), the targets
against brute force, the verdict logic on hand-made records, ``--from``, the sweep runner, and
the error paths (the missing-torch one needs no torch)."""
from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys

import pytest

from tfcert.cli.main import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXPERIMENTS = ("intrinsic-dim", "cost-law", "depth", "triangle")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


# --- error paths -------------------------------------------------------------------------------

def test_missing_torch_is_one_error_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    for name in EXPERIMENTS:
        assert main(["experiment", name, "--quick", "--out", str(tmp_path)]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert _error_lines(err) == ["error: the experiments need PyTorch: "
                                     "pip install torch==2.13.0 (the CPU build; any torch >= 2.1 works)"]


def test_cli_import_does_not_import_torch():
    code = "import sys, tfcert.cli.main, tfcert.cli.experiments; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


@pytest.mark.slow
def test_grids_verdicts_and_from_need_no_torch(tmp_path):
    """Only training needs torch: every experiment's grid and verdict load, and --from summarises
    records, in a process where ``import torch`` fails."""
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(json.dumps(r) for r in _intrinsic_records(lambda p, T, s: 0.1)) + "\n")
    code = ("import sys; sys.modules['torch'] = None\n"
            "from importlib import import_module\n"
            "for name in ('intrinsic_dim', 'cost_law', 'depth', 'triangle'):\n"
            "    module = import_module('tfcert.experiments.' + name)\n"
            "    assert module.jobs(True, 0) and callable(module.summarise)\n"
            "from tfcert.cli.main import main\n"
            "sys.exit(main(sys.argv[1:]))")
    run = subprocess.run([sys.executable, "-c", code, "experiment", "intrinsic-dim", "--from", str(records),
                          "--out", str(tmp_path / "out"), "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["verdict"] and (tmp_path / "out" / "intrinsic-dim.json").is_file()


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


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_unwritable_out_fails_before_training(torch, capsys, tmp_path, monkeypatch, name):
    from tfcert.experiments import jobs

    def trains(*_):
        raise AssertionError("trained before checking --out")
    monkeypatch.setattr(jobs, "run_job", trains)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["experiment", name, "--quick", "--out", str(blocker / "sub")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = _error_lines(err)
    assert len(lines) == 1 and lines[0].startswith(f"error: --out: cannot write {blocker / 'sub'}")


# --- quick modes -------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_quick_mode_end_to_end(torch, capsys, tmp_path, name):
    assert main(["experiment", name, "--quick", "--json", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert "step" not in err  # training progress is drawn only on a terminal
    assert doc["experiment"] == name and doc["quick"] is True
    assert doc["claim"] and doc["criterion"] and doc["verdict"]
    assert "not" in doc["scope"]  # every quick mode says what it cannot show
    assert doc["commit"] is None or len(doc["commit"]) == 40
    assert doc["hardware"] and doc["wall_seconds"] > 0
    assert doc["rows"] and doc["records"]
    for r in doc["records"]:
        assert r["nmse"] >= 0 and math.isfinite(r["nmse"]) and r["steps"] > 0 and r["parameters"] > 0
        assert r["curve"][-1] == [r["steps"], r["nmse"]]
    if name == "intrinsic-dim":
        row = doc["rows"][0]
        assert set(row["nmse"]) == {"D,D", "D-1,D"}
        assert row["prediction"]["D,D"]["efficient"] is True and row["prediction"]["D-1,D"]["efficient"] is False
        assert row["prediction"]["D,D"]["min_heads"] == [2, 2]
    assert (tmp_path / f"{name}.png").read_bytes()[:8] == PNG_MAGIC
    assert json.loads((tmp_path / f"{name}.json").read_text()) == doc


def test_text_output_states_criterion_and_scope(torch, capsys, tmp_path, monkeypatch):
    from tfcert.experiments import intrinsic_dim
    from tfcert.experiments.train import TrainConfig

    tiny = (intrinsic_dim.Variant("bilinear", intrinsic_dim._shape("bilinear", E=8, heads=2), (2,), (3,),
                                  ("D,D", "D-1,D"), TrainConfig(5, 16, 64, checkpoints=1)),)
    monkeypatch.setattr(intrinsic_dim, "QUICK", tiny)
    assert main(["experiment", "intrinsic-dim", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "agreement criterion (fixed before running): " + intrinsic_dim.CRITERION in out
    assert "what this run can show: " + intrinsic_dim.QUICK_SCOPE in out
    assert "(D,D)" in out and "(D-1,D)" in out and "InfoFlow e" in out and "verdict: " in out
    assert f"wrote {tmp_path / 'intrinsic-dim.png'}" in out


# --- the bank ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mlp", ["relu", "bilinear"])
def test_masked_parameters_are_inert_and_the_count_is_honest(torch, mlp):
    from tfcert.experiments.bank import Bank, Member, Shape

    shape = Shape(d=3, E=8, layers=2, heads=3, head_dim=4, hidden=12, mlp=mlp)
    members = (Member((1, 2), (5, 12)), Member((3,), (7,)), Member((3, 3), (12, 12)))
    bank = Bank(shape, members, torch.device("cpu"), torch.float64)
    flat = bank.init()
    x = torch.randn(len(members), 64, 5, 3, dtype=torch.float64)
    flat.requires_grad_(True)
    grad, = torch.autograd.grad(bank.forward(flat, x).square().sum(), flat)
    assert (grad[flat == 0] == 0).all()  # what a member does not use gets no gradient
    for i, m in enumerate(members):
        assert int((flat[i] != 0).sum()) == m.parameters(shape)  # and starts at zero
        if mlp == "bilinear":  # no dead units: everything used has a gradient but the key biases,
            # which shift every score of a query equally and so are ignored by the softmax
            key_biases = sum(h * shape.head_dim for h in m.heads)
            assert int((grad[i].abs() > 1e-9).sum()) == m.parameters(shape) - key_biases
    with torch.no_grad():
        noisy = flat + torch.randn_like(flat) * (flat == 0)  # perturb only unused entries
        assert torch.allclose(bank.forward(noisy, x), bank.forward(flat, x))


def test_members_do_not_interact(torch):
    """A member trains the same alone as beside others (per-member clipping, Adam, streams)."""
    from tfcert.experiments.bank import Bank, Member, Shape
    from tfcert.experiments.targets import pairwise_task
    from tfcert.experiments.train import TrainConfig, train_bank

    shape = Shape(d=2, E=8, layers=2, heads=1, head_dim=4, hidden=16)
    a, b = Member((1, 1), (16, 16), seed=3, lr=1e-2), Member((1,), (9,), seed=4, stream=1, lr=3e-2)
    config = TrainConfig(15, 32, 256, checkpoints=1)

    def nmse(members, streams):
        bank = Bank(shape, members, torch.device("cpu"), torch.float64)
        return train_bank(bank, (pairwise_task(4, 2),), streams, config, lambda _: None, "t").nmse
    together = nmse((a, b), (0, 1))
    assert together[0] == pytest.approx(nmse((a,), (0,))[0], rel=1e-9)
    assert together[1] == pytest.approx(nmse((Member((1,), (9,), seed=4, lr=3e-2),), (1,))[0], rel=1e-9)


def test_training_is_deterministic_and_seeded(torch):
    from tfcert.experiments.bank import Bank, Member, Shape
    from tfcert.experiments.targets import triangle_task
    from tfcert.experiments.train import TrainConfig, train_bank

    def once(seed: int) -> float:
        bank = Bank(Shape(d=2, E=8, layers=2, heads=1), (Member((1, 1), (16, 16), seed=seed),), torch.device("cpu"))
        return train_bank(bank, (triangle_task(4),), (seed,), TrainConfig(20, 32, 128, checkpoints=1),
                          lambda _: None, "t").nmse[0]
    assert once(3) == once(3)
    assert once(3) != once(4)


def test_deadline_cuts_the_steps(torch):
    import time

    from tfcert.experiments.train import PROBE, TrainConfig, optimise

    flat = torch.zeros(2, 3)
    lines = []
    done = optimise(flat, torch.tensor([0.1, 0.1]), lambda _: (flat - 1).square().sum(1),
                    TrainConfig(10 ** 6, 1, 1), lines.append, "t", deadline=time.perf_counter())
    assert done.steps == PROBE + 1 and any("cut to" in line for line in lines)
    assert (flat > 0).all()


# --- targets against brute force --------------------------------------------------------------

def test_intrinsic_target_against_brute_force(torch):
    from tfcert.experiments.targets import intrinsic_columns, intrinsic_dim, intrinsic_matrices

    M = intrinsic_matrices(3).numpy()
    assert all((m == -m.T).all() for m in M)  # skew: why min over t≠s equals min over all t, s
    x = [[[1.0, 0, 0, 0], [0, 1, 0, 0], [1, 1, -1, 0]],
         [[0.5, -2, 0, 1], [3, 0, 1, 0], [0, 0, 0, 0]]]
    got = intrinsic_dim(torch.tensor(x, dtype=torch.float64), torch.tensor(M))
    columns = intrinsic_columns(torch.tensor(x, dtype=torch.float64), torch.tensor(M))
    for b, xs in enumerate(x):
        def score(m, t, s):
            return sum(xs[t][i] * m[i][j] * xs[s][j] for i in range(4) for j in range(4))
        mins = [min(score(m, t, s) for t in range(3) for s in range(3) if t != s) for m in M]
        every = sum(min(score(m, t, s) for t in range(3) for s in range(3)) for m in M)
        assert got[b].item() == pytest.approx(sum(mins), abs=1e-12) and sum(mins) == pytest.approx(every, abs=1e-12)
        assert columns[b].tolist() == pytest.approx(list(itertools.accumulate(mins)), abs=1e-12)


def test_pairwise_and_triangle_targets_against_brute_force(torch):
    from tfcert.experiments.targets import pairwise_min, triangle_center

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 6, 2, generator=g, dtype=torch.float64)
    for b, xs in enumerate(x.tolist()):
        want = min(sum(p * q for p, q in zip(xs[t], xs[s])) for t in range(6) for s in range(6) if t != s)
        assert pairwise_min(x)[b, 0].item() == pytest.approx(want)
        tri = min(sum((a[i] + c[i] + e[i]) ** 2 for i in range(2)) for a, c, e in itertools.combinations(xs, 3))
        assert triangle_center(x)[b].item() == pytest.approx(tri)
    assert triangle_center(torch.tensor([[[1.0, 0], [-1, 0], [0, 0], [5, 5]]])).item() == 0.0


# --- verdicts on hand-made records ------------------------------------------------------------

def _intrinsic_records(nmse) -> list[dict]:
    out = []
    for D, T, p, seed in itertools.product((2,), (8, 32), ("D,D", "D-1,D", "D-1,D-1", "D,D-1"), (0, 1, 2)):
        out.append({"experiment": "intrinsic-dim", "variant": "v", "ablation": False, "D": D, "T": T, "pattern": p,
                    "seed": seed, "nmse": nmse(p, T, seed), "shape": {"E": 64}})
    return out


def test_cost_law_fit_and_verdict():
    from tfcert.experiments.cost_law import fit_slope, summarise

    assert fit_slope([10, 100, 1000], [1, 1e-2, 1e-4]) == pytest.approx(-2)
    records = []
    for width, seed in itertools.product((4, 16, 64, 256), (0, 1)):
        n = 40 * width
        records.append({"experiment": "cost-law", "series": "1 layer, E=4, T=4", "E": 4, "T": 4, "layers": 1,
                        "width": width, "parameters": n, "seed": seed, "nmse": 50.0 * n ** -2.0 * (1 + seed),
                        "curve": [[1, 50.0 * n ** -2.0 * (1 + seed)]] * 2})
        records.append({"experiment": "cost-law", "series": "1 layer, E=4, T=8", "E": 4, "T": 8, "layers": 1,
                        "width": width, "parameters": n, "seed": seed, "nmse": 0.5, "curve": [[1, 0.5]] * 2})
    result = summarise(records, False, "cpu")
    by = {r["series"]: r for r in result.rows}
    assert by["1 layer, E=4, T=4"]["exponent"] == "1" and by["1 layer, E=4, T=4"]["fitted_slope"] == pytest.approx(-2)
    assert by["1 layer, E=4, T=4"]["verdict"] == "agrees"
    assert by["1 layer, E=4, T=8"]["exponent"] == "3" and by["1 layer, E=4, T=8"]["verdict"] == "does not agree"


# --- --from and the sweep ---------------------------------------------------------------------

@pytest.mark.slow
def test_from_records_file(capsys, tmp_path):
    path = tmp_path / "records.jsonl"
    header = {"sweep": {"commit": "c" * 40, "hardware": "a test machine", "wall_seconds": 1.5}}
    path.write_text("\n".join(json.dumps(x) for x in [header, *_intrinsic_records(lambda p, T, s: 0.1)]) + "\n")
    assert main(["experiment", "intrinsic-dim", "--from", str(path), "--out", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["commit"] == "c" * 40 and doc["hardware"] == "a test machine" and doc["device"] == "a test machine"
    assert len(doc["records"]) == 24 and doc["quick"] is False
    again = tmp_path / "again"  # a written document is itself a valid --from input
    assert main(["experiment", "intrinsic-dim", "--from", str(tmp_path / "intrinsic-dim.json"),
                 "--out", str(again), "--json"]) == 0
    redo = json.loads(capsys.readouterr().out)
    assert redo["rows"] == doc["rows"] and redo["commit"] == doc["commit"] and redo["hardware"] == doc["hardware"]
    assert main(["experiment", "depth", "--from", str(path), "--out", str(tmp_path)]) == 2
    assert _error_lines(capsys.readouterr().err) == [f"error: --from: {path} holds no depth records"]
    path.write_text("{}\n")
    assert main(["experiment", "depth", "--from", str(path), "--out", str(tmp_path)]) == 2
    assert "line 1: neither a record nor a sweep header" in capsys.readouterr().err


@pytest.mark.slow
def test_sweep_runs_tiny_jobs_in_parallel_processes(torch, tmp_path):
    out = tmp_path / "sweep"
    run = subprocess.run([sys.executable, "-m", "tfcert.experiments.sweep", "--out", str(out), "--device", "cpu",
                          "--tiny", "--only", "depth", "--budget", "300", "--commit", "abc"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    header, records = lines[0]["sweep"], lines[1:]
    assert header["commit"] == "abc" and header["tiny"] is True and header["jobs"][0]["state"] == "done"
    assert len(records) == 48 and {r["experiment"] for r in records} == {"depth"}
    assert "done: 48 records" in (out / "log.txt").read_text()


@pytest.mark.slow
def test_sweep_resume_runs_only_the_missing_jobs(torch, tmp_path):
    """--grid cpu --resume keeps the records of the jobs already done and runs the one missing."""
    from tfcert.experiments.intrinsic_dim import grid_jobs

    names = [j.name for j in grid_jobs("cpu")]
    out = tmp_path / "grid"
    out.mkdir()
    earlier = [{"experiment": "intrinsic-dim", "job": n, "nmse": 0.5, "earlier": True} for n in names[1:]]
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [{"sweep": {}}, *earlier]))
    run = subprocess.run([sys.executable, "-m", "tfcert.experiments.sweep", "--out", str(out), "--device", "cpu",
                          "--tiny", "--grid", "cpu", "--resume", "--processes", "1", "--budget", "600"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    header, records = lines[0]["sweep"], lines[1:]
    assert [j["state"] for j in header["jobs"]] == ["done"] + ["done earlier"] * (len(names) - 1)
    assert [r for r in records if r.get("earlier")] == earlier
    new = [r for r in records if not r.get("earlier")]
    assert len(new) == 6 and {r["job"] for r in new} == {names[0]}


def test_a_paused_run_resumed_is_the_run_that_never_paused(torch, tmp_path):
    """A deadline with ``pause`` stops after step PROBE; the state, written and read back as the
    sweep does, continues to the very numbers of an uninterrupted run: parameters, curve, NMSE."""
    from tfcert.experiments.bank import Bank, Member, Shape
    from tfcert.experiments.targets import triangle_task
    from tfcert.experiments.train import TrainConfig

    config = TrainConfig(120, 16, 64, log_every=10, checkpoints=4)
    members = (Member((1, 1), (8, 8), seed=1), Member((1, 1), (8, 8), seed=2, stream=1, lr=5e-3))

    def bank() -> Bank:
        return Bank(Shape(d=2, E=8, layers=2, heads=1), members, torch.device("cpu"))
    tasks, streams, lines = (triangle_task(4),), (5, 6), []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: threads only contend with each other
    try:
        _pause_and_resume(torch, tmp_path, bank, tasks, streams, config, lines)
    finally:
        torch.set_num_threads(threads)


def _pause_and_resume(torch, tmp_path, bank, tasks, streams, config, lines) -> None:
    import time

    from tfcert.experiments.jobs import load_state, save_state
    from tfcert.experiments.train import PROBE, Paused, Trained, train_bank

    whole = train_bank(bank(), tasks, streams, config, lambda _: None, "t")
    paused = train_bank(bank(), tasks, streams, config, lines.append, "t", time.perf_counter(), pause=True)
    assert isinstance(paused, Paused) and paused.progress.step == PROBE and len(paused.curve) == 1
    assert any("paused after step 50/120" in line for line in lines)
    save_state({"training": paused.to_json()}, tmp_path / "state.pt")
    resumed = train_bank(bank(), tasks, streams, config, lambda _: None, "t",
                         resume=Paused.from_json(load_state(tmp_path / "state.pt")["training"]))
    assert isinstance(resumed, Trained) and resumed.steps == whole.steps == 120
    assert torch.equal(resumed.flat, whole.flat)
    assert resumed.curve == whole.curve and resumed.nmse == whole.nmse


@pytest.mark.slow
def test_sweep_pause_then_resume_continues_the_job(torch, tmp_path):
    """``--pause`` past its deadline leaves the job paused with its state in DIR/state/ and no
    records; ``--resume`` finishes it with the numbers of a run that never paused, and deletes
    the spent state."""
    from tfcert.experiments.jobs import run_job
    from tfcert.experiments.sweep import all_jobs, state_file

    jobs = all_jobs((), tiny=True, grid="cpu")
    out = tmp_path / "grid"
    out.mkdir()
    earlier = [{"experiment": "intrinsic-dim", "job": j.name, "nmse": 0.5} for j in jobs[1:]]
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [{"sweep": {}}, *earlier]))

    def sweep(*extra: str) -> list[dict]:
        run = subprocess.run([sys.executable, "-m", "tfcert.experiments.sweep", "--out", str(out), "--device", "cpu",
                              "--tiny", "--grid", "cpu", "--resume", "--processes", "1", *extra],
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr
        return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    lines = sweep("--pause", "--budget", "1")
    assert lines[0]["sweep"]["jobs"][0]["state"] == "paused at step 50 of 60"
    assert len(lines) == 1 + len(earlier) and state_file(out, jobs[0].name).exists()
    lines = sweep("--budget", "600")
    new = [r for r in lines[1:] if r["job"] == jobs[0].name]
    assert lines[0]["sweep"]["jobs"][0]["state"] == "done" and not state_file(out, jobs[0].name).exists()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the sweep's CPU workers: the same sums in the same order
    try:
        whole = run_job(jobs[0], torch.device("cpu"), lambda _: None)
    finally:
        torch.set_num_threads(threads)
    assert [r["nmse"] for r in new] == [r["nmse"] for r in whole] and len(new) == 6
    assert [r["curve"] for r in new] == [r["curve"] for r in whole]
    assert all(r["paused_at"] == [50] and r["steps"] == 60 for r in new)
