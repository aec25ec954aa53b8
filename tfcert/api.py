"""The notebook API, mirroring the command line:

    bundle = tfcert.construct([(X1, Y1), (X2, Y2)])   # numpy arrays or lists
    report = tfcert.verify(bundle)                    # or a folder, or three paths
    audit = tfcert.audit("some/model.json", "data.json")

Datasets can be numpy arrays: float64 values are read exactly (every binary
float is a rational with a power-of-two denominator, written as "p/q"), so
the certificate speaks about the numbers the array holds, not about rounded
decimals. Reports render as tables in Jupyter (``_repr_html_``).
"""
from __future__ import annotations

import functools
import html
import json
from dataclasses import dataclass, field
from fractions import Fraction
from numbers import Integral
from pathlib import Path

from flint import fmpq

from tfcert.canonical import dumps
from tfcert.errors import InputError, with_limit_hint
from tfcert.files import bundle_file, load
from tfcert.verify import check
from tfcert.verify.formats import DATASET_FORMAT, Document, parse_document, read_dataset

SLOTS = ("model", "dataset", "certificate")


def _limit_hints(function):
    """``function``, whose InputError from a raisable limit says how to raise it
    from Python (the CLI's message says ``--limit NAME=N``)."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except InputError as exc:
            exc.args = (with_limit_hint(str(exc), library=True),)
            raise
    return call


# ---------------------------------------------------------------- datasets

def number_text(x: object, where: str) -> str:
    """One value as exact text: integers as they are; floats of any width, Decimals, Fractions
    and FLINT rationals by their exact value. Anything else (complex, booleans) is refused."""
    if isinstance(x, str):
        return x
    if isinstance(x, bool) or getattr(getattr(x, "dtype", None), "kind", "") == "b":
        raise InputError(f"{where}: expected a number, got a boolean")
    if isinstance(x, Integral):
        return str(int(x))
    if isinstance(x, fmpq):
        x = Fraction(int(x.p), int(x.q))
    elif not isinstance(x, Fraction):
        if not hasattr(x, "as_integer_ratio"):  # float, numpy floats, Decimal have it, exactly
            raise InputError(f"{where}: expected a real number, got {type(x).__name__}")
        try:
            x = Fraction(*x.as_integer_ratio())
        except (ValueError, OverflowError):
            raise InputError(f"{where}: {x} is not a finite number") from None
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _items(x, where: str, what: str):
    """x as a sequence to walk (a list, tuple or array, not a string or dict), or InputError naming ``what``."""
    if isinstance(x, (str, bytes, dict)) or not hasattr(x, "__iter__"):
        raise InputError(f"{where}: expected {what}, got {type(x).__name__}")
    return x


def _tokens(seq, where: str) -> list[list[str]]:
    """An n × d array or list of tokens (numpy scalars are numbers.Real / Integral)."""
    return [[number_text(v, f"{where}[{i}][{k}]") for k, v in enumerate(_items(row, f"{where}[{i}]", "a token"))]
            for i, row in enumerate(_items(seq, where, "a list of tokens"))]


def dataset_json(pairs) -> dict:
    """A dataset value from ``[(inputs, outputs), ...]`` (each an n × d array
    or list of tokens) or ``[{"input": ..., "output": ...}, ...]``."""
    out = []
    for j, pair in enumerate(_items(pairs, "pairs", "a list of (inputs, outputs)")):
        try:
            X, Y = (pair["input"], pair["output"]) if isinstance(pair, dict) else pair
        except (KeyError, TypeError, ValueError):
            raise InputError(f"pairs[{j}]: expected (inputs, outputs) or {{'input': …, 'output': …}}") from None
        out.append({"input": _tokens(X, f"pairs[{j}].input"), "output": _tokens(Y, f"pairs[{j}].output")})
    if not out:
        raise InputError("pairs: the dataset has no pairs")
    # d from the first token given: an empty first sequence is then named by the reader
    # ("$.pairs[0].input: empty sequence"), not mistaken for d = 0; with no token at all, any
    # valid d lets the reader name the first empty sequence
    first = next((t for pair in out for side in ("input", "output") for t in pair[side]), None)
    return {"format": DATASET_FORMAT, "d": 2 if first is None else len(first), "pairs": out}


def dataset_document(data) -> Document:
    """Any accepted dataset form as a document: a path, JSON bytes, a JSON
    value (dict), or pairs of arrays or lists."""
    if isinstance(data, Document):
        return data
    if isinstance(data, (str, Path)):
        return load(data, "dataset")
    if isinstance(data, bytes):
        return parse_document("<dataset>", data)
    value = data if isinstance(data, dict) else dataset_json(data)
    return parse_document("<dataset>", dumps(value))


# ---------------------------------------------------------------- reports

def _table(header: list[str], rows: list[list[str]], caption: str) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return (f"<table><caption style='text-align:left'>{html.escape(caption)}</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


@dataclass(frozen=True)
class Report:
    """What ``verify`` found: ``ok``, every claim's ``results``, the ``failures``."""
    checked: check.Report

    @property
    def ok(self) -> bool:
        return self.checked.ok

    @property
    def results(self) -> tuple[check.Result, ...]:
        return self.checked.results

    @property
    def failures(self) -> list[check.Result]:
        return [r for r in self.results if not r.ok]

    def to_json(self) -> dict:
        """The document ``tfcert verify --json`` prints."""
        from tfcert.report import as_json

        return as_json(self.checked)

    def __str__(self) -> str:
        from tfcert.report import human

        return human(self.checked)

    def _repr_html_(self) -> str:
        groups: dict[tuple[str, str], list[check.Result]] = {}
        for r in self.results:
            groups.setdefault((r.phase, r.kind), []).append(r)
        rows = [[phase, kind, len(rs), sum(not r.ok for r in rs)] for (phase, kind), rs in groups.items()]
        rows += [[r.phase, r.kind, f"block {r.block}" if r.block is not None else "", "FAIL: " + f]
                 for r in self.failures for f in r.failures]
        verdict = "all claims hold" if self.ok else f"{len(self.failures)} claim(s) FAIL"
        return _table(["phase", "claim", "checked", "failed"], rows, f"{len(self.results)} claims checked: {verdict}")


