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
from tfcert.verify.formats import Dataset, dumps, load_document, parse_document, read_dataset

@dataclass(frozen=True)
class Bundle:
    dataset: Dataset
    construction: Construction
    files: dict[str, bytes]  # file name -> exact bytes
    report: Report


def build(dataset_path: str | Path, attention: str = "hardmax", width: int = 4, progress=None) -> Bundle:
    """Construct, certify and verify, all in memory."""
    dataset_doc = load_document(dataset_path)
    dataset = read_dataset(dataset_doc)
    construction = construct(dataset, attention, width)
    model = model_bytes(construction.model)
    cert = dumps(certificate(construction, dataset, model, dataset_doc.raw))
    files = {"dataset.json": dataset_doc.raw, "model.json": model, "certificate.json": cert}
    report = verify(parse_document("model.json", model), dataset_doc,
                    parse_document("certificate.json", cert), progress)
    if not report.ok:
        raise AssertionError("the construction's own certificate does not verify")  # a bug
    return Bundle(dataset, construction, files, report)


def write(files: dict[str, bytes], directory: str | Path) -> None:
    """Write every file to a temporary name first, then rename them all; a
    target that cannot be replaced is found before anything is renamed."""
    out = Path(directory)
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
