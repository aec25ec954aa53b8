"""Regression tests for certificates that used to verify although false,
inputs that crashed or ran for minutes, and outputs that replaced inputs
(issue "soundness and reliability"). Each attack is written as a forger
would: the certificate's hashes follow the edited files."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import signal
import time
from fractions import Fraction
from pathlib import Path

import pytest
import z3
from conftest import REPO, run, write_json

from tfcert.construct import bundle as bundle_module
from tfcert.construct.bundle import build, write
from tfcert.construct.temperature import bracket
from tfcert.errors import InputError
from tfcert.verify import regions
from tfcert.verify.formats import parse_document
from tfcert.verify.numbers import LIMITS

DEMO = REPO / "tfcert" / "examples" / "demo.json"


@pytest.fixture(scope="module")
def hard() -> dict:
    return {k: json.loads(v) for k, v in build(DEMO).files.items()}


@pytest.fixture(scope="module")
def soft() -> dict:
    return {k: json.loads(v) for k, v in build(DEMO, "softmax").files.items()}


@pytest.fixture(autouse=True)
def default_limits():
    """Each test starts and ends with the default limits (--limit sets them process-wide)."""
    saved = copy.copy(LIMITS)
    yield
    for name, value in vars(saved).items():
        setattr(LIMITS, name, value)


def write_bundle(tmp: Path, files: dict, raw: dict | None = None, rehash: bool = True) -> dict[str, Path]:
    """Write the bundle (values, or raw texts in ``raw``); the certificate's hashes follow the files."""
    raw = dict(raw or {})
    data = {k: raw.get(k) or json.dumps(files[f"{k}.json"]).encode() for k in ("model", "dataset")}
    cert = copy.deepcopy(files["certificate.json"])
    if rehash:
        cert["model_sha256"], cert["dataset_sha256"] = (hashlib.sha256(data[k]).hexdigest()
                                                        for k in ("model", "dataset"))
    data["certificate"] = raw.get("certificate") or json.dumps(cert).encode()
    tmp.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key, blob in data.items():
        paths[key] = tmp / f"{key}.json"
        paths[key].write_bytes(blob if isinstance(blob, bytes) else blob.encode())
    return paths


def verify(paths, capsys, *extra) -> tuple[int, dict, str]:
    argv = ["verify", "--model", paths["model"], "--dataset", paths["dataset"], "--certificate", paths["certificate"]]
    rc, out, err = run([*argv, *extra, "--json"], capsys)
    return rc, json.loads(out) if out else {}, err


def failing(report: dict) -> dict[str, list[str]]:
    return {r["kind"]: r["failures"] for r in report["results"] if not r["ok"]}


def claims(cert: dict, kind: str) -> list[dict]:
    return [c for p in cert["phases"] for c in p["claims"] if c["kind"] == kind]


