"""Each claim kind catches the smallest change that breaks it (a test below ties the kinds to them).

A corrupted model is re-hashed into the certificate (as a forger would do),
so the claim itself — not the integrity hash — must catch it. Every check
goes through ``tfcert verify`` in-process: exit 1, the human output names the
failing claim, and the --json result has the failing kind and block."""
from __future__ import annotations

import copy
import hashlib
import json
from fractions import Fraction
from pathlib import Path

import pytest
from naive import forward
from naive import q as exact_q
from conftest import REPO, write_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_construct_property import EQUAL_MEANS

from tfcert.construct.bundle import build
from tfcert.cli.main import main

TINY = Fraction(1, 10**30)
SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
NAMES = ["demo", "equal-means"]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("datasets")
    sources = {"demo": REPO / "tfcert" / "examples" / "demo.json",
               "equal-means": write_json(tmp / "equal-means.json", EQUAL_MEANS)}
    out = {}
    for name, path in sources.items():
        b = build(path)
        out[name] = {"raw": dict(b.files), **{k.split(".")[0]: json.loads(v) for k, v in b.files.items()}}
    phases = [p["name"] for p in out["equal-means"]["certificate"]["phases"] if p["blocks"][1] > p["blocks"][0]]
    assert "bump" in phases  # the equal-means dataset exercises the bump phase
    return out


def q(text) -> Fraction:
    return Fraction(str(text))


def plus(text, delta: Fraction) -> str:
    v = q(text) + delta
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Run:
    def __init__(self, rc: int, report: dict, human: str):
        self.rc, self.report, self.human = rc, report, human

    @property
    def failing(self) -> set[tuple[str, str, int | None]]:
        return {(r["phase"], r["kind"], r["block"]) for r in self.report["results"] if not r["ok"]}

    @property
    def failing_kinds(self) -> set[tuple[str, int | None]]:
        return {(k, b) for _, k, b in self.failing}


def verify(tmp: Path, bundle: dict, model=None, cert=None, dataset=None, rehash: bool = True,
           raw: dict | None = None, capsys=None) -> Run:
    """Write (possibly corrupted) files, re-hash the model/dataset into the
    certificate, and run ``tfcert verify`` twice (--json and human)."""
    raw = dict(raw or {})
    files = {"model": model, "certificate": cert, "dataset": dataset}
    data = {}
    for key in ("model", "dataset"):
        data[key] = raw.get(key) or (bundle["raw"][f"{key}.json"] if files[key] is None
                                     else json.dumps(files[key]).encode())
    cert = copy.deepcopy(bundle["certificate"] if cert is None else cert)
    if rehash:
        cert["model_sha256"], cert["dataset_sha256"] = sha(data["model"]), sha(data["dataset"])
    data["certificate"] = raw.get("certificate") or json.dumps(cert).encode()
    tmp.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key, blob in data.items():
        paths[key] = tmp / f"{key}.json"
        paths[key].write_bytes(blob)
    argv = ["verify", "--model", str(paths["model"]), "--dataset", str(paths["dataset"]),
            "--certificate", str(paths["certificate"])]
    capsys.readouterr()
    rc = main(argv + ["--json"])
    out, err = capsys.readouterr()
    assert err == "", err
    report = json.loads(out)
    rc_human = main(argv)
    human, err = capsys.readouterr()
    assert rc_human == rc and err == ""
    return Run(rc, report, human)


def assert_caught(run: Run, kind: str, block: int | None, only: bool = False) -> None:
    assert run.rc == 1, run.human
    assert run.report["ok"] is False
    assert (kind, block) in run.failing_kinds, (kind, block, run.failing)
    if only:
        assert run.failing_kinds == {(kind, block)}, run.failing
    phase = next(p for p, k, b in run.failing if (k, b) == (kind, block))
    name = f"{phase}/{kind}" + ("" if block is None else f"/block {block}")
    assert f"FAIL {name} (" in run.human, run.human
    n = run.report["failed"]
    assert run.human.rstrip().splitlines()[-1].endswith(f": {n} claim(s) FAIL")
    assert n == len([r for r in run.report["results"] if not r["ok"]]) >= 1


