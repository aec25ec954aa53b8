"""A bundle: DIR/dataset.json (the input's exact bytes), DIR/model.json and
DIR/certificate.json, verified by the independent checker before any file
is written, and written so that no half-written bundle is ever left."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tfcert.construct.build import Construction, certificate, construct, model_bytes
from tfcert.errors import InputError
from tfcert.verify.check import Report, verify
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
    cert = dumps(certificate(construction, data, model, dataset_doc.raw))
    files = {"dataset.json": dataset_doc.raw, "model.json": model, "certificate.json": cert}
    verifying = None if progress is None else (lambda done, total: progress(done, total, "verifying"))
    report = verify(parse_document("model.json", model), dataset_doc,
                    parse_document("certificate.json", cert), verifying)
    if not report.ok:
        raise AssertionError("the construction's own certificate does not verify")  # a bug
    return Bundle(data, construction, files, report)


def refuse_to_replace(directory: str | Path, files=("dataset.json", "model.json", "certificate.json")) -> None:
    """A bundle already in ``directory`` is replaced only on request (``--force``)."""
    found = [name for name in files if (Path(directory) / name).exists()]
    if found:
        raise InputError(f"{directory}: already holds a bundle ({', '.join(found)}); use --force to replace it")


def write(files: dict[str, bytes], directory: str | Path, force: bool = False) -> None:
    """Write every file to a temporary name first, then rename them all; a
    target that cannot be replaced is found before anything is renamed. An
    existing bundle is replaced only with ``force``."""
    out = Path(directory)
    if not force:
        refuse_to_replace(out, tuple(files))
    temps: list[tuple[Path, Path]] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in files:
            if (out / name).is_dir():
                raise InputError(f"{out / name}: is a directory; cannot write the bundle")
        for name, data in files.items():
            tmp = out / f".{name}.tmp"
            temps.append((tmp, out / name))
            tmp.write_bytes(data)
        for tmp, final in temps:
            os.replace(tmp, final)
    except OSError as exc:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        raise InputError(f"{directory}: cannot write the bundle: {exc.strerror or exc}") from None
