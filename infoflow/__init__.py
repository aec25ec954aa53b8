"""InfoFlow (seed 004, arXiv 2605.17930): information sets, cost laws and z3-decided architectures.

Notebook entry points: ``Architecture``, ``parse_target``/``builtin_target``/``load_tree``,
``predict``, ``min_heads``, ``replay``, ``theorem2_exponent``, ``theorem3_exponent``,
``predictions_table``.
"""
from tfcert.infoflow.architecture import Architecture
from tfcert.infoflow.costs import CostTerm, theorem2_exponent, theorem3_exponent
from tfcert.infoflow.replay import ReplayReport, replay
from tfcert.infoflow.search import MinHeads, Prediction, min_heads, predict, recheck
from tfcert.infoflow.table import predictions_table
from tfcert.infoflow.targets import Comparison, Target, builtin_target, load_tree, parse_target
from tfcert.infoflow.witness import Derivation, HeadPlan, HeadUse

__all__ = [
    "Architecture", "Comparison", "CostTerm", "Derivation", "HeadPlan", "HeadUse", "MinHeads",
    "Prediction", "ReplayReport", "Target", "builtin_target", "load_tree", "min_heads",
    "parse_target", "predict", "predictions_table", "recheck", "replay", "theorem2_exponent",
    "theorem3_exponent",
]
