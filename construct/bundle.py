"""A bundle: DIR/dataset.json (the input's exact bytes), DIR/model.json and
DIR/certificate.json, verified by the independent checker before any file
is written, and written so that no half-written bundle is ever left."""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tfcert.construct.build import Construction, certificate, construct, float_analyses, float_claims, model_bytes
from tfcert.errors import InputError
from tfcert.verify.check import Report, Result, verify
from tfcert.verify.claims import float as float_claim
from tfcert.verify.formats import Dataset, Document, dumps, load_document, parse_document, read_dataset

@dataclass(frozen=True)
class Bundle:
    dataset: Dataset
    construction: Construction
    files: dict[str, bytes]  # file name -> exact bytes
    report: Report


def build(dataset: str | Path | Document, attention: str = "hardmax", width: int = 4, progress=None) -> Bundle:
    """Construct, certify and verify, all in memory. ``dataset`` is a path or
    a document already read (stdin, the notebook API); ``progress(done,
    total, label)`` hears of each stage and of the verification's blocks."""
    dataset_doc = dataset if isinstance(dataset, Document) else load_document(dataset)
    data = read_dataset(dataset_doc)

    def stage(done: int, label: str):
        if progress:
            progress(done, 2, label)

    stage(0, "constructing")
    construction = construct(data, attention, width)
    stage(1, "certifying")
    model = model_bytes(construction.model)
    analyses = float_analyses(construction.model, data)
    draft = dumps(certificate(construction, data, model, dataset_doc.raw, []))
    verifying = None if progress is None else (lambda done, total: progress(done, total, "verifying"))
    try:  # the float analyses ride along the verifier's replay: one replay states and checks everything
        report = verify(parse_document("model.json", model), dataset_doc,
                        parse_document("certificate.json", draft), verifying, observers=analyses)
    except InputError as exc:  # the construction's own numbers are past a reader's limit
        raise InputError(f"{dataset_doc.path}: the bundle built from this dataset exceeds a limit of the checker "
                         f"({exc}); raise it with --limit") from None
    floats = float_claims(analyses)
    value = certificate(construction, data, model, dataset_doc.raw, floats)
    report = Report(report.results + _float_results(value, analyses), report.warnings)
    if not report.ok:
        raise AssertionError("the construction's own certificate does not verify")  # a bug
    files = {"dataset.json": dataset_doc.raw, "model.json": model, "certificate.json": dumps(value)}
    return Bundle(data, construction, files, report)


def _float_results(cert: dict, analyses: list) -> tuple[Result, ...]:
    """The float claims as the verifier checks them (its parser, its check)
    against the analyses that saw its replay: the final phase's last claims."""
    p = len(cert["phases"]) - 1
    claims = cert["phases"][p]["claims"]
    by_format = {a.fmt.name: a for a in analyses}
    out = []
    for c, raw in enumerate(claims):
        if raw["kind"] == "float":
            where = f"certificate.json: $.phases[{p}].claims[{c}]"
            claim = float_claim.parse(raw, where, None)
            out.append(Result("final", "float", None, where,
                              tuple(float_claim.check(claim, None, by_format[claim.format.name]))))
    return tuple(out)


def refuse_to_replace(directory: str | Path, files=("dataset.json", "model.json", "certificate.json")) -> None:
    """A bundle already in ``directory`` is replaced only on request (``--force``)."""
    found = [name for name in files if (Path(directory) / name).exists()]
    if found:
        raise InputError(f"{directory}: already holds a bundle ({', '.join(found)}); use --force to replace it")


@contextmanager
def _no_interrupt():
    """Hold SIGINT until the block ends, so the renames finish together (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list = []
    previous = signal.signal(signal.SIGINT, lambda *args: held.append(args))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held and callable(previous):
            previous(*held[0])


def write(files: dict[str, bytes], directory: str | Path, force: bool = False) -> None:
    """Write every file (a bundle's, or plot's pictures) into a temporary
    folder beside ``directory``, then move them in with SIGINT held: a new
    directory is one rename, an existing one gets its files renamed together.
    The temporary folder is removed whatever happens (an error, an
    interrupt). An existing bundle is replaced only with ``force``."""
    out = Path(directory)
    if not force:
        refuse_to_replace(out, tuple(files))
    tmp = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for name in files:
            if (out / name).is_dir():
                raise InputError(f"{out / name}: is a directory; cannot write the file")
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
        mask = os.umask(0)
        os.umask(mask)
        tmp.chmod(0o777 & ~mask)  # as mkdir would make it
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        with _no_interrupt():
            if not out.exists():
                os.rename(tmp, out)
                tmp = None
            else:
                for name in files:
                    os.replace(tmp / name, out / name)
    except OSError as exc:
        raise InputError(f"{directory}: cannot write {', '.join(files)}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