def claims(cert: dict, kind: str) -> list[tuple[str, dict]]:
    return [(p["name"], c) for p in cert["phases"] for c in p["claims"] if c["kind"] == kind]


def claim_of(cert: dict, kind: str, phase: str | None = None) -> dict:
    return next(c for name, c in claims(cert, kind) if phase is None or name == phase)


def phase_block(cert: dict, name: str) -> int:
    return next(p["blocks"][0] for p in cert["phases"] if p["name"] == name)


# ---------------------------------------------------------------- sanity

@pytest.mark.parametrize("name", NAMES)
def test_unmodified_bundle_verifies(name, bundles, tmp_path, capsys):
    run = verify(tmp_path, bundles[name], rehash=False, capsys=capsys)
    assert run.rc == 0 and run.report["ok"] and run.report["failed"] == 0
    assert run.human.rstrip().splitlines()[-1] == f"{run.report['claims']} claims checked: all claims hold"


@pytest.mark.parametrize("name", NAMES)
def test_certificate_without_exact_claim(name, bundles, tmp_path, capsys):
    cert = copy.deepcopy(bundles[name]["certificate"])
    for p in cert["phases"]:
        p["claims"] = [c for c in p["claims"] if c["kind"] != "exact"]
    assert_caught(verify(tmp_path, bundles[name], cert=cert, capsys=capsys), "exact", None, only=True)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", ["empty-claims", "no-phases"])
def test_certificate_without_claims(name, how, bundles, tmp_path, capsys):
    cert = copy.deepcopy(bundles[name]["certificate"])
    if how == "no-phases":
        cert["phases"] = []
    for p in cert["phases"]:
        p["claims"] = []
    run = verify(tmp_path, bundles[name], cert=cert, capsys=capsys)
    assert_caught(run, "exact", None, only=True)
    assert run.report["claims"] == 3  # the two hashes (holding) and the missing exactness claim


@pytest.mark.parametrize("name", NAMES)
def test_hardmax_certificate_stating_tau_star(name, bundles, tmp_path, capsys):
    cert = copy.deepcopy(bundles[name]["certificate"])
    cert["tau_star"] = "1"
    assert_caught(verify(tmp_path, bundles[name], cert=cert, capsys=capsys), "tau_star", None, only=True)


# ---------------------------------------------------------------- integrity

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("which", ["model", "dataset"])
def test_hash_of_other_bytes(name, which, bundles, tmp_path, capsys):
    """Semantically equal bytes (a trailing newline) are still other bytes."""
    b = bundles[name]
    run = verify(tmp_path, b, rehash=False, raw={which: b["raw"][f"{which}.json"] + b"\n"}, capsys=capsys)
    assert_caught(run, f"{which}_sha256", None, only=True)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("which", ["model", "dataset"])
def test_stated_hash_one_digit_off(name, which, bundles, tmp_path, capsys):
    cert = copy.deepcopy(bundles[name]["certificate"])
    h = cert[f"{which}_sha256"]
    cert[f"{which}_sha256"] = h[:-1] + ("0" if h[-1] != "0" else "1")
    run = verify(tmp_path, bundles[name], cert=cert, rehash=False, capsys=capsys)
    assert_caught(run, f"{which}_sha256", None, only=True)


# ---------------------------------------------------------------- uniform attention and separation

@pytest.mark.parametrize("name", NAMES)
def test_uniform_attention_scale(name, bundles, tmp_path, capsys):
    b = bundles[name]
    k = claim_of(b["certificate"], "uniform_attention")["block"]
    model = copy.deepcopy(b["model"])
    model["blocks"][k]["sa"]["A"]["scale"] = str(TINY)
    run = verify(tmp_path, b, model=model, capsys=capsys)
    assert_caught(run, "uniform_attention", k)
    assert_caught(run, "separation", k)  # the attention is no longer the mean


