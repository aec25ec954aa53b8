"""Verification sharded by sequence (tfcert/shards.py, docs/scaling.md): the
split partitions the dataset; the merge gives one process's report, message
for message, on clean and mutated bundles; a corrupted token that only one
shard sees fails the bundle; a dropped, repeated or foreign shard fails every
replayed claim; on Dask, `verify --shards` and `construct --shards` print and
write what one process does; without Dask the options are one error line."""
from __future__ import annotations

import hashlib
import json
import random
import re
import socket
import subprocess
import sys
from contextlib import contextmanager, suppress
from fractions import Fraction
from pathlib import Path

import pytest

from tfcert import shards
from tfcert.bench.bench import random_dataset
from tfcert.construct.bundle import build
from tfcert.cli.main import main
from tfcert.selftest.selftest import make_bundles, mutate
from tfcert.verify.check import check_certificate
from tfcert.verify.errors import InputError
from tfcert.verify.formats import parse_document

NAMES = ("model.json", "dataset.json", "certificate.json")


def report(files: dict[str, bytes], k: int | None = None, connect=shards.in_process):
    """(verdict, every result's place and failures) of one process, or of k shards."""
    docs = [parse_document(n, files[n]) for n in NAMES]
    try:
        r = check_certificate(*docs, replay=None if k is None else shards.ShardedReplay(connect, k))
    except InputError as exc:
        return "refused", str(exc)
    return r.ok, [(x.phase, x.kind, x.where, x.failures) for x in r.results]


def rehashed(files: dict[str, bytes], **values) -> dict[str, bytes]:
    """The files with some replaced by JSON values, the certificate's hashes made to match (as a forger would)."""
    out = dict(files)
    for name, value in values.items():
        out[f"{name}.json"] = json.dumps(value).encode()
    cert = json.loads(out["certificate.json"])
    cert["model_sha256"] = hashlib.sha256(out["model.json"]).hexdigest()
    cert["dataset_sha256"] = hashlib.sha256(out["dataset.json"]).hexdigest()
    out["certificate.json"] = json.dumps(cert).encode()
    return out


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """A bundle of 6 sequences of 5 tokens (hats, snaps, argmax, float claims)."""
    path = tmp_path_factory.mktemp("grid") / "dataset.json"
    path.write_bytes(random_dataset(6, 5, 2, 4))
    return dict(build(path).files)


def one_shard_corruption(files: dict[str, bytes]) -> tuple[dict[str, bytes], int]:
    """A target of one sequence moved by 1 and one hat's `to` in the certificate
    moved: each seen by the one shard that holds the sequence."""
    data, cert = json.loads(files["dataset.json"]), json.loads(files["certificate.json"])
    data["pairs"][4]["output"][0][0] = str(Fraction(data["pairs"][4]["output"][0][0]) + 1)
    hat = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "hat" and c["moves"][0][0] == 1)
    hat["to"][0] = str(Fraction(hat["to"][0]) + 1)
    return rehashed(files, dataset=data, certificate=cert), 4


# ---------------------------------------------------------------- the split

@pytest.mark.parametrize("lengths, k", [([5] * 6, 2), ([1, 9, 3, 3, 2], 3), ([4], 3), ([2, 2], 5)])
def test_split_is_a_balanced_partition(lengths, k):
    parts = shards.split(lengths, k)
    assert sorted(j for p in parts for j in p) == list(range(len(lengths)))
    assert len(parts) == min(k, len(lengths)) and all(parts) and all(p == sorted(p) for p in parts)
    loads = [sum(lengths[j] for j in p) for p in parts]
    assert max(loads) - min(loads) <= max(lengths)
    assert shards.partition_problem(parts, len(lengths)) is None


def test_split_refuses_no_shards():
    with pytest.raises(InputError, match="--shards 0: expected at least 1 shard"):
        shards.split([3, 3], 0)


# ---------------------------------------------------------------- the merge is one process's report

def test_sharded_report_is_one_process_report(grid):
    assert report(grid) == report(grid, 2) == report(grid, 4) == report(grid, 6)
    assert report(grid)[0] is True


def test_corrupted_token_in_one_shard_fails_the_bundle(grid):
    bad, _ = one_shard_corruption(grid)
    single = report(bad)
    assert single[0] is False
    assert report(bad, 3) == single
    failed = [f for *_, fs in single[1] for f in fs]
    assert any(f.startswith("sequence 4: output set differs") for f in failed)
    assert any("not at the stated target" in f or "do not move it" in f for f in failed)


@pytest.fixture(scope="module")
def softmax_grid(tmp_path_factory):
    """A softmax bundle of 6 sequences of 4 tokens (a tau_star claim)."""
    path = tmp_path_factory.mktemp("softmax") / "dataset.json"
    path.write_bytes(random_dataset(6, 4, 2, 3))
    return dict(build(path, "softmax").files)


