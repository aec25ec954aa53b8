"""``tfcert selftest --mutations N``: the mutation campaign.

Bundles are constructed (hardmax and softmax) from small random datasets
built in-process (their float claims left out: see ``without_float_claims``); each mutation makes one random change — a model parameter,
a claim value, the order of two blocks, a dataset coordinate, a sha256, a
field added or removed, a list element dropped or repeated — and, as a forger
would, re-hashes the changed files into the certificate (except when the
change is to a sha256). An independent judge (oracle.py, no code shared with
the checker) decides whether every claim still holds; the checker must accept
exactly the mutants the judge finds true. A survivor is a mutant on which
they disagree (or on which the checker crashed); the score is the fraction
decided alike.
"""
from __future__ import annotations

import copy
import hashlib
import json
import random
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from tfcert.verify.errors import InputError
from tfcert.selftest.oracle import judge
from tfcert.report import json_text

KINDS = ("parameter", "claim", "block-order", "dataset-token", "sha256", "field-added", "field-removed", "list")
WEIGHTS = (30, 30, 5, 10, 4, 8, 8, 5)


# ---------------------------------------------------------------- bundles

def random_dataset(rng: random.Random) -> dict:
    """A small valid dataset: d 2–3, 1–3 sequences of 1–3 tokens, tokens shared across sequences at times."""
    d = rng.randint(2, 3)
    pool = [tuple(rng.randint(-4, 4) for _ in range(d)) for _ in range(4)]
    pairs, seen = [], set()
    for _ in range(rng.randint(1, 3)):
        n = rng.randint(1, 3)
        X = list(dict.fromkeys(rng.choice(pool) if rng.random() < 0.3 else tuple(rng.randint(-4, 4) for _ in range(d))
                               for _ in range(n)))
        if frozenset(X) in seen:
            continue
        seen.add(frozenset(X))
        m = rng.randint(1, len(X))
        Y = list(dict.fromkeys(tuple(Fraction(rng.randint(-8, 8), rng.choice([1, 2, 4])) for _ in range(d))
                               for _ in range(m)))
        pairs.append({"input": [[str(v) for v in t] for t in X], "output": [[str(v) for v in t] for t in Y]})
    return {"format": "tfcert.dataset/1", "d": d, "pairs": pairs}