@pytest.mark.parametrize("name", NAMES)
def test_uniform_attention_low_rank(name, bundles, tmp_path, capsys):
    """A = 0·I + u vᵀ with a tiny u: not the zero matrix."""
    b = bundles[name]
    k = claim_of(b["certificate"], "uniform_attention")["block"]
    model = copy.deepcopy(b["model"])
    model["blocks"][k]["sa"]["A"]["low_rank"] = [{"u": [str(TINY), "0"], "v": ["0", "1"]}]
    assert_caught(verify(tmp_path, b, model=model, capsys=capsys), "uniform_attention", k)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("sign", [1, -1])
def test_separation_min_gap(name, sign, bundles, tmp_path, capsys):
    b = bundles[name]
    cert = copy.deepcopy(b["certificate"])
    claim = claim_of(cert, "separation")
    claim["min_gap"] = plus(claim["min_gap"], sign * TINY)
    assert_caught(verify(tmp_path, b, cert=cert, capsys=capsys), "separation", claim["block"], only=True)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("field", ["lambda", "eta", "projection", "direction"])
def test_separation_model_and_direction(name, field, bundles, tmp_path, capsys):
    """The separation block: λ (V's term), the FF's η, the projection row, and
    the claim's direction. A model change moves every t by a tiny amount: the
    stated least gap or some hat's stated margin no longer holds."""
    b = bundles[name]
    cert = copy.deepcopy(b["certificate"])
    claim = claim_of(cert, "separation")
    k = claim["block"]
    model = copy.deepcopy(b["model"])
    block = model["blocks"][k]
    if field == "lambda":
        block["sa"]["V"]["low_rank"][0]["u"][0] = plus(block["sa"]["V"]["low_rank"][0]["u"][0], TINY)
    elif field == "eta":
        block["ff"]["eta"] = plus(block["ff"]["eta"], TINY)
    elif field == "projection":
        block["ff"]["U"][0][1] = plus(block["ff"]["U"][0][1], TINY)
    else:
        claim["direction"][0] = plus(claim["direction"][0], TINY)  # [1] would shift every t alike
        model = None
    run = verify(tmp_path, b, model=model, cert=cert, capsys=capsys)
    if model is None:
        assert_caught(run, "separation", k, only=True)
    else:
        assert run.rc == 1 and any(kind in ("separation", "hat") for _, kind, _ in run.failing), run.failing


# ---------------------------------------------------------------- hats

def hat_corruptions():
    return st.sampled_from(["b", "W", "U", "margin", "drop-move", "add-move", "to", "lo-in", "hi-in", "widen"])