def one_error(rc: int, out: str, err: str, fragment: str) -> None:
    assert rc == 2 and out == "", (rc, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and fragment in err, err


# ---------------------------------------------------------------- claims that verified although false

def test_hat_unit_listed_twice_is_refused(hard, tmp_path, capsys):
    files = copy.deepcopy(hard)
    hat = claims(files["certificate.json"], "hat")[0]
    hat["units"] = hat["units"] + hat["units"][-1:]
    one_error(*run(verify_argv(write_bundle(tmp_path, files)), capsys), "a unit is listed twice")


def test_hat_on_dead_units_fails(hard, tmp_path, capsys):
    """Three new units copy a hat's U rows and biases with all-zero W columns:
    z3's region part holds vacuously, the moves still happen through the real
    units; the claim must fail because the named units do not make the move."""
    files = copy.deepcopy(hard)
    hat = claims(files["certificate.json"], "hat")[-1]
    ff = files["model.json"]["blocks"][hat["block"]]["ff"]
    width = len(ff["U"])
    for j in hat["units"]:
        ff["U"].append(list(ff["U"][j]))
        ff["b"].append(ff["b"][j])
        for row in ff["W"]:
            row.append("0")
    hat["units"] = list(range(width, width + len(hat["units"])))
    rc, report, _ = verify(write_bundle(tmp_path, files), capsys)
    assert rc == 1 and any("named units do not move it" in f for f in failing(report)["hat"]), report


def test_a_hat_that_moves_what_is_past_its_window_must_say_so(hard, tmp_path, capsys):
    """The demo's leader hats also move every token past their window by ``above``: a claim
    stating another move, or none (zero past the window), fails; a malformed one is refused."""
    hat = next(h for h in claims(hard["certificate.json"], "hat") if "above" in h)
    for change in ("other", "none"):
        files = copy.deepcopy(hard)
        h = next(c for c in claims(files["certificate.json"], "hat") if c["block"] == hat["block"])
        if change == "other":
            h["above"] = [str(Fraction(h["above"][0]) * 2)] + h["above"][1:]
        else:
            del h["above"]
        rc, report, _ = verify(write_bundle(tmp_path / change, files), capsys)
        expected = "is not the stated move above its window" if change == "other" else "non-zero outside its window"
        assert rc == 1 and any(expected in f for f in failing(report)["hat"]), report
    files = copy.deepcopy(hard)
    next(c for c in claims(files["certificate.json"], "hat") if c["block"] == hat["block"])["above"] = ["1"]
    one_error(*run(verify_argv(write_bundle(tmp_path / "bad", files)), capsys), ".above")


def test_tau_star_radius_must_be_the_snaps(soft, tmp_path, capsys):
    files = copy.deepcopy(soft)
    (claim,) = claims(files["certificate.json"], "tau_star")
    claim["radius"] = str(Fraction(claim["radius"]) * 2)
    rc, report, _ = verify(write_bundle(tmp_path, files), capsys)
    assert rc == 1 and any("least snap radius" in f for f in failing(report)["tau_star"])


@pytest.mark.parametrize("factor", [Fraction(1, 10**6), Fraction(1, 2)])
def test_tau_star_closed_form_is_the_formulas_value(factor, soft, tmp_path, capsys):
    """A closed_form below the formula's value (24 bits rounded down) is a
    valid bound too, but not the number the field states: it fails."""
    files = copy.deepcopy(soft)
    (claim,) = claims(files["certificate.json"], "tau_star")
    claim["closed_form"] = str(Fraction(claim["closed_form"]) * factor)
    rc, report, _ = verify(write_bundle(tmp_path, files), capsys)
    assert rc == 1 and any("rounded down to 24 bits" in f for f in failing(report)["tau_star"]), report


IDENTITY_SA = {"rho": "1", "A": {"scale": "0", "low_rank": []}, "V": {"scale": "0", "low_rank": []}}


def test_hat_that_moves_nothing_fails(tmp_path, capsys):
    """A true hat on t = x_1 over (10, 12) whose window holds no token: with
    ``moves`` empty its ``to`` would be checked on nothing, so it fails."""
    ff = {"eta": "1", "U": [["1", "0"]] * 3, "b": ["-10", "-11", "-12"], "W": [["1", "-2", "1"], ["0", "0", "0"]]}
    files = {"model.json": {"format": "tfcert.model/1", "d": 2, "attention": "hardmax",
                            "blocks": [{"ff": ff, "sa": IDENTITY_SA}]},
             "dataset.json": {"format": "tfcert.dataset/1", "d": 2,
                              "pairs": [{"input": [["0", "1"], ["1", "0"]], "output": [["0", "1"], ["1", "0"]]}]},
             "certificate.json": {"format": "tfcert.certificate/1", "attention": "hardmax", "theorem": "1.6",
                                  "phases": [{"name": "p", "blocks": [0, 1], "claims": [
                                      {"kind": "hat", "block": 0, "units": [0, 1, 2], "window": ["10", "12"],
                                       "moves": [], "to": ["999", "-999"], "margin": "9"}, {"kind": "exact"}]}]}}
    rc, report, _ = verify(write_bundle(tmp_path, files), capsys)
    assert rc == 1 and failing(report) == {"hat": ["moves is empty: a hat moves at least one token, on which its "
                                                   "`to` is checked"]}, report


def test_per_sequence_lists_follow_the_kept_sequences(tmp_path, capsys):
    """After a pair dropped as a duplicate, clusters.distinct has one entry per
    sequence kept: [2, 3] for file sequences 0 and 2; a count per file
    sequence is refused, and a wrong count names the file's sequence."""
    ident = {"ff": {"eta": "1", "U": [], "b": [], "W": [[], []]}, "sa": IDENTITY_SA}
    a, b, c, d, e = ["0", "1"], ["1", "0"], ["2", "2"], ["3", "1"], ["5", "0"]
    files = {"model.json": {"format": "tfcert.model/1", "d": 2, "attention": "hardmax", "blocks": [ident]},
             "dataset.json": {"format": "tfcert.dataset/1", "d": 2, "pairs": [
                 {"input": [a, b], "output": [a, b]}, {"input": [b, a], "output": [a, b]},
                 {"input": [c, d, e], "output": [c, d, e]}]},
             "certificate.json": {"format": "tfcert.certificate/1", "attention": "hardmax", "theorem": "1.6",
                                  "phases": [{"name": "all", "blocks": [0, 1], "claims": [
                                      {"kind": "clusters", "block": 0, "distinct": [2, 3]}, {"kind": "exact"}]}]}}
    rc, report, _ = verify(write_bundle(tmp_path / "kept", files), capsys)
    assert rc == 0, report
    (claim,) = claims(files["certificate.json"], "clusters")
    claim["distinct"] = [2, 2, 3]
    one_error(*run(verify_argv(write_bundle(tmp_path / "file", files)), capsys), "one count per sequence kept (2")
    claim["distinct"] = [2, 2]
    rc, report, _ = verify(write_bundle(tmp_path / "wrong", files), capsys)
    assert rc == 1 and failing(report)["clusters"] == ["sequence 2: distinct tokens: stated 2, recomputed 3"], report


def test_hardmax_model_measured_under_the_softmax_theorem_fails(hard, tmp_path, capsys):
    files = copy.deepcopy(hard)
    (size,) = claims(files["certificate.json"], "size")
    n, sm, d = 4, size["d_sum_m"] // 2, 2  # the demo: 4 sequences, d = 2
    size.update(theorem="1.8", bounds={"blocks": 2 * sm + 3 * n, "width": 4, "parameters": (2 * sm + 3 * n) * (12 * d + 8)})
    rc, report, _ = verify(write_bundle(tmp_path, files), capsys)
    assert rc == 1 and any("Theorem 1.6" in f for f in failing(report)["size"])


@pytest.mark.parametrize("field, value", [("attention", "softmax"), ("theorem", "1.8")])
def test_top_level_attention_and_theorem_are_checked(field, value, hard, tmp_path, capsys):
    files = copy.deepcopy(hard)
    files["certificate.json"][field] = value
    rc, report, _ = verify(write_bundle(tmp_path, files), capsys)
    assert rc == 1 and field in failing(report)


def test_softmax_certificate_without_tau_star_fails(soft, tmp_path, capsys):
    files = copy.deepcopy(soft)
    cert = files["certificate.json"]
    del cert["tau_star"]
    for phase in cert["phases"]:
        phase["claims"] = [c for c in phase["claims"] if c["kind"] != "tau_star"]
    rc, report, _ = verify(write_bundle(tmp_path, files), capsys)
    assert rc == 1 and any("every temperature" in f for f in failing(report)["tau_star"])


def test_top_level_tau_star_is_compared_as_a_number(soft, tmp_path, capsys):
    files = copy.deepcopy(soft)
    cert = files["certificate.json"]
    tau = Fraction(cert["tau_star"])  # a dyadic: its decimal is finite
    k = tau.denominator.bit_length() - 1  # tau = p/2^k = p·5^k/10^k exactly
    cert["tau_star"] = f"{tau.numerator * 5**k}e-{k}"
    assert Fraction(cert["tau_star"]) == tau
    assert verify(write_bundle(tmp_path / "equal", files), capsys)[0] == 0
    cert["tau_star"] = "7"
    rc, report, _ = verify(write_bundle(tmp_path / "other", files), capsys)
    assert rc == 1 and failing(report)["tau_star"] == [
        f"the certificate's top-level tau_star 7 differs from the claim's {tau.numerator}/{tau.denominator}"]


def test_z3_counterexample_is_in_the_claims_variable(hard, tmp_path, capsys):
    files = copy.deepcopy(hard)
    hat = claims(files["certificate.json"], "hat")[0]
    lo, hi = (Fraction(v) for v in hat["window"])
    hat["window"][0] = str(lo + (hi - lo) / 4)  # narrowed: the group is non-zero just inside
    rc, report, _ = verify(write_bundle(tmp_path, files), capsys)
    (message,) = [f for f in failing(report)["hat"] if f.startswith("z3:")]
    t = Fraction(message.rsplit("t = ", 1)[1])
    assert lo < t <= lo + (hi - lo) / 4, (message, lo, hi)


@pytest.mark.parametrize("name", ["\x1b[31mred", "a\nb", "", "x" * 81, 7])
def test_phase_names_are_plain_text(name, hard, tmp_path, capsys):
    files = copy.deepcopy(hard)
    files["certificate.json"]["phases"][1]["name"] = name
    one_error(*run(verify_argv(write_bundle(tmp_path, files)), capsys), ".name: expected")


# ---------------------------------------------------------------- every field read or refused

@pytest.mark.parametrize("which, edit, fragment", [
    ("model", lambda m: m.update(activation="gelu"), "$: unknown field 'activation'"),
    ("model", lambda m: m["blocks"][2].update(layer_norm=True), "$.blocks[2]: unknown field 'layer_norm'"),
    ("model", lambda m: m["blocks"][0]["ff"].update(bias2=[]), "$.blocks[0].ff: unknown field"),
    ("model", lambda m: m.update(temperature="1"), "$: unknown field 'temperature'"),  # hardmax
    ("dataset", lambda d: d["pairs"][0].update(weight="2"), "$.pairs[0]: unknown field 'weight'"),
    ("certificate", lambda c: c.update(note="x"), "$: unknown field 'note'"),
    ("certificate", lambda c: c["phases"][0].update(skip=True), "$.phases[0]: unknown field 'skip'"),
    ("certificate", lambda c: claims(c, "hat")[0].update(trusted=True), "unknown field 'trusted'"),
    ("certificate", lambda c: claims(c, "size")[0]["bounds"].update(depth=1), ".bounds: unknown field 'depth'"),
])
def test_unknown_fields_are_refused(which, edit, fragment, hard, tmp_path, capsys):
    files = copy.deepcopy(hard)
    edit(files[f"{which}.json"])
    paths = write_bundle(tmp_path, files)
    rc, out, err = run(verify_argv(paths), capsys)
    one_error(rc, out, err, fragment)
    assert f"{which}.json" in err


@pytest.mark.parametrize("which", ["model", "dataset", "certificate"])
def test_duplicate_keys_are_refused(which, hard, tmp_path, capsys):
    """Python keeps the last value of a repeated key, other readers the first:
    two tools would read two different files."""
    key = {"model": '"eta"', "dataset": '"input"', "certificate": '"kind"'}[which]
    text = json.dumps(hard[f"{which}.json"]).replace(f"{key}: ", f'{key}: "2", {key}: ', 1)
    paths = write_bundle(tmp_path, hard, raw={which: text.encode()})
    rc, out, err = run(verify_argv(paths), capsys)
    one_error(rc, out, err, f"duplicate key {key[1:-1]!r}")
    assert ": $" in err


@pytest.mark.parametrize("text, path", [
    ('{"pairs": [{"input": [], "input": []}]}', '$.pairs[0]'),
    ('{"a": {"b": [0, {"c": 1, "c": 2}]}}', '$.a.b[1]'),
    ('{"x y": {"k": 1, "k": 2}}', '$["x y"]'),
    ('{"a": 1, "a": 2}', '$'),
])
def test_duplicate_key_paths_are_written_like_every_other_path(text, path):
    """$.pairs[0], as every message writes a path ($."pairs"[0] before); a key that is not a
    name is quoted in brackets."""
    with pytest.raises(InputError) as refused:
        parse_document("f.json", text.encode())
    assert str(refused.value).startswith(f"f.json: {path}: duplicate key ")


# ---------------------------------------------------------------- crashes, exit codes, hangs

def huge_eta_model(blocks: int, eta: str = "1e4000") -> dict:
    identity = {"rho": "1", "A": {"scale": "0", "low_rank": []}, "V": {"scale": "0", "low_rank": []}}
    return {"format": "tfcert.model/1", "d": 2, "attention": "hardmax",
            "blocks": [{"ff": {"eta": eta, "U": [], "b": [], "W": [[], []]}, "sa": identity} for _ in range(blocks)]}


def test_audit_fail_with_huge_numbers_is_exit_1(hard, tmp_path, capsys):
    files = copy.deepcopy(hard)
    files["model.json"] = huge_eta_model(1, "1e300")
    paths = write_bundle(tmp_path, files)
    cert = tmp_path / "audit.json"
    for extra in ([], ["--json"]):
        rc, out, err = run(["audit", "--model", paths["model"], "--dataset", paths["dataset"], "-o", cert, *extra],
                           capsys)
        assert rc == 1 and err == "" and "e+300" in out, (rc, err)
    assert json.loads(out)["sequences"][0]["hausdorff"] > 1e299
    assert run(["verify", "--model", paths["model"], "--dataset", paths["dataset"], "--certificate", cert],
               capsys)[0] == 1


def test_audit_at_a_huge_temperature_is_one_verdict(soft, tmp_path, capsys):
    paths = write_bundle(tmp_path, soft)
    base = ["audit", "--model", paths["model"], "--dataset", paths["dataset"], "--temperature", "1e4000"]
    rc_text, out, err = run(base, capsys)
    rc_json, out_json, err_json = run([*base, "--json"], capsys)
    assert rc_text == rc_json == 1 and err == err_json == "" and "e+4000" in out
    assert json.loads(out_json)["temperature"].startswith("1" + "0" * 100)


def test_bracket_spans_any_exponent():
    for threshold in (Fraction(3), Fraction(1, 10**300), Fraction(10**1200), Fraction(1, 2**50000)):
        lo = bracket(lambda tau: Fraction(int(tau.p), int(tau.q)) <= threshold)
        value = Fraction(int(lo.p), int(lo.q))
        assert value <= threshold < 2 * value


@pytest.mark.parametrize("attention, scale", [("softmax", 10**150), ("hardmax", 10**1500)], ids=["softmax-1e150", "hardmax-1e1500"])
def test_construct_with_huge_coordinates(attention, scale, tmp_path, capsys):
    """Coordinates near 1e150 (softmax: τ* far below 2^-400) and 1e1500 (the
    model's numbers exceed the dataset's 4000 digits) construct and verify."""
    s = scale
    ds = {"format": "tfcert.dataset/1", "d": 2, "pairs": [
        {"input": [[str(s), str(2 * s)], [str(3 * s), str(s)], [str(-s), str(5 * s)]],
         "output": [[str(s), str(s)], [str(4 * s), "0"]]},
        {"input": [[str(2 * s), str(2 * s)], [str(-s), str(s)]], "output": [[str(7 * s), "1"]]}]}
    rc, out, err = run(["construct", write_json(tmp_path / "ds.json", ds), "-o", tmp_path / "b",
                        "--attention", attention], capsys)
    assert rc == 0, err
    b = tmp_path / "b"
    assert run(["verify", "--model", b / "model.json", "--dataset", b / "dataset.json",
                "--certificate", b / "certificate.json"], capsys)[0] == 0


@pytest.mark.slow
def test_replay_past_the_bits_limit_is_not_checked_fast(hard, tmp_path, capsys):
    """1000 blocks with η = 1e4000: the replay stops at the bits limit and
    every replayed claim fails as "not checked", quickly and briefly."""
    files = copy.deepcopy(hard)
    files["model.json"] = huge_eta_model(1000)
    files["certificate.json"] = {**hard["certificate.json"], "phases": [
        {"name": "all", "blocks": [0, 1000], "claims": [{"kind": "exact"}]}]}
    paths = write_bundle(tmp_path, files)
    start = time.perf_counter()
    rc, out, err = run(verify_argv(paths), capsys)
    assert rc == 1 and "not checked: the replay stopped" in out and "bits=" in out, out[-500:]
    rc, out2, err = run(["audit", "--model", paths["model"], "--dataset", paths["dataset"]], capsys)
    assert rc == 1 and out2.startswith("verdict: not checked") and err == ""
    assert time.perf_counter() - start < 60 and len(out) + len(out2) < 10_000


# ---------------------------------------------------------------- outputs never replace inputs

def verify_argv(paths) -> list:
    return ["verify", "--model", paths["model"], "--dataset", paths["dataset"], "--certificate", paths["certificate"]]


def test_outputs_that_are_inputs_are_refused(hard, tmp_path, capsys):
    paths = write_bundle(tmp_path, hard)
    before = {k: p.read_bytes() for k, p in paths.items()}
    one_error(*run(["audit", "--model", paths["model"], "--dataset", paths["dataset"], "-o", paths["model"]], capsys),
              "refusing to overwrite")
    one_error(*run([*verify_argv(paths), "--junit", paths["certificate"]], capsys), "refusing to overwrite")
    named = tmp_path / "own" / "model.json"  # a dataset that happens to be called model.json
    named.parent.mkdir()
    named.write_bytes(DEMO.read_bytes())
    one_error(*run(["construct", named, "-o", named.parent], capsys), "refusing to overwrite")
    assert {k: p.read_bytes() for k, p in paths.items()} == before
    assert named.read_bytes() == DEMO.read_bytes()


# ---------------------------------------------------------------- bundles: whole or not at all

def test_interrupt_while_writing_leaves_nothing(tmp_path, monkeypatch):
    files = {"dataset.json": b"d", "model.json": b"m", "certificate.json": b"c"}
    out = tmp_path / "bundle"
    write(files, out)
    calls = []
    original = Path.write_bytes

    def interrupted(self, data):
        calls.append(self)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(self, data)
    monkeypatch.setattr(Path, "write_bytes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write({k: v * 2 for k, v in files.items()}, out)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["bundle"]  # no temporary folder left
    assert {f: (out / f).read_bytes() for f in files} == files


@pytest.fixture
def interruptible():
    """SIGINT raises KeyboardInterrupt, whatever this process inherited: a shell starts a
    background job (nohup, &) with SIGINT ignored, and an ignored signal is rightly never
    raised after it is held."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_sigint_while_a_bundle_folder_is_replaced_is_held(tmp_path, monkeypatch, interruptible):
    """bundle.write_bundle swaps folders by two renames: an interrupt between them is held, so the
    folder ends up the new bundle whole, and nothing else is left beside it."""
    files = {"dataset.json": b"d", "model.json": b"m", "certificate.json": b"c"}
    out = tmp_path / "bundle"
    bundle_module.write_bundle(files, out)
    (out / "profile.png").write_bytes(b"an old picture")
    original = os.rename

    def rename_and_interrupt(a, b):
        signal.raise_signal(signal.SIGINT)
        return original(a, b)
    monkeypatch.setattr(bundle_module.os, "rename", rename_and_interrupt)
    with pytest.raises(KeyboardInterrupt):
        bundle_module.write_bundle({k: v * 2 for k, v in files.items()}, out, force=True)
    monkeypatch.undo()
    assert {f.name: f.read_bytes() for f in out.iterdir()} == {k: v * 2 for k, v in files.items()}
    assert sorted(os.listdir(tmp_path)) == ["bundle"]


def test_a_failed_swap_keeps_the_old_bundle(tmp_path, monkeypatch):
    files = {"dataset.json": b"d", "model.json": b"m", "certificate.json": b"c"}
    out = tmp_path / "bundle"
    bundle_module.write_bundle(files, out)
    original, calls = os.rename, []

    def second_rename_fails(a, b):
        calls.append(a)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return original(a, b)
    monkeypatch.setattr(bundle_module.os, "rename", second_rename_fails)
    with pytest.raises(InputError, match="No space left on device"):
        bundle_module.write_bundle({k: v * 2 for k, v in files.items()}, out, force=True)
    monkeypatch.undo()
    assert {f.name: f.read_bytes() for f in out.iterdir()} == files
    assert sorted(os.listdir(tmp_path)) == ["bundle"]


def test_sigint_during_the_renames_is_held(tmp_path, monkeypatch, interruptible):
    files = {"dataset.json": b"d", "model.json": b"m", "certificate.json": b"c"}
    out = tmp_path / "bundle"
    write(files, out)
    original = os.replace

    def replace_and_interrupt(a, b):
        signal.raise_signal(signal.SIGINT)  # arrives between the renames
        return original(a, b)
    monkeypatch.setattr(bundle_module.os, "replace", replace_and_interrupt)
    with pytest.raises(KeyboardInterrupt):
        write({k: v * 2 for k, v in files.items()}, out)
    assert {f: (out / f).read_bytes() for f in files} == {k: v * 2 for k, v in files.items()}
    assert sorted(os.listdir(tmp_path)) == ["bundle"]


# ---------------------------------------------------------------- limits

def test_limits(hard, tmp_path, capsys):
    paths = write_bundle(tmp_path, hard)
    one_error(*run([*verify_argv(paths), "--limit", "file_bytes=100"], capsys), "file_bytes=100")
    one_error(*run([*verify_argv(paths), "--limit", "digits=2"], capsys), "limit digits=2")
    rc, out, _ = run([*verify_argv(paths), "--limit", "bits=8"], capsys)
    assert rc == 1 and "over the limit bits=8" in out
    for bad in ("speed=1", "bits=0", "bits=x", "bits"):
        one_error(*run([*verify_argv(paths), "--limit", bad], capsys), "--limit")


def test_z3_undecided_fails_the_claim(hard, tmp_path, capsys, monkeypatch):
    paths = write_bundle(tmp_path, hard)
    regions._zero_outside_unit.cache_clear()
    regions._zero_on_side.cache_clear()
    regions._lands_on_unit.cache_clear()
    monkeypatch.setattr(z3.Solver, "check", lambda self, *a: z3.unknown)
    try:
        rc, report, _ = verify(paths, capsys, "--limit", "z3_seconds=0.5")
    finally:
        regions._zero_outside_unit.cache_clear()
        regions._zero_on_side.cache_clear()
        regions._lands_on_unit.cache_clear()
    assert rc == 1 and all(any("undecided: z3 gave no answer within z3_seconds=0.5" in f for f in r["failures"])
                           for r in report["results"] if r["kind"] == "hat")