def make_bundles(seed: int, count: int = 3) -> list[dict[str, bytes]]:
    """``count`` hardmax and ``count`` softmax bundles, as ``tfcert construct`` writes them."""
    from tfcert.construct.bundle import build

    rng = random.Random(seed)
    out: list[dict[str, bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for attention in ("hardmax", "softmax"):
            made = 0
            while made < count:
                path = Path(tmp) / f"{attention}-{made}.json"
                path.write_text(json.dumps(random_dataset(rng)))
                try:
                    out.append(without_float_claims(dict(build(path, attention).files)))
                except InputError:  # a dataset the construction refuses: draw another
                    continue
                made += 1
    return out


def without_float_claims(files: dict[str, bytes]) -> dict[str, bytes]:
    """The judge decides every claim from its definition by an exact replay;
    a float claim speaks about every float evaluation order, which no replay
    decides, so the campaign leaves it out (tests/test_float*.py check it
    against float runs and red-team models)."""
    from tfcert.canonical import dumps

    cert = json.loads(files["certificate.json"])
    for phase in cert["phases"]:
        phase["claims"] = [c for c in phase["claims"] if c["kind"] != "float"]
    return {**files, "certificate.json": dumps(cert)}


# ---------------------------------------------------------------- single changes

def walk(value, path=()):
    """(path, value) of every node."""
    yield path, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        yield from walk(v, path + (k,))


def at(value, path):
    for p in path:
        value = value[p]
    return value


def changed_number(rng: random.Random, old) -> str | int:
    """A nearby or a different value of a number written as text (or an int)."""
    try:
        x = Fraction(old) if not isinstance(old, bool) else Fraction(0)
    except (TypeError, ValueError):
        x = Fraction(0)
    how = rng.choice(["tiny+", "tiny-", "+1", "-1", "zero", "double", "neg", "half", "other"])
    new = {"tiny+": x + Fraction(1, 2**40), "tiny-": x - Fraction(1, 2**40), "+1": x + 1, "-1": x - 1,
           "zero": Fraction(0), "double": 2 * x, "neg": -x, "half": x / 2,
           "other": Fraction(rng.randint(-9, 9), rng.randint(1, 4))}[how]
    if isinstance(old, int) and not isinstance(old, bool):
        return int(new) if new.denominator == 1 else old + rng.choice([-1, 1])
    return str(new.numerator) if new.denominator == 1 else f"{new.numerator}/{new.denominator}"


def changed_leaf(rng: random.Random, old, key) -> object:
    if isinstance(old, bool):
        return not old
    if old is None:
        return rng.choice(["0", "1", "1/2"])
    if isinstance(old, int):
        return changed_number(rng, old)
    if key == "kind":
        return rng.choice(["hat", "snap", "argmax", "clusters", "separation", "uniform_attention", "exact", "size"])
    if key in ("model_sha256", "dataset_sha256"):
        return old[:-1] + ("0" if old[-1] != "0" else "1")
    try:
        Fraction(old)
    except (TypeError, ValueError):
        return {"attention": "softmax" if old == "hardmax" else "hardmax", "theorem": "1.8" if old == "1.6" else "1.6",
                "name": "renamed", "reason": "changed", "format": old + "x"}.get(key, old + "x")
    return changed_number(rng, old)


def mutate(rng: random.Random, files: dict[str, bytes]) -> tuple[dict[str, bytes], str]:
    """One random single change; returns the new file bytes and what was done."""
    values = {k.split(".")[0]: json.loads(v) for k, v in files.items()}
    kind = rng.choices(KINDS, WEIGHTS)[0]
    model, cert, data = values["model"], values["certificate"], values["dataset"]
    what = kind
    if kind == "parameter":
        leaves = [(p, v) for p, v in walk(model) if p and p[0] in ("blocks", "temperature")
                  and isinstance(v, (str, int)) and not isinstance(v, bool)]
        path, old = rng.choice(leaves)
        at(model, path[:-1])[path[-1]] = changed_number(rng, old)
        what = f"model {path} {old} -> {at(model, path)}"
    elif kind == "claim":
        leaves = [(p, v) for p, v in walk(cert) if p and p[0] in ("phases", "tau_star", "attention", "theorem")
                  and not isinstance(v, (dict, list))]
        path, old = rng.choice(leaves)
        at(cert, path[:-1])[path[-1]] = changed_leaf(rng, old, path[-1])
        what = f"certificate {path} {old!r} -> {at(cert, path)!r}"
    elif kind == "block-order" and len(model["blocks"]) > 1:
        i = rng.randrange(len(model["blocks"]) - 1)
        j = rng.randrange(i + 1, len(model["blocks"]))
        model["blocks"][i], model["blocks"][j] = model["blocks"][j], model["blocks"][i]
        what = f"model blocks {i} <-> {j}"
    elif kind == "dataset-token":
        pair = rng.randrange(len(data["pairs"]))
        side = rng.choice(["input", "output"])
        token = rng.randrange(len(data["pairs"][pair][side]))
        k = rng.randrange(data["d"])
        old = data["pairs"][pair][side][token][k]
        data["pairs"][pair][side][token][k] = changed_number(rng, old)
        what = f"dataset pairs[{pair}].{side}[{token}][{k}] {old} -> {data['pairs'][pair][side][token][k]}"
    elif kind == "sha256":
        key = rng.choice(["model_sha256", "dataset_sha256"])
        cert[key] = changed_leaf(rng, cert[key], key)
        what = f"certificate {key} one digit changed"
    elif kind in ("field-added", "field-removed"):
        name = rng.choice(["model", "certificate", "dataset"])
        objects = [p for p, v in walk(values[name]) if isinstance(v, dict) and (kind == "field-added" or v)]
        path = rng.choice(objects)
        target = at(values[name], path)
        if kind == "field-added":
            key = rng.choice(["extra", "margin", "min_gap", "step", "reason", "temperature", "tau_star", "theorem"])
            if key in target:
                key = "extra"
            target[key] = rng.choice(["1", "0", None, "x"])
        else:
            key = rng.choice(sorted(target))
            del target[key]
        what = f"{name} {path} {kind} {key!r}"
    else:
        lists = [(p, v) for p, v in walk(cert) if isinstance(v, list) and v and p and p[0] == "phases"]
        path, items = rng.choice(lists)
        i = rng.randrange(len(items))
        if rng.random() < 0.5:
            del items[i]
            what = f"certificate {path} element {i} dropped"
        else:
            items.insert(i, copy.deepcopy(items[i]))
            what = f"certificate {path} element {i} repeated"
    out = {f"{k}.json": json.dumps(values[k]).encode() if k != "certificate" else b"" for k in values}
    if kind != "sha256":
        cert["model_sha256"] = hashlib.sha256(out["model.json"]).hexdigest()
        cert["dataset_sha256"] = hashlib.sha256(out["dataset.json"]).hexdigest()
    out["certificate.json"] = json.dumps(cert).encode()
    return out, what


# ---------------------------------------------------------------- the campaign

def checker(files: dict[str, bytes]) -> str:
    """The checker's verdict: "accepted", "rejected (exit 1)" or "refused (exit 2)"."""
    from tfcert.verify.check import check_certificate
    from tfcert.verify.formats import parse_document

    try:
        report = check_certificate(*(parse_document(n, files[n])
                                     for n in ("model.json", "dataset.json", "certificate.json")))
    except InputError:
        return "refused (exit 2)"
    return "accepted" if report.ok else "rejected (exit 1)"


def campaign(mutations: int, seed: int = 0, bundles: list[dict[str, bytes]] | None = None) -> dict:
    """Run ``mutations`` single changes; the summary ``tfcert selftest --json`` prints."""
    start = time.perf_counter()
    bundles = make_bundles(seed) if bundles is None else bundles
    rng = random.Random(seed)
    caught = kept = 0
    survivors = []
    for _ in range(mutations):
        files, what = mutate(rng, rng.choice(bundles))
        truth, why = judge(files["model.json"], files["dataset.json"], files["certificate.json"])
        try:
            verdict = checker(files)
        except Exception as exc:  # the checker must never crash: a survivor, reported
            verdict = f"crashed: {type(exc).__name__}: {exc}"
        if truth and verdict == "accepted":
            kept += 1
        elif not truth and verdict in ("rejected (exit 1)", "refused (exit 2)"):
            caught += 1
        else:
            survivors.append({"mutation": what, "checker": verdict, "judge": "holds" if truth else why})
    return {"mutations": mutations, "caught": caught, "kept": kept, "survivors": survivors,
            "score": (caught + kept) / mutations if mutations else 1.0, "bundles": len(bundles),
            "seconds": round(time.perf_counter() - start, 1)}


def run_selftest(mutations: int, seed: int, as_json: bool) -> int:
    if mutations < 1:
        raise InputError(f"--mutations: {mutations} must be at least 1")
    result = campaign(mutations, seed)
    if as_json:
        print(json_text(result))
    else:
        print(f"{result['mutations']} mutations of {result['bundles']} bundles (seed {seed}): "
              f"{result['caught']} caught, {result['kept']} kept (still true), {len(result['survivors'])} survivors; "
              f"score {result['score']:.4f} in {result['seconds']}s")
        for s in result["survivors"]:
            print(f"SURVIVOR {s['mutation']}: checker {s['checker']}, judge: {s['judge']}")
    return 0 if not result["survivors"] else 1