@pytest.mark.slow
@SETTINGS
@given(data=st.data(), name=st.sampled_from(NAMES), how=hat_corruptions())
def test_hat_smallest_corruption(data, name, how, bundles, tmp_path_factory, capsys):
    """Any hat (bump, leaders, interpolation), any unit, any coordinate."""
    b = bundles[name]
    cert = copy.deepcopy(b["certificate"])
    model = None
    all_hats = claims(cert, "hat")
    phase, claim = data.draw(st.sampled_from(all_hats), label="hat")
    k = claim["block"]
    sign = data.draw(st.sampled_from([1, -1]), label="sign")
    if how in ("b", "W", "U"):
        model = copy.deepcopy(b["model"])
        ff = model["blocks"][k]["ff"]
        unit = data.draw(st.sampled_from(claim["units"]), label="unit")
        if how == "b":
            ff["b"][unit] = plus(ff["b"][unit], sign * TINY)
        elif how == "W":
            row = data.draw(st.integers(0, len(ff["W"]) - 1), label="row")
            ff["W"][row][unit] = plus(ff["W"][row][unit], sign * TINY)
        else:
            col = data.draw(st.integers(0, len(ff["U"][unit]) - 1), label="col")
            ff["U"][unit][col] = plus(ff["U"][unit][col], sign * TINY)
    elif how == "margin":
        claim["margin"] = "1" if claim["margin"] is None else plus(claim["margin"], sign * TINY)
    elif how == "drop-move":
        claim["moves"].pop(data.draw(st.integers(0, len(claim["moves"]) - 1), label="move"))
    elif how == "add-move":
        seqs = b["dataset"]["pairs"]
        j = data.draw(st.integers(0, len(seqs) - 1), label="seq")
        i = data.draw(st.integers(0, len(seqs[j]["input"]) - 1), label="token")
        if [j, i] in claim["moves"]:
            claim["moves"].remove([j, i])
        else:
            claim["moves"].append([j, i])
    elif how == "to":
        coord = data.draw(st.integers(0, len(claim["to"]) - 1), label="coord")
        claim["to"][coord] = plus(claim["to"][coord], sign * TINY)
    elif how == "widen":  # a weaker but true region claim; the margin shrinks by TINY
        claim["window"] = [plus(claim["window"][0], -TINY), plus(claim["window"][1], TINY)]
    else:  # narrow one end by TINY: the group is non-zero just outside the claimed window
        end = 0 if how == "lo-in" else 1
        claim["window"][end] = plus(claim["window"][end], TINY if end == 0 else -TINY)
    run = verify(tmp_path_factory.mktemp("hat"), b, model=model, cert=cert, capsys=capsys)
    assert_caught(run, "hat", k, only=model is None and how not in ("b", "W", "U"))
    assert any(r["kind"] == "hat" and r["block"] == k and r["phase"] == phase and not r["ok"]
               for r in run.report["results"])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("phase", ["bump", "leaders", "interpolation"])
def test_hat_active_weight(name, phase, bundles, tmp_path, capsys):
    """Unit 0 of a hat is non-zero on its plateau: a tiny change of its W
    column moves the token off its stated target, which the hat claim
    catches. (The model may still interpolate — a leader's code that errs
    by less than the snap's plateau still lands on its target — so exactness
    need not fail.)"""
    b = bundles[name]
    found = [c for p, c in claims(b["certificate"], "hat") if p == phase]
    if not found:
        pytest.skip(f"no {phase} hat in {name}")
    claim = found[-1]
    row = 1 if phase == "leaders" else 0
    model = copy.deepcopy(b["model"])
    W = model["blocks"][claim["block"]]["ff"]["W"]
    W[row][claim["units"][0]] = plus(W[row][claim["units"][0]], TINY)
    run = verify(tmp_path, b, model=model, capsys=capsys)
    assert_caught(run, "hat", claim["block"])
    failure = next(r for r in run.report["results"] if r["kind"] == "hat" and r["block"] == claim["block"]
                   and not r["ok"])["failures"]
    assert any("not at the stated target" in f for f in failure), failure


# ---------------------------------------------------------------- collapse: argmax and clusters

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", ["gap", "ties", "argmax-extra", "argmax-other", "gap-null"])
def test_argmax_certificate(name, how, bundles, tmp_path, capsys):
    b = bundles[name]
    cert = copy.deepcopy(b["certificate"])
    claim = claim_of(cert, "argmax")
    entry = claim["tokens"][-1][-1]  # [argmax indices, gap] of the last token
    n = len(claim["tokens"][-1])
    if how == "gap":
        entry[1] = plus(entry[1], TINY)
    elif how == "gap-null":
        entry[1] = None
    elif how == "ties":
        claim["ties"] += 1
    elif how == "argmax-extra":
        entry[0] = sorted(set(entry[0]) | {(entry[0][0] + 1) % n})
    else:
        entry[0] = [(entry[0][0] + 1) % n]
    assert_caught(verify(tmp_path, b, cert=cert, capsys=capsys), "argmax", claim["block"], only=True)


