"""Many sequences when d ≤ 3: the code of a leader is its side value on the circle, rounded to
the placement grid, and must differ across every leader of the dataset. The P leaders' τ lie
1/(16(n+1)) apart, so from 125 one-token sequences on a grid of 1/256 neighbours
rounded to one side value: two sequences shared a code, the highest snap's window held both,
and construct's own certificate failed ("snap: moves: stated [(199, 0)], recomputed [(194, 0),
…]"), under softmax and hardmax alike. construct/leaders.py's place now refines the grid until
the codes are distinct."""
from __future__ import annotations

import pytest

from tfcert.bench.bench import random_dataset
from tfcert.construct.build import construct, model_bytes
from tfcert.construct.bundle import build
from tfcert.verify.check import check_certificate
from tfcert.verify.formats import load_document, parse_document, read_dataset

SMALLEST = 125  # the least count of one-token sequences (random_dataset, d = 2) that failed


@pytest.mark.parametrize("d, attention", [(2, "softmax"), (3, "softmax"), (2, "hardmax")])
def test_many_one_token_sequences_build_and_verify(d, attention, tmp_path):
    path = tmp_path / "dataset.json"
    path.write_bytes(random_dataset(SMALLEST, 1, 1, d))
    bundle = build(path, attention)
    docs = {name: parse_document(name, raw) for name, raw in bundle.files.items()}
    report = check_certificate(docs["model.json"], load_document(path), docs["certificate.json"])
    assert report.ok
    assert model_bytes(construct(bundle.dataset, attention).model) == bundle.files["model.json"]  # deterministic


def test_every_leader_has_its_own_code_with_many_sequences_of_two_leaders():
    """125 sequences of two outputs (250 leaders) also shared a code before."""
    data = read_dataset(parse_document("dataset.json", random_dataset(SMALLEST, 4, 2, 2)))
    lead = next(p for p in construct(data, "hardmax").phases if p.name == "leaders")
    codes = [leader.code(data.d) for leader in lead.leaders]
    assert len(set(codes)) == len(codes) == 2 * SMALLEST
