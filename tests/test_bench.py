"""``tfcert bench --quick`` runs in CI: ratios measured in one run, and the
width trade-off (more width, fewer blocks)."""
from __future__ import annotations

import json

from tfcert.main import main


def test_bench_quick_json(capsys, tmp_path):
    assert main(["bench", "--quick", "--json", "--out", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["results"]
    assert row["verified"] is True
    # no bumps on this dataset; the interval block and ≤ N − 1 blocks for leftovers (d ≥ 3 hardmax)
    assert 2 * row["N"] * row["m"] + 1 <= row["blocks"] <= 2 * row["N"] * row["m"] + 2 * row["N"] + 1
    assert row["binary64_bound_rel"] <= 1e-9 and row["binary64_observed_numpy"] <= row["binary64_bound"]
    assert row["binary64_observed_reverse"] <= row["binary64_bound"]
    assert row["verify_s"] > 0 and row["float64_forward_s"] > 0
    assert row["verify_over_float64"] > 0
    blocks = [r["blocks"] for r in doc["width_tradeoff"]]
    assert blocks == sorted(blocks, reverse=True) and blocks[-1] < blocks[0]


def test_dense_forward_is_the_float_run(tmp_path):
    """The bench's peer (reads the files, batches by length, skips V = 0
    attentions) computes the model: it lands within the certified binary64
    bound of the targets, sequences of different lengths included."""
    import numpy as np
    from fractions import Fraction

    from tfcert.api import construct
    from tfcert.bench import dense_forward, hausdorff

    pairs = [{"input": [[i, (i * i) % 5, 1] for i in range(n)], "output": [[n, 0, 0], [0, n, 1]][:min(n, 2)]}
             for n in (1, 3, 3, 4, 6)]
    bundle = construct({"format": "tfcert.dataset/1", "d": 3, "pairs": pairs})
    (bound,) = [Fraction(c["bound"]) for p in bundle.certificate["phases"] for c in p["claims"]
                if c["kind"] == "float" and c["format"] == "binary64"]
    outs = dense_forward(bundle.files["model.json"], bundle.files["dataset.json"])
    for out, pair in zip(outs, pairs):
        assert hausdorff(out, np.array(pair["output"], dtype=float)) <= float(bound)