@pytest.mark.parametrize("name", NAMES)
def test_argmax_scores(name, bundles, tmp_path, capsys):
    """A = (1 + 10^-30)·I: the argmax sets are unchanged (so every token, and
    every later claim, is as before) but every gap moves."""
    b = bundles[name]
    k = claim_of(b["certificate"], "argmax")["block"]
    model = copy.deepcopy(b["model"])
    model["blocks"][k]["sa"]["A"]["scale"] = plus(model["blocks"][k]["sa"]["A"]["scale"], TINY)
    assert_caught(verify(tmp_path, b, model=model, capsys=capsys), "argmax", k, only=True)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("delta", [1, -1])
def test_clusters_count(name, delta, bundles, tmp_path, capsys):
    b = bundles[name]
    cert = copy.deepcopy(b["certificate"])
    claim = claim_of(cert, "clusters")
    j = max(range(len(claim["distinct"])), key=lambda i: claim["distinct"][i])  # stays ≥ 1 when lowered
    claim["distinct"][j] += delta
    assert_caught(verify(tmp_path, b, cert=cert, capsys=capsys), "clusters", claim["block"], only=True)


@pytest.mark.parametrize("name", NAMES)
def test_clusters_rho(name, bundles, tmp_path, capsys):
    """ρ = 10^-30 in the collapse: tokens no longer merge onto their leaders."""
    b = bundles[name]
    k = claim_of(b["certificate"], "clusters")["block"]
    model = copy.deepcopy(b["model"])
    model["blocks"][k]["sa"]["rho"] = str(TINY)
    run = verify(tmp_path, b, model=model, capsys=capsys)
    assert_caught(run, "clusters", k)
    assert_caught(run, "exact", None)


# ---------------------------------------------------------------- exact and size