@dataclass(frozen=True)
class AuditReport:
    """What ``audit`` found: ``interpolates``, per-sequence verdicts, gaps, size."""
    audited: object  # tfcert.audit.audit.AuditReport

    @property
    def interpolates(self) -> bool:
        return self.audited.interpolates

    def __getattr__(self, name: str):
        return getattr(self.audited, name)

    def to_json(self) -> dict:
        """The document ``tfcert audit --json`` prints."""
        from tfcert.report import audit_json

        return audit_json(self.audited)

    def __str__(self) -> str:
        from tfcert.report import audit_human

        return audit_human(self.audited)

    def _repr_html_(self) -> str:
        doc = self.to_json()
        rows = [[s["sequence"], s["verdict"], "-" if s["hausdorff"] is None else f"{s['hausdorff']:.6g}"]
                for s in doc["sequences"]]
        verdict = "interpolates exactly" if self.interpolates else "does NOT interpolate (or not certified)"
        return _table(["sequence", "verdict", "Hausdorff distance"], rows, f"audit: {verdict}")


# ---------------------------------------------------------------- bundles

@dataclass(frozen=True)
class Bundle:
    """A model, its dataset and its certificate as exact bytes, verified."""
    files: dict[str, bytes]
    report: Report
    construction: object = field(default=None, repr=False)  # None when read from a folder
    notes: tuple[str, ...] = ()  # what construct said besides the claims (a lowered tau*)

    @property
    def certificate(self) -> dict:
        return json.loads(self.files["certificate.json"])

    def documents(self) -> dict[str, Document]:
        return {slot: parse_document(f"{slot}.json", self.files[f"{slot}.json"]) for slot in SLOTS}

    def write(self, directory: str | Path, force: bool = False) -> Path:
        """Write DIR/{dataset,model,certificate}.json as the whole folder: a new or empty one, or
        with ``force`` one holding only a bundle and its pictures, which is replaced."""
        from tfcert.construct.bundle import write_bundle

        write_bundle(self.files, directory, force, option="force=True")
        return Path(directory)

    def plot(self, directory: str | Path) -> dict[str, Path]:
        """Draw the pictures of ``tfcert plot`` into ``directory``."""
        from tfcert.cli.plot import phases, render
        from tfcert.verify.formats import read_model

        docs = self.documents()
        model = read_model(docs["model"])
        cert = docs["certificate"].value
        return render(model, read_dataset(docs["dataset"]), cert,
                      phases(cert, len(model.blocks), "certificate.json")).write(directory)

    def _repr_html_(self) -> str:
        cert = self.certificate
        rows = [[p["name"], f"[{p['blocks'][0]}, {p['blocks'][1]})", len(p["claims"])] for p in cert["phases"]]
        return _table(["phase", "blocks", "claims"], rows,
                      f"tfcert bundle ({cert.get('attention', '?')}, Theorem {cert.get('theorem', '?')}): "
                      f"{len(self.report.results)} claims, " + ("all hold" if self.report.ok else "some FAIL"))


