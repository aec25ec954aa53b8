"""Audit any model in the model format against a dataset: where and by how
much it fails to interpolate, every hardmax tie, the least argmax gap of
each attention layer, and its size against the theorem bounds.

The audit is the verifier's replay read out; its certificate states exactly
what the replay found, so ``tfcert verify`` accepts it exactly when the model
interpolates.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from flint import fmpq

from tfcert.errors import InputError
from tfcert.verify.check import check_compatible
from tfcert.verify.claims.exact import hausdorff_squared
from tfcert.verify.claims.size import measure
from tfcert.verify.evaluate import Attention, Replay
from tfcert.verify.formats import CERTIFICATE_FORMAT, Dataset, Model, load_document, read_dataset, read_model


@dataclass(frozen=True)
class SequenceVerdict:
    index: int
    exact: bool
    hausdorff_squared: fmpq


@dataclass(frozen=True)
class AttentionLayer:
    """A scored hardmax layer: the least argmax gap and every tie."""
    block: int
    min_gap: fmpq | None
    ties: tuple[tuple[int, int], ...]  # [sequence, token]
    table: tuple[tuple[Attention, ...], ...]


@dataclass(frozen=True)
class AuditReport:
    sequences: tuple[SequenceVerdict, ...]
    layers: tuple[AttentionLayer, ...]
    uniform_blocks: tuple[int, ...]
    size: dict

    @property
    def interpolates(self) -> bool:
        return all(s.exact for s in self.sequences)


def audit(model: Model, dataset: Dataset, progress=None) -> AuditReport:
    """Replay ``model`` exactly on every input sequence of ``dataset``."""
    if model.attention != "hardmax":
        raise InputError("audit of softmax models is not supported yet")
    replay = Replay(model, [p.input for p in dataset.pairs])
    layers, uniform = [], []
    for step in replay.steps():
        if step.layer != "sa":
            continue
        if progress:
            progress(step.block + 1, len(model.blocks))
        if step.uniform:
            uniform.append(step.block)
        if step.attention is not None:
            gaps = [a.gap for row in step.attention for a in row if a.gap is not None]
            ties = tuple((p.index, i) for p, row in zip(dataset.pairs, step.attention)
                         for i, a in enumerate(row) if len(a.argmax) > 1)
            layers.append(AttentionLayer(step.block, min(gaps) if gaps else None, ties, step.attention))
    verdicts = tuple(SequenceVerdict(p.index, set(out) == set(p.output), hausdorff_squared(out, p.output))
                     for p, out in zip(dataset.pairs, replay.sequences()))
    return AuditReport(verdicts, tuple(layers), tuple(uniform), measure(model, dataset, "1.6"))


def certificate(report: AuditReport, model_bytes: bytes, dataset_bytes: bytes, n_blocks: int) -> dict:
    """A certificate of what the audit found, with the exactness claim that
    ``verify`` accepts exactly when the model interpolates."""
    claims: list[dict] = [{"kind": "uniform_attention", "block": k} for k in report.uniform_blocks]
    for layer in report.layers:
        table = [[[list(a.argmax), None if a.gap is None else str(a.gap)] for a in row] for row in layer.table]
        claims.append({"kind": "argmax", "block": layer.block, "ties": len(layer.ties), "tokens": table})
    claims += [{"kind": "exact"}, {"kind": "size", **report.size}]
    return {"format": CERTIFICATE_FORMAT,
            "model_sha256": hashlib.sha256(model_bytes).hexdigest(),
            "dataset_sha256": hashlib.sha256(dataset_bytes).hexdigest(),
            "attention": "hardmax", "theorem": report.size["theorem"],
            "phases": [{"name": "audit", "blocks": [0, n_blocks], "claims": claims}]}


def audit_files(model_path: str, dataset_path: str, progress=None):
    """Read, check compatibility and audit; returns (report, model doc, dataset doc)."""
    model_doc, dataset_doc = load_document(model_path), load_document(dataset_path)
    model, dataset = read_model(model_doc), read_dataset(dataset_doc)
    check_compatible(model, dataset, model_doc.path, dataset_doc.path)
    return audit(model, dataset, progress), model, model_doc, dataset_doc
