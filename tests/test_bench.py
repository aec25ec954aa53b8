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
    assert row["blocks"] == 2 * row["N"] * row["m"] + 1  # no bumps on this dataset
    assert row["verify_s"] > 0 and row["float64_forward_s"] > 0
    assert row["verify_over_float64"] > 0
    blocks = [r["blocks"] for r in doc["width_tradeoff"]]
    assert blocks == sorted(blocks, reverse=True) and blocks[-1] == 3
