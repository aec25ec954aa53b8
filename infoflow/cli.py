"""``tfcert infoflow predict | min-heads | table``: a thin layer over the library."""
from __future__ import annotations

import argparse

from tfcert.errors import InputError
from tfcert.infoflow.architecture import Architecture, parse_heads
from tfcert.infoflow.search import MinHeads, Prediction, min_heads, predict
from tfcert.infoflow.table import TABLE_T, predictions_table
from tfcert.infoflow.targets import Target, parse_target
from tfcert.infoflow.witness import Derivation
from tfcert.report import json_text


def _int(option: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{option}: expected an integer, got {text!r}") from None


def _target_json(t: Target, T: int) -> dict:
    return {**t.to_json(), "order": t.order, "dimension": t.dimension,
            "comparison_number": t.comparison_number(T)}


def _rows(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in [header, *rows])


def _witness_text(w: Derivation, ranks: dict[str, int]) -> str:
    plans = [[str(l), str(h), p.mode,
              *("-" if p.use(cls) is None else p.use(cls).describe(cls, ranks[p.use(cls).comparison])
                for cls in ("tok", "out"))]
             for l, layer in enumerate(w.plans, 1) for h, p in enumerate(layer, 1)]
    sets = [[str(l), "{" + ", ".join(tok) + "}", "{" + ", ".join(out) + "}"]
            for l, (tok, out) in enumerate(w.info)]
    return (_rows(["layer", "head", "mode", "at t", "at T+1"], plans) + "\n\n"
            + _rows(["layer", "I(t,l)", "I(T+1,l)"], sets))


def _prediction_json(p: Prediction) -> dict:
    w = p.witness
    return {"target": _target_json(p.target, p.arch.T), "architecture": p.arch.to_json(),
            "reachable": w is not None, "efficient": p.efficient,
            "exponent": None if w is None else w.dominant.to_json(p.arch.T),
            "witness": None if w is None else w.to_json(),
            "proof": {"claim": p.proof_claim, "smt2": p.proof}}


def _predict(args: argparse.Namespace) -> int:
    target = parse_target(args.target)
    arch = Architecture(_int("--T", args.T), _int("--d", args.d), _int("--E", args.E),
                        parse_heads(args.heads), args.positional)
    p = predict(target, arch)
    if args.json:
        print(json_text(_prediction_json(p)))
        return 0
    t, w = p.target, p.witness
    print(f"target     {t.name}: {t.dimension} comparison(s), beta1 = {t.dimension}, "
          f"beta' = {t.order}, comparison number {t.comparison_number(arch.T)}")
    print(f"arch       T={arch.T} d={arch.d} E={arch.E} heads={','.join(map(str, arch.heads))} "
          f"positional={'yes' if arch.positional else 'no'}")
    if w is None:
        print("exponent   none: no derivation reaches the readout")
    else:
        c = w.dominant
        where = ", ".join(f"{k}={v}" for k, v in c.where)
        print(f"exponent   {w.exponent} = max(0, {c.formula}) [{c.law}; {where}], "
              f"cost O(eps^-({w.exponent}))")
    print("efficient  " + ("yes (a derivation's exponent is bounded in T)" if p.efficient
                           else "no (every derivation's exponent grows with T)"))
    print(f"proof      {p.proof_claim} (SMT-LIB2 query, unsat; --json to get it)")
    if w is not None:
        ranks = {c.name: c.rank for c in t.comparisons}
        print("\n" + _witness_text(w, ranks))
    return 0


def _min_heads_json(m: MinHeads) -> dict:
    return {"target": _target_json(m.target, m.arch.T), "T": m.arch.T,
            "layers": m.arch.layers, "efficient": m.min_heads is not None,
            "min_heads": None if m.min_heads is None else list(m.min_heads),
            "witness": None if m.witness is None else m.witness.to_json(),
            "proofs": [{"layer": p.layer, "heads": list(p.heads), "claim": p.claim,
                        "smt2": p.smt2} for p in m.proofs]}


def _min_heads(args: argparse.Namespace) -> int:
    target = parse_target(args.target)
    T = _int("--T", args.T)
    Architecture(T, _int("--d", args.d), _int("--E", args.E))  # validates the options
    m = min_heads(target, T, _int("--layers", args.layers), int(args.d), int(args.E),
                  args.positional)
    if args.json:
        print(json_text(_min_heads_json(m)))
        return 0
    print(f"target     {target.name}, T={T}, L={m.arch.layers}")
    if m.min_heads is None:
        print("min heads  none: no T-bounded derivation with any number of heads")
    else:
        print(f"min heads  {','.join(map(str, m.min_heads))}")
    for p in m.proofs:
        print(f"proof      {p.claim} (SMT-LIB2 query, unsat; --json to get it)")
    if m.witness is not None:
        ranks = {c.name: c.rank for c in target.comparisons}
        print("\n" + _witness_text(m.witness, ranks))
    return 0


def _table(args: argparse.Namespace) -> int:
    rows = predictions_table()
    if args.json:
        print(json_text(rows))
        return 0
    print(_rows(["prediction", "target", "architecture",
                 *(f"T={T}" for T in TABLE_T), "efficient", "expected"],
                [[r["prediction"], r["target"], r["architecture"],
                  *(r["values"][str(T)] for T in TABLE_T),
                  "yes" if r["efficient"] else "no", r["expected"]] for r in rows]))
    return 0


def register(sub) -> None:
    """Add ``infoflow`` and its subcommands to the top-level subparsers."""
    p = sub.add_parser("infoflow", help="InfoFlow calculus: information sets, cost laws, z3")
    isub = p.add_subparsers(dest="infoflow_command", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--target", required=True,
                       help="pairwise-min | kth-largest:k=K[,n=N] | intrinsic-dim:D=D | "
                            "triangle-center | path to a comparison-tree .json")
        q.add_argument("--T", required=True, help="number of input tokens")
        q.add_argument("--d", default="1", help="token dimension (default 1)")
        q.add_argument("--E", default="1", help="embedding dimension (default 1)")
        q.add_argument("--positional", action="store_true", help="positional encoding")
        q.add_argument("--json", action="store_true", help="one JSON document on stdout")

    pr = isub.add_parser("predict", help="least cost exponent, witness and minimality proof")
    common(pr)
    pr.add_argument("--heads", required=True, help="heads per layer, e.g. 1,1")
    pr.set_defaults(func=_predict)
    mh = isub.add_parser("min-heads", help="least heads per layer for a T-bounded derivation")
    common(mh)
    mh.add_argument("--layers", required=True, help="number of layers L")
    mh.set_defaults(func=_min_heads)
    tb = isub.add_parser("table", help="the predictions table (Yu-Jiang-Bao-Li, arXiv 2605.17930), computed by the search")
    tb.add_argument("--json", action="store_true", help="one JSON document on stdout")
    tb.set_defaults(func=_table)