@pytest.mark.parametrize("field, change", [(None, None), ("noise_bound", lambda v: v / 4), ("radius", lambda v: v / 4),
                                           ("step", lambda v: v * 2 ** 20), ("step", lambda v: v / 2 ** 30),
                                           ("closed_form", lambda v: v * 2), ("closed_form", lambda v: v / 2)])
def test_tau_star_claim_gets_one_process_report(softmax_grid, field, change):
    """tau_star's verdict on the shards' maxima: the same failures as one process, each
    changed field failing (the sharded check merges maxima, it does not copy the kernel's)."""
    files = softmax_grid
    if field is not None:
        cert = json.loads(files["certificate.json"])
        claim = next(c for p in cert["phases"] for c in p["claims"] if c["kind"] == "tau_star")
        claim[field] = str(change(Fraction(claim[field])))
        files = rehashed(files, certificate=cert)
    single = report(files)
    assert single[0] is (field is None)
    assert report(files, 2) == report(files, 3) == single


@pytest.mark.slow
def test_mutants_get_one_process_report():
    """Random single changes (the selftest's), each verified by one process and by 3 shards."""
    bundles = make_bundles(0, 2)
    rng = random.Random(7)
    for _ in range(80):
        files, what = mutate(rng, rng.choice(bundles))
        assert report(files) == report(files, 3), what


@pytest.mark.parametrize("tamper", ["drop", "repeat", "foreign bytes"])
def test_a_scheduler_mistake_fails_every_replayed_claim(grid, tamper):
    @contextmanager
    def faulty(workers):
        def run(tasks):
            results = [shards.verify_shard(*args) for args in tasks]
            if tamper == "drop":
                results.pop()
            elif tamper == "repeat":
                results.append(results[0])
            else:
                results[0]["sha256"]["model"] = "0" * 64
            yield from results
        yield run

    ok, results = report(grid, 3, faulty)
    assert ok is False
    replayed = [fs for _, kind, _, fs in results if kind in shards.LOCAL]
    assert replayed and all(fs and fs[0].startswith("not checked: ") for fs in replayed)
    assert all(not fs for _, kind, _, fs in results if kind not in shards.LOCAL)


# ---------------------------------------------------------------- the command line

def run(argv, capsys) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_shards_zero_is_one_error_line(grid, tmp_path, capsys):
    for name, data in grid.items():
        (tmp_path / name).write_bytes(data)
    rc, out, err = run(["verify", tmp_path, "--shards", "0"], capsys)
    assert (rc, out) == (2, "") and err == "error: --shards 0: expected at least 1 shard\n"


def test_without_dask_the_options_say_to_install_the_extra(grid, tmp_path, capsys, monkeypatch):
    for name, data in grid.items():
        (tmp_path / name).write_bytes(data)
    monkeypatch.setitem(sys.modules, "dask", None)  # import dask raises ImportError
    for option in (["--shards", "2"], ["--scheduler", "tcp://127.0.0.1:8786"]):
        rc, out, err = run(["verify", tmp_path, *option], capsys)
        assert (rc, out) == (2, "") and err.count("\n") == 1
        assert err.startswith("error: ") and "pip install 'dask[distributed]'" in err