@_limit_hints
def construct(dataset, attention: str = "hardmax", width: int = 4) -> Bundle:
    """Build, certify and verify a transformer interpolating ``dataset``
    exactly (a path, JSON, or pairs of numpy arrays / lists)."""
    from tfcert.construct.bundle import build
    from tfcert.progress import Bar

    if attention not in ("hardmax", "softmax"):
        raise InputError(f"attention: expected 'hardmax' or 'softmax', got {attention!r}")
    with Bar("construct") as bar:
        built = build(dataset_document(dataset), attention, width, bar)
    return Bundle(built.files, Report(built.report), built.construction, built.notes)


@_limit_hints
def open_bundle(folder: str | Path) -> Bundle:
    """A bundle folder read back and verified."""
    files = {f"{slot}.json": load(bundle_file(folder, slot), slot).raw for slot in SLOTS}
    docs = {slot: parse_document(str(Path(folder) / f"{slot}.json"), files[f"{slot}.json"]) for slot in SLOTS}
    return Bundle(files, Report(check.check_certificate(docs["model"], docs["dataset"], docs["certificate"])))


def _documents(what, rest: dict[str, object], slots: tuple[str, ...]) -> dict[str, Document]:
    """Documents for ``slots`` from a Bundle, a bundle folder, or one path per slot."""
    if isinstance(what, Bundle):
        return {slot: what.documents()[slot] for slot in slots}
    given = {slots[0]: what, **{s: v for s, v in rest.items() if v is not None}}
    if len(given) == 1 and isinstance(what, (str, Path)) and Path(what).is_dir():
        return {slot: load(bundle_file(what, slot), slot) for slot in slots}
    missing = [s for s in slots if s not in given]
    if missing:
        raise InputError(f"{', '.join(missing)}: required (or give a Bundle or a bundle folder)")
    return {slot: dataset_document(given[slot]) if slot == "dataset" else load(given[slot], slot) for slot in slots}


@_limit_hints
def verify(bundle_or_model, dataset=None, certificate=None) -> Report:
    """Check a certificate: ``verify(bundle)``, ``verify("bundle/folder")``
    or ``verify(model_path, dataset, certificate_path)``."""
    from tfcert.progress import Bar, Replay

    docs = _documents(bundle_or_model, {"dataset": dataset, "certificate": certificate}, SLOTS)
    with Bar("verify") as bar:
        watch = Replay(bar)
        return Report(check.check_certificate(docs["model"], docs["dataset"], docs["certificate"], watch,
                                              observers=(watch,)))


@_limit_hints
def audit(bundle_or_model, dataset=None, temperature=None) -> AuditReport:
    """Audit any model against a dataset (``temperature``: softmax models at another τ)."""
    from tfcert.audit.audit import audit as run_audit
    from tfcert.progress import Bar
    from tfcert.verify.formats import read_model
    from tfcert.verify.numbers import parse_number

    docs = _documents(bundle_or_model, {"dataset": dataset}, ("model", "dataset"))
    model, data = read_model(docs["model"]), read_dataset(docs["dataset"])
    check.check_compatible(model, data, docs["model"].path, docs["dataset"].path)
    tau = None if temperature is None else parse_number(number_text(temperature, "temperature"), "temperature")
    if tau is not None and tau <= 0:
        raise InputError("temperature: must be > 0")
    with Bar("audit") as bar:
        return AuditReport(run_audit(model, data, bar, tau))