@pytest.mark.parametrize("name", NAMES)
def test_exact_target_moved(name, bundles, tmp_path, capsys):
    """One target coordinate moved by 10^-30 in the dataset, hash updated: the
    model still lands where the certificate's hats say, so only exactness fails."""
    b = bundles[name]
    ds = copy.deepcopy(b["dataset"])
    ds["pairs"][-1]["output"][0][1] = plus(ds["pairs"][-1]["output"][0][1], TINY)
    run = verify(tmp_path, b, dataset=ds, capsys=capsys)
    assert_caught(run, "exact", None, only=True)
    failure = next(r for r in run.report["results"] if r["kind"] == "exact")["failures"]
    assert failure == [f"sequence {len(ds['pairs']) - 1}: output set differs from the target set "
                       f"(squared Hausdorff distance 1/{10**60})"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("field", ["blocks", "width", "parameters", "d_sum_m", "bounds.blocks", "bounds.width",
                                   "bounds.parameters", "within", "theorem"])
def test_size_claim(name, field, bundles, tmp_path, capsys):
    b = bundles[name]
    cert = copy.deepcopy(b["certificate"])
    claim = claim_of(cert, "size")
    if field == "within":
        claim["within"] = not claim["within"]
    elif field == "theorem":
        claim["theorem"] = "1.8"
    elif field.startswith("bounds."):
        claim["bounds"][field.split(".")[1]] += 1
    else:
        claim[field] += 1
    assert_caught(verify(tmp_path, b, cert=cert, capsys=capsys), "size", None, only=True)


def test_size_claim_of_a_bigger_model(bundles, tmp_path, capsys):
    """An extra identity block appended to the model: the size claim (and only
    it — the block is the identity) no longer matches."""
    b = bundles["demo"]
    model = copy.deepcopy(b["model"])
    model["blocks"].append(copy.deepcopy(model["blocks"][-1]))
    model["blocks"][-1]["ff"] = {"eta": "1", "U": [], "b": [], "W": [[], []]}
    cert = copy.deepcopy(b["certificate"])
    cert["phases"][-1]["blocks"][1] += 1
    assert_caught(verify(tmp_path, b, model=model, cert=cert, capsys=capsys), "size", None, only=True)



# ---------------------------------------------------------------- snap and float

@pytest.mark.parametrize("name", NAMES)
def test_snap_claim_center_moved(name, bundles, tmp_path, capsys):
    """A snap's plateau centre moved by 10^-30: the code no longer sits where the claim says."""
    b = bundles[name]
    cert = copy.deepcopy(b["certificate"])
    claim = claim_of(cert, "snap")
    claim["center"] = plus(claim["center"], TINY)
    assert_caught(verify(tmp_path, b, cert=cert, capsys=capsys), "snap", claim["block"], only=True)


@pytest.mark.parametrize("name", NAMES)
def test_float_claim_bound_halved(name, bundles, tmp_path, capsys):
    """A float claim stating half its bound: below what the analysis proves, so it fails."""
    b = bundles[name]
    cert = copy.deepcopy(b["certificate"])
    claim = claim_of(cert, "float")
    claim["bound"] = str(q(claim["bound"]) / 2)
    assert_caught(verify(tmp_path, b, cert=cert, capsys=capsys), "float", None, only=True)


def test_every_claim_kind_is_caught_through_the_cli():
    """Every kind the checker knows (verify/check.py's KINDS) is broken by a test of this file that
    sees ``tfcert verify`` exit 1 naming that kind (assert_caught): a new kind cannot ship without one."""
    import ast

    from tfcert.verify.check import KINDS

    calls = [node for node in ast.walk(ast.parse(Path(__file__).read_text()))
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "assert_caught"]
    caught = {c.args[1].value for c in calls if len(c.args) > 1 and isinstance(c.args[1], ast.Constant)}
    assert set(KINDS) - caught == set(), "claim kinds no corruption test catches"


# ---------------------------------------------------------------- any model entry

def live_leaves(model: dict):
    """(path, value) of every number of the model whose change can matter:
    A of an identity attention (ρ = 1, V = 0) is skipped, it is never used."""
    for k, block in enumerate(model["blocks"]):
        ff, sa = block["ff"], block["sa"]
        yield ("blocks", k, "ff", "eta"), ff["eta"]
        for key in ("U", "W"):
            for i, row in enumerate(ff[key]):
                for j, v in enumerate(row):
                    yield ("blocks", k, "ff", key, i, j), v
        for j, v in enumerate(ff["b"]):
            yield ("blocks", k, "ff", "b", j), v
        identity = sa["rho"] == "1" and sa["V"]["scale"] == "0" and not sa["V"]["low_rank"]
        yield ("blocks", k, "sa", "rho"), sa["rho"]
        for m in ("V",) if identity else ("A", "V"):
            yield ("blocks", k, "sa", m, "scale"), sa[m]["scale"]
            for t, term in enumerate(sa[m]["low_rank"]):
                for uv in ("u", "v"):
                    for j, v in enumerate(term[uv]):
                        yield ("blocks", k, "sa", m, "low_rank", t, uv, j), v


@pytest.mark.slow
@SETTINGS
@given(data=st.data(), name=st.sampled_from(NAMES), sign=st.sampled_from([1, -1]))
def test_any_live_model_number_moved_by_tiny(data, name, sign, bundles, tmp_path_factory, capsys):
    """Moving any number of the model that takes part in the computation by
    ±10^-30 (hash updated) is caught — some claim fails — unless the changed
    model still interpolates, by an independent exact forward pass: the
    construction is robust by design (a snap's plateau absorbs a code that
    errs by 10^-30), and then every claim may well still hold."""
    b = bundles[name]
    path, value = data.draw(st.sampled_from(list(live_leaves(b["model"]))), label="entry")
    model = copy.deepcopy(b["model"])
    node = model
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = plus(value, sign * TINY)
    run = verify(tmp_path_factory.mktemp("any"), b, model=model, capsys=capsys)
    if run.rc == 0:
        outputs = forward(model, [p["input"] for p in b["dataset"]["pairs"]])
        assert all(out == {tuple(exact_q(v) for v in y) for y in pair["output"]}
                   for out, pair in zip(outputs, b["dataset"]["pairs"])), (path, run.human)
