"""InfoFlow (arXiv 2605.17930): information sets, cost laws and z3-decided architectures.

Notebook entry points: ``Architecture``, ``parse_target``/``builtin_target``/``load_tree``,
``predict``, ``min_heads``, ``depth``, ``replay``, ``check_document``/``check_file`` (the
independent witness checker), ``theorem2_exponent``, ``theorem3_exponent``, ``predictions_table``.
"""
from tfcert.infoflow.architecture import Architecture
from tfcert.infoflow.check import Report, check_document, check_file
from tfcert.infoflow.costs import CostTerm, theorem2_exponent, theorem3_exponent
from tfcert.infoflow.proofs import recheck
from tfcert.infoflow.replay import ReplayReport, replay
from tfcert.infoflow.search import (Depth, MinHeads, Prediction, Proof, depth, min_heads,
                                    predict)
from tfcert.infoflow.table import predictions_table
from tfcert.infoflow.targets import (Combine, Comparison, Reduce, Score, Target, builtin_target,
                                     load_tree, parse_target, target_from_json)
from tfcert.infoflow.witness import Derivation, HeadPlan, HeadUse, Step

__all__ = [
    "Architecture", "Combine", "Comparison", "CostTerm", "Depth", "Derivation", "HeadPlan",
    "HeadUse", "MinHeads", "Prediction", "Proof", "Reduce", "ReplayReport", "Report", "Score",
    "Step", "Target", "builtin_target", "check_document", "check_file", "depth", "load_tree",
    "min_heads", "parse_target", "predict", "predictions_table", "recheck", "replay",
    "target_from_json", "theorem2_exponent", "theorem3_exponent",
]
