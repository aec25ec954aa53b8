"""``tfcert bench``: the suite's --quick run (the CI check: fast and naive
verdicts agree, a corrupted model fails both), the naive exact replay, the
cap, the results file written shape by shape, the exponent fit, shards,
and one-line errors for bad shapes."""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
from fractions import Fraction

import numpy as np
import pytest

from tfcert.bench import bench, peers
from tfcert.cli.main import main


def run_quiet(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    rc, text, _ = run_quiet(["bench", "--quick", "--json", "--out", str(out)])
    return rc, json.loads(text), out


@pytest.mark.slow
def test_bench_quick_json(quick):
    rc, doc, _ = quick
    assert rc == 0
    assert [bench.shape_of(r) for r in doc["results"]] == bench.SUITES["quick"]
    for row in doc["results"]:
        assert row["verified"] is True and row["naive_interpolates"] is True and row["failed_kinds"] == []
        # no bumps on this dataset; the interval block and ≤ N − 1 blocks for leftovers (d ≥ 3 hardmax)
        assert 2 * row["N"] * row["m"] + 1 <= row["blocks"] <= 2 * row["N"] * row["m"] + 2 * row["N"] + 1
        assert row["tokens"] == row["N"] * row["n"] and row["outputs"] == row["N"] * row["m"]
        for phase in ("construct", "verify", "float64", "naive"):
            assert 0 < row[f"{phase}_work_s"] <= row[f"{phase}_s" if phase != "float64" else "float64_forward_s"]
            assert row[f"{phase}_maxrss_mib"] > 10
        assert row["verify_over_float64"] > 0 and row["construct_over_float64"] > 0 and row["naive_over_verify"] > 0
        assert row["model_numerator_bits"] > 0 and row["model_denominator_bits"] > 0
        assert row["token_numerator_bits"] > 0 and row["token_denominator_bits"] > 0
        assert row["binary64_bound_rel"] <= 1e-9 and row["binary64_observed_numpy"] <= row["binary64_bound"]
        assert row["binary64_observed_reverse"] <= row["binary64_bound"]
    fits = doc["exponents"]
    assert fits["tokens"]["over"] == ["N=10 n=8 m=2 d=8", "N=20 n=8 m=2 d=8"]
    assert fits["outputs"]["over"] == ["N=10 n=8 m=2 d=8", "N=10 n=8 m=4 d=8"]
    assert all(isinstance(fits[x][p], float) for x in fits for p in ("construct", "verify"))
    corrupted = doc["corrupted"]
    assert corrupted["as_expected"] is True and corrupted["verified"] is False
    assert "exact" in corrupted["failed_kinds"] and corrupted["naive_interpolates"] is False
    blocks = [r["blocks"] for r in doc["width_tradeoff"]]
    assert blocks == sorted(blocks, reverse=True) and blocks[-1] < blocks[0]
    [noop] = doc["noop"]
    assert noop["suite"] == "noop-quick" and noop["blocks"] == bench.NOOP["noop-quick"] and noop["verified"] is True
    assert noop["verify_s"] > 0 and noop["float64_forward_s"] > 0 and noop["verify_maxrss_mib"] > 10


@pytest.mark.slow
def test_results_file_has_every_shape(quick):
    _, doc, out = quick
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == doc["results"] + doc["noop"]
    assert doc["files"]["results"] == str(out / "results.jsonl")


def test_results_written_as_measured(tmp_path, monkeypatch):
    """A run cut off after its first shape keeps that shape's line."""
    def measure(shape, cap, say):
        if shape[0] == 2:
            raise KeyboardInterrupt
        return {"N": shape[0]}
    monkeypatch.setattr(bench, "measure", measure)
    with pytest.raises(KeyboardInterrupt):
        bench.run_bench(False, True, tmp_path, shapes=["1x1x1x1", "2x1x1x1"])
    assert (tmp_path / "results.jsonl").read_text() == '{"N": 1}\n'


@pytest.mark.slow
def test_cap_yields_null(tmp_path):
    row = bench.measure((3, 4, 2, 3), 0.001, lambda text: None)
    assert row["verified"] is True
    assert all(row[k] is None for k in ("naive_s", "naive_work_s", "naive_over_verify", "naive_maxrss_mib",
                                        "naive_interpolates", "token_numerator_bits", "token_denominator_bits"))
    assert row["model_numerator_bits"] > 0 and row["verify_s"] > 0


@pytest.fixture(scope="module")
def bundle():
    """A small bundle whose sequences differ in length (the naive replay's per-sequence attention)."""
    from tfcert.api import construct

    pairs = [{"input": [[i, (i * i) % 5, 1] for i in range(n)], "output": [[n, 0, 0], [0, n, 1]][:min(n, 2)]}
             for n in (1, 3, 3, 4, 6)]
    return pairs, construct({"format": "tfcert.dataset/1", "d": 3, "pairs": pairs})


def test_naive_replay_agrees_with_the_verifier(bundle, tmp_path):
    from tfcert.verify.check import check_certificate
    from tfcert.verify.formats import parse_document
    from tfcert.canonical import dumps

    _, b = bundle
    model, dataset, cert = (b.files[f] for f in ("model.json", "dataset.json", "certificate.json"))
    outputs, bits = peers.naive_replay(model, dataset, track_bits=True)
    assert peers.interpolates(outputs, dataset) is True and bits[0] > 0 and bits[1] > 0

    def fast(model_raw: bytes):
        doc = json.loads(cert)
        doc["model_sha256"] = hashlib.sha256(model_raw).hexdigest()
        return check_certificate(parse_document("model.json", model_raw), parse_document("dataset.json", dataset),
                                 parse_document("certificate.json", dumps(doc)))
    assert fast(model).ok
    bad = bench.corrupt(model)
    changed = [(i, j) for blk_a, blk_b in zip(json.loads(model)["blocks"], json.loads(bad)["blocks"])
               for i, (ra, rb) in enumerate(zip(blk_a["ff"]["W"], blk_b["ff"]["W"]))
               for j, (a, b_) in enumerate(zip(ra, rb)) if a != b_]
    assert len(changed) == 1
    report = fast(bad)
    assert not report.ok and "exact" in {r.kind for r in report.results if not r.ok}
    assert peers.interpolates(peers.naive_replay(bad, dataset)[0], dataset) is False


def test_verify_phase_pays_only_for_verify(bundle, tmp_path):
    """The verify phase's process imports what ``tfcert verify`` does and no
    more (not numpy, which the float64 peer needs): its whole-process time is
    a user's."""
    import subprocess
    import sys

    _, b = bundle
    for name in ("model.json", "dataset.json", "certificate.json"):
        (tmp_path / name).write_bytes(b.files[name])
    probe = ("import json, sys; from pathlib import Path; from tfcert.bench import benchphase; "
             "r = benchphase.verify(Path(sys.argv[1])); print(json.dumps([r['ok'], 'numpy' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [True, False]


def test_dense_forward_is_the_float_run(bundle):
    """The bench's peer (reads the files, batches by length, skips V = 0
    attentions) computes the model: it lands within the certified binary64
    bound of the targets, sequences of different lengths included."""
    pairs, b = bundle
    (bound,) = [Fraction(c["bound"]) for p in b.certificate["phases"] for c in p["claims"]
                if c["kind"] == "float" and c["format"] == "binary64"]
    outs = peers.dense_forward(b.files["model.json"], b.files["dataset.json"])
    for out, pair in zip(outs, pairs):
        assert peers.hausdorff(out, np.array(pair["output"], dtype=float)) <= float(bound)


def test_exponent_fit():
    tokens = [1000, 2000, 4000, 8000, 16000]
    jitter = [1.01, 0.99, 1.0, 1.02, 0.98]
    assert bench.exponent(tokens, [3e-4 * t * j for t, j in zip(tokens, jitter)]) == pytest.approx(1.0, abs=0.01)
    rows = [{"N": N, "n": 64, "m": m, "d": 16, "tokens": 64 * N, "outputs": N * m,
             "construct_work_s": 1e-5 * (64 * N) ** 1.2 * m, "verify_work_s": 1e-4 * 64 * N * m ** 0.5}
            for N, m in ((250, 2), (500, 2), (1000, 2), (250, 1), (250, 4))]
    rows.append({**rows[0], "N": 1, "n": 100, "m": 40, "d": 2})  # another series: not fitted
    fits = bench.exponents(rows)
    assert fits["tokens"]["over"] == ["N=250 n=64 m=2 d=16", "N=500 n=64 m=2 d=16", "N=1000 n=64 m=2 d=16"]
    assert fits["tokens"]["construct"] == pytest.approx(1.2, abs=1e-3)
    assert fits["tokens"]["verify"] == pytest.approx(1.0, abs=1e-3)
    assert fits["outputs"]["construct"] == pytest.approx(1.0, abs=1e-3)
    assert fits["outputs"]["verify"] == pytest.approx(0.5, abs=1e-3)
    assert bench.exponents(rows[:1]) == {"tokens": None, "outputs": None}


def test_the_noop_model_changes_nothing_and_verifies(tmp_path):
    """The no-op suite's model: 168 bytes a block, one Block object for all of
    them once read, and audit's certificate (with a float claim) verifies."""
    from tfcert.verify.formats import parse_document, read_model

    files = bench.noop_files(300)
    assert 300 * 168 < len(files["model.json"]) < 300 * 168 + 200
    model = read_model(parse_document("model.json", files["model.json"]))
    assert len(model.blocks) == 300 and len({id(b) for b in model.blocks}) == 1
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    paths = ["--model", str(tmp_path / "model.json"), "--dataset", str(tmp_path / "dataset.json")]
    assert run_quiet(["-q", "audit", *paths, "--float", "binary64", "-o", str(tmp_path / "c.json")])[0] == 0
    assert run_quiet(["-q", "verify", *paths, "--certificate", str(tmp_path / "c.json")])[0] == 0
    assert '"kind": "float"' in (tmp_path / "c.json").read_text()
    assert bench.choose_shapes(None, ["noop"], False) == []


def test_shapes_and_suites():
    assert bench.parse_shapes("N=250,500") == [(250, 64, 2, 16), (500, 64, 2, 16)]
    assert bench.parse_shapes("n=1000") == [(1, 1000, 40, 2)]
    assert bench.parse_shapes("10x8x2x8") == [(10, 8, 2, 8)]
    full = bench.choose_shapes(None, None, False)
    assert full[:5] == [(N, 64, 2, 16) for N in (250, 500, 1000, 2000, 4000)]
    assert {(1, 5000, 40, 2), (20000, 1, 1, 2), (250, 64, 4, 16), (250, 64, 2, 32)} <= set(full)
    assert len(full) == len(set(full))
    assert bench.choose_shapes(["m=2,4"], ["m-scaling"], False) == bench.SUITES["m-scaling"]  # each shape once


@pytest.mark.slow  # 6 s: two constructions and verifications
def test_one_sequence_suites_construct_and_verify_alone(tmp_path):
    """The long single sequences (issue 22's construction goals) in their quick sizes: construct and
    verify alone, under the suite's attention, one results line each."""
    rc, text, _ = run_quiet(["bench", "-q", "--suite", "one-sequence-quick", "--suite", "one-sequence-softmax-quick",
                             "--json", "--out", str(tmp_path)])
    doc = json.loads(text)
    assert rc == 0 and doc["results"] == []
    shapes = bench.SUITES["one-sequence-quick"] + bench.SUITES["one-sequence-softmax-quick"]
    assert [(bench.shape_of(r), r["attention"]) for r in doc["alone"]] == \
        [(s, "hardmax") for s in bench.SUITES["one-sequence-quick"]] + [(bench.SUITES["one-sequence-softmax-quick"][0],
                                                                         "softmax")]
    for r, (N, n, m, d) in zip(doc["alone"], shapes):
        assert r["verified"] is True and r["tokens"] == n and 0 < r["construct_work_s"] <= r["construct_s"]
        assert r["construct_maxrss_mib"] > 10 and r["verify_maxrss_mib"] > 10
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(shapes)
    assert bench.SUITES["one-sequence"] == [(1, 49500, 40, 2), (1, 240000, 40, 2)]
    assert bench.SUITES["one-sequence-softmax"] == [(1, 2000, 40, 3)]


def test_issue_shapes_keep_their_datasets():
    """The N-series datasets are those the issue's table was measured on."""
    assert hashlib.sha256(bench.random_dataset(250, 64, 2, 16)).hexdigest() == \
        "ade29ecb32769c38d6c19ef86ab895631004a2a653d5bfe2ce866ffdc6595dfd"


@pytest.mark.parametrize("argv", [["--shapes", "N=abc"], ["--shapes", "x=5"], ["--shapes", "1x2x3"],
                                  ["--shapes", "N=0"], ["--shapes", "n=10"], ["--suite", "nope"],
                                  ["--naive-cap", "-1"], ["--shards", "0"]])
def test_bad_options_one_error_line(argv, tmp_path):
    rc, out, err = run_quiet(["bench", *argv, "--out", str(tmp_path / "b")])
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert not (tmp_path / "b").exists()


def test_shard_costs_merge_to_the_whole():
    r = bench.shard_costs((6, 5, 2, 4), 3)
    assert r["merged_equals_full"] and r["distinct"] and r["min_gap_as_claimed"] and r["bound_equal"]
    assert len(r["shard_s"]) == 3 and r["tokens"] == 30