def test_one_process_imports_no_dask(grid, tmp_path):
    for name, data in grid.items():
        (tmp_path / name).write_bytes(data)
    code = ("import sys; from tfcert.cli.main import main; rc = main(['-q', 'verify', sys.argv[1]]); "
            "assert rc == 0; assert not any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, capture_output=True)


@pytest.mark.slow
@pytest.mark.filterwarnings("error::UserWarning")  # the CLI would print it on stderr
def test_verify_on_dask_prints_what_one_process_prints(grid, tmp_path, capsys):
    pytest.importorskip("distributed")
    bad, _ = one_shard_corruption(grid)
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
    outputs = []
    busy = socket.socket()  # Dask's default HTTP port taken (here, or by another cluster): no warning either way
    with suppress(OSError):
        busy.bind(("", 8787))
        busy.listen()
    for extra in ([], ["--shards", "2"]):
        junit = tmp_path / f"junit{len(extra)}.xml"
        rc, out, err = run(["-q", "verify", tmp_path, "--junit", junit, *extra], capsys)
        outputs.append((rc, out, err, re.sub(r'time="[0-9.]+"', 'time=""', junit.read_text())))
    busy.close()
    assert outputs[0] == outputs[1] and outputs[0][0] == 1
    assert "sequence 4: output set differs" in outputs[0][1]


@pytest.mark.slow
def test_construct_on_dask_writes_the_same_bundle(tmp_path, capsys):
    pytest.importorskip("distributed")
    dataset = tmp_path / "dataset.json"
    dataset.write_bytes(random_dataset(5, 4, 2, 3))
    assert run(["-q", "construct", dataset, "-o", tmp_path / "one"], capsys)[0] == 0
    assert run(["-q", "construct", dataset, "-o", tmp_path / "two", "--shards", "2"], capsys)[0] == 0
    for name in NAMES:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_unreachable_scheduler_is_one_error_line(grid, tmp_path, capsys, monkeypatch):
    pytest.importorskip("distributed")
    for name, data in grid.items():
        (tmp_path / name).write_bytes(data)
    monkeypatch.setattr(shards, "CONNECT_TIMEOUT", 1)
    rc, out, err = run(["verify", tmp_path, "--scheduler", "tcp://127.0.0.1:9"], capsys)
    assert (rc, out) == (2, "") and err.count("\n") == 1
    assert err.startswith("error: --scheduler tcp://127.0.0.1:9: cannot reach the Dask scheduler within 1s")


@pytest.mark.slow
def test_bad_input_under_shards_is_one_error_line_and_closes_the_booted_cluster(grid, tmp_path, capsys):
    """--shards boots its LocalCluster while the files are parsed; a parse that fails ends the
    command with the one-process error, and the cluster booted for it is shut down."""
    pytest.importorskip("distributed")
    from distributed.deploy.spec import SpecCluster

    for name, data in grid.items():
        (tmp_path / name).write_bytes(data)
    cert = json.loads(grid["certificate.json"])
    next(c for p in cert["phases"] for c in p["claims"] if "block" in c)["block"] = "NaN"
    (tmp_path / "certificate.json").write_text(json.dumps(cert))
    expected = run(["verify", tmp_path], capsys)
    assert expected[0] == 2 and expected[2].count("\n") == 1
    assert run(["verify", tmp_path, "--shards", "2"], capsys) == expected
    assert all(c.status.name == "closed" for c in list(SpecCluster._instances))


def _bundle(blocks: list, pairs: list, fmt: str) -> dict[str, bytes]:
    """A hardmax bundle of d = 2 (pairs: (inputs, outputs)) whose certificate claims exactness
    and a float bound of 0."""
    def vec(v):
        return [str(Fraction(x)) for x in v]
    model = {"format": "tfcert.model/1", "d": 2, "attention": "hardmax", "blocks": blocks}
    data = {"format": "tfcert.dataset/1", "d": 2,
            "pairs": [{"input": [vec(t) for t in x], "output": [vec(t) for t in y]} for x, y in pairs]}
    cert = {"format": "tfcert.certificate/1", "attention": "hardmax", "theorem": "1.6",
            "phases": [{"name": "all", "blocks": [0, len(blocks)],
                        "claims": [{"kind": "exact"}, {"kind": "float", "format": fmt, "bound": "0"}]}]}
    return rehashed({}, model=model, dataset=data, certificate=cert)


@pytest.mark.parametrize("fmt, emax", [("binary64", 1023), ("binary32", 127), ("binary16", 15)])
@pytest.mark.parametrize("layer", ["sa", "ff"])
def test_range_checks_are_per_sequence_so_shards_refuse_what_one_process_refuses(fmt, emax, layer):
    """A float run mixes the tokens of one sequence only. Over the whole dataset the largest
    magnitudes of the two coordinates, B and B, come from two sequences: ⟨x_i, x_l⟩ (SA) or the
    pre-activation x_1 + x_2 (FF) bounded over them would overflow; within each sequence it does
    not. One process once refused what each shard proved (red team, 2026-12-04); both prove it
    now, and where one sequence holds both (B, B), both refuse, naming that sequence."""
    if layer == "sa":  # A = 2^-20 I keeps the scores small; ρ = 1, V = 0 copies every token
        big, w = 2 ** ((emax - 1) // 2), Fraction(0)  # B² = 2^(emax-1): 2·B² fits, 2·2B² does not
        ff = {"eta": "1", "U": [["0", "0"]], "b": ["-1"], "W": [["0"], ["0"]]}
        sa = {"rho": "1", "A": {"scale": f"1/{2 ** 20}", "low_rank": []}, "V": {"scale": "0", "low_rank": []}}
    else:  # relu(x_1 + x_2)·w on coordinate 1: 4B overflows, 2B does not; w = 2^-emax keeps the SA's checks small
        big, w = 2 ** (emax - 1), Fraction(1, 2 ** emax)
        ff = {"eta": "0", "U": [["1", "1"]], "b": ["0"], "W": [[str(w)], ["0"]]}
        sa = {"rho": "1", "A": {"scale": "0", "low_rank": []}, "V": {"scale": "0", "low_rank": []}}

    def pair(seq):
        return seq, seq if not w else [(w * (a + b), 0) for a, b in seq]
    apart = [pair([(big, 0), (big // 2, 0)]), pair([(0, big), (0, big // 2)])]
    together = [pair([(big // 2, 0), (big // 4, 0)]), pair([(big, big), (big // 2, big // 2)])]
    for pairs, proved in ((apart, True), (together, False)):
        files = _bundle([{"ff": ff, "sa": sa}], pairs, fmt)
        one = report(files)
        assert one == report(files, 2)
        failures = [f for _, _, _, fs in one[1] for f in fs]
        assert one[0] is proved, failures
        if not proved:
            assert len(failures) == 1 and f"no {fmt} bound: block 0 {layer.upper()}: sequence 1: " in failures[0]


def test_a_softmax_layer_takes_points_or_enclosures_per_sequence_so_shards_agree():
    """After a scored softmax layer, sequence 0's tokens are enclosures while sequence 1's (every
    score tied, every value equal) and sequence 2's (one token) stay exact points. A later
    uniform softmax mean (A = 0) of sequence 1 is 7/3: exact, or an arb box that is no point.
    The replay once chose between the two by one flag for the whole dataset, so one process
    refused `exact` on sequence 1 while the shard holding it alone proved it (red team,
    2026-12-04); it now decides per sequence: both prove it."""
    e2 = [{"u": ["0", "1"], "v": ["0", "1"]}]
    model = {"format": "tfcert.model/1", "d": 2, "attention": "softmax", "temperature": "12102203/16777216",
             "blocks": [{"ff": {"eta": "1", "U": [["0", "0"]], "b": ["-1"], "W": [["0"], ["0"]]},
                         "sa": {"rho": "1", "A": {"scale": "0", "low_rank": e2}, "V": {"scale": "0", "low_rank": e2}}},
                        {"ff": {"eta": "1", "U": [["1", "0"]] * 4, "b": ["-199/2", "-399/4", "-401/4", "-201/2"],
                                "W": [["1", "-2", "2", "-1"], ["0", "0", "0", "0"]]},
                         "sa": {"rho": "0", "A": {"scale": "0", "low_rank": []},
                                "V": {"scale": "0", "low_rank": [{"u": ["1", "0"], "v": ["1", "0"]}]}}}]}
    data = {"format": "tfcert.dataset/1", "d": 2, "pairs": [
        {"input": [["1", "1"], ["2", "2"]], "output": [["3/2", "0"]]},
        {"input": [["1", "0"], ["2", "0"], ["4", "0"]], "output": [["7/3", "0"]]},
        {"input": [["5", "0"]], "output": [["5", "0"]]}]}
    tau = {"kind": "tau_star", "block": 0, "tau_star": "12102203/16777216", "radius": "1/4", "noise_bound": "1/4",
           "step": "1/16777216", "closed_form": "12102203/16777216"}  # the largest τ on 2^-24 with e^{-1/τ} ≤ 1/4
    snap = {"kind": "snap", "block": 1, "units": [0, 1, 2, 3], "coordinate": 0, "center": "100", "radius": "1/4",
            "reach": "1/2", "moves": [], "to": ["100", "0"]}  # far from every token: it ties the radius to the model
    files = rehashed({}, model=model, dataset=data, certificate={
        "format": "tfcert.certificate/1", "attention": "softmax", "theorem": "1.8", "tau_star": "12102203/16777216",
        "phases": [{"name": "all", "blocks": [0, 2], "claims": [tau, snap, {"kind": "exact"}]}]})
    assert shards.split([2, 3, 1], 2) == [[1], [0, 2]]  # sequence 1 alone in a shard of points
    one = report(files)
    assert one == report(files, 2) and one[0] is True, one


@pytest.mark.slow
def test_shards_bound_is_amdahls_law_on_the_parts_of_one_verification():
    """tests/shards_bound.py (docs/scaling.md, "2 cores"): one process's parts add up, and no
    number of shards can beat what the parts it cannot split leave (below K ×), Dask's own
    import and close lowering the bound further."""
    script = Path(__file__).parent / "shards_bound.py"
    bundle = Path(__file__).parent.parent / "certificates" / "demo-hardmax"
    done = subprocess.run([sys.executable, str(script), str(bundle)], capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    assert out["ok"] is True
    parts = out["python_start"] + out["read"] + out["parse"] + out["replayed_claims"] + out["after"]
    assert abs(parts - out["one_process"]) <= 0.05
    for k in (2, 4):
        assert 1 <= out[f"best_speedup_{k}_without_dask"] < k
        if out["dask_import"] is not None:
            assert out[f"best_speedup_{k}"] <= out[f"best_speedup_{k}_without_dask"]
