"""``tfcert infoflow predict | min-heads | depth | check | table``: a thin layer over the library."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tfcert.errors import InputError
from tfcert.infoflow.architecture import Architecture, parse_heads
from tfcert.infoflow.calculus import Rules, depth_closure
from tfcert.infoflow.search import (ORDER, Depth, MinHeads, Prediction, Proof, depth, min_heads,
                                    predict)
from tfcert.infoflow.table import TABLE_T, predictions_table
from tfcert.infoflow.targets import Target, parse_target
from tfcert.infoflow.witness import SHOW, WITNESS_FORMAT, Derivation
from tfcert.report import json_text


def _shown(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _int(option: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{option}: expected an integer, got {_shown(text)!r}") from None


def _depth_of(t: Target, positional: bool) -> int | None:
    return depth_closure(Rules(t.calc, 1, 1, positional))[0]


def _comparison_number(t: Target, T: int) -> int:
    """The target's comparison number at T, or InputError when it has more
    digits than Python prints (4300 by default): one error line, not a traceback."""
    n = t.comparison_number(T)
    digits, limit = n.bit_length() * 0.30103, sys.get_int_max_str_digits()
    if limit and digits > limit - 2:
        raise InputError(f"--T: {_shown(str(T))}: the comparison number has about {int(digits)} digits, more than "
                         f"can be written (limit {limit}); give a smaller T")
    return n


def _target_json(t: Target, T: int, positional: bool = False) -> dict:
    return {**t.to_json(), "order": t.order, "dimension": t.dimension,
            "comparison_number": _comparison_number(t, T), "depth": _depth_of(t, positional)}


def _rows(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in [header, *rows])


def _describe(w: Derivation, plan, cls: str) -> str:
    who = SHOW[cls]
    if plan.mode == "pos":
        return "attends to position(s) " + ", ".join(map(str, plan.positions))
    u = plan.use(cls)
    if u is None:
        return "-"
    if u.role == "copy":
        return f"{who} retrieves a token -> the closed facts it holds"
    tree = w.target.calc
    node = tree.by_name()[u.node]
    subst = {node.over[0]: "s"}
    if node.free:
        subst[next(iter(node.free))] = who
    best = "argbest" if node.rank == 1 else f"arg-{node.rank}th-best"
    got = f"{node.name}({who})" if node.free else node.name
    return f"{who} retrieves s* = {best}_s {tree.render(node.children[0], subst)} -> {got}"


def _witness_text(w: Derivation) -> str:
    plans = [[str(l), str(h), p.mode, _describe(w, p, "tok"), _describe(w, p, "out")]
             for l, layer in enumerate(w.plans, 1) for h, p in enumerate(layer, 1)
             if p.mode != "off"]
    off = sum(p.mode == "off" for layer in w.plans for p in layer)
    sets = w.info if w.info is not None else w.generators
    rows = [[str(l), "{" + ", ".join(tok) + "}", "{" + ", ".join(out) + "}"]
            for l, (tok, out) in enumerate(sets)]
    steps = [[str(s.layer), SHOW[s.at], s.fact, s.rule, "-" if s.head is None else str(s.head),
              ", ".join(f"{f}@{SHOW[c]}" for f, c in s.premises) or "-",
              ", ".join(f"{t.law} = {t.value(w.arch.T)}" for t in s.costs) or "-"]
             for s in w.steps]
    note = "" if w.info is not None else "\n(information sets as unions: I(c,l) is the union of " \
                                         "the listed sets)"
    return (_rows(["layer", "head", "mode", "at t", "at T+1"], plans)
            + (f"\n({off} head(s) off)" if off else "") + "\n\n"
            + _rows(["layer", "I(t,l)", "I(T+1,l)"], rows) + note + "\n\n"
            + _rows(["state", "at", "fact", "rule", "head", "premises", "cost"], steps))


def _proofs_json(proofs) -> list[dict]:
    return [p.to_json() for p in proofs]


def _witness_proof(p: Proof) -> dict:
    """A proof as the witness file gives it: the statement's kind (the checker builds its own
    query from it), the layer a fewer_heads statement is about, a pareto statement's heads in
    all and head vectors, the claim, the search's query."""
    out = {"kind": p.kind, "claim": p.claim, "smt2": p.smt2}
    if p.kind == "pareto":
        out.update(total=p.total, vectors=[list(v) for v in p.vectors])
    return {**out, "layer": p.layer} if p.kind == "fewer_heads" else out


def _witness_document(target: Target, arch: Architecture, w: Derivation | None,
                      proofs: tuple[Proof, ...]) -> dict:
    if w is not None:
        return {**w.to_json(), "proofs": [_witness_proof(p) for p in proofs]}
    return {"format": WITNESS_FORMAT, "target": target.name, "tree": target.calc.to_json(),
            "architecture": arch.to_json(), "derivation": False,
            "proofs": [_witness_proof(p) for p in proofs]}


def _write_witness(args: argparse.Namespace, doc: dict) -> None:
    path = args.witness
    if path is None:
        return
    if args.target.endswith(".json") and os.path.exists(path) and os.path.exists(args.target) \
            and os.path.samefile(path, args.target):
        raise InputError(f"--witness: {path} is the --target file; refusing to overwrite it")
    tmp = Path(f"{path}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"--witness: {path}: cannot write: {exc.strerror or exc}") from None


def _arch(args: argparse.Namespace, heads: tuple[int, ...]) -> Architecture:
    return Architecture(_int("--T", args.T), _int("--d", args.d), _int("--E", args.E), heads,
                        args.positional)


def _target_line(t: Target, arch: Architecture) -> str:
    return (f"target     {t.name}: {t.dimension} comparison(s), beta1 = {t.dimension}, "
            f"beta' = {t.order}, comparison number {_comparison_number(t, arch.T)}")


def _depth_line(t: Target, positional: bool) -> str:
    k = _depth_of(t, positional)
    if k is None:
        return "depth      none: no number of layers gives a T-bounded exponent"
    return f"depth      {k} layer(s) give a T-bounded exponent (with enough heads)"


def _prediction_json(p: Prediction) -> dict:
    w = p.witness
    return {"target": _target_json(p.target, p.arch.T, p.arch.positional),
            "architecture": p.arch.to_json(), "reachable": w is not None,
            "efficient": p.efficient,
            "exponent": None if w is None else w.dominant.to_json(p.arch.T),
            "witness": None if w is None else w.to_json(),
            "proof": {"claim": p.proof_claim, "smt2": p.proof},
            "proofs": _proofs_json(p.proofs)}


def _predict(args: argparse.Namespace) -> int:
    target = parse_target(args.target)
    arch = _arch(args, parse_heads(args.heads))
    p = predict(target, arch)
    _write_witness(args, _witness_document(target, arch, p.witness, p.proofs))
    if args.json:
        print(json_text(_prediction_json(p)))
        return 0
    t, w = p.target, p.witness
    print(_target_line(t, arch))
    print(_depth_line(t, arch.positional))
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
    return _proofs_and_witness(args, p.proofs, w)


def _min_heads_json(m: MinHeads) -> dict:
    return {"target": _target_json(m.target, m.arch.T, m.arch.positional), "T": m.arch.T,
            "layers": m.arch.layers, "efficient": m.min_heads is not None,
            "min_heads": None if m.min_heads is None else list(m.min_heads),
            "order": ORDER, "least_total": m.least_total,
            "pareto": [list(v) for v in m.pareto], "pareto_complete": m.complete,
            "witness": None if m.witness is None else m.witness.to_json(),
            "proofs": _proofs_json(m.proofs)}


def _min_heads(args: argparse.Namespace) -> int:
    target = parse_target(args.target)
    _arch(args, (1,))  # validates the options
    m = min_heads(target, _int("--T", args.T), _int("--layers", args.layers), int(args.d),
                  int(args.E), args.positional)
    _write_witness(args, _witness_document(target, m.arch, m.witness, m.proofs))
    if args.json:
        print(json_text(_min_heads_json(m)))
        return 0
    print(f"target     {target.name}, T={m.arch.T}, L={m.arch.layers}")
    if m.min_heads is None:
        print("min heads  none: no T-bounded derivation with any number of heads")
    else:
        print(f"min heads  {_heads(m.min_heads)} (lexicographic: the fewest in layer 1 first)")
        least = "not proved (the search's budget ran out)" if m.least_total is None else \
            f"{m.least_total}" + ("" if m.complete else ", not every vector of it listed")
        print(f"pareto     {'; '.join(f'{_heads(v)} ({sum(v)} in all)' for v in m.pareto)}; "
              f"least total {least}")
    return _proofs_and_witness(args, m.proofs, m.witness)


def _heads(v) -> str:
    return ",".join(map(str, v))


def _proofs_and_witness(args, proofs, witness) -> int:
    """The common end of a human report: the unsat proofs, where the witness went, the witness."""
    for p in proofs:
        print(f"proof      {p.claim} (SMT-LIB2 query, unsat; --json or --witness to get it)")
    if args.witness:
        print(f"witness    {args.witness} (check it: tfcert infoflow check {args.witness})")
    if witness is not None:
        print("\n" + _witness_text(witness))
    return 0


def _depth_json(r: Depth) -> dict:
    f = r.fewer
    return {"target": _target_json(r.target, r.arch.T, r.arch.positional), "T": r.arch.T,
            "positional": r.arch.positional, "depth": r.depth,
            "min_heads": None if r.min_heads is None else list(r.min_heads),
            "witness": None if r.witness is None else r.witness.to_json(),
            "fewer_layers": None if f is None else {
                "layers": f.arch.layers, "efficient": f.efficient,
                "exponent": None if f.witness is None else f.witness.dominant.to_json(f.arch.T)},
            "proofs": _proofs_json(r.proofs)}


def _depth(args: argparse.Namespace) -> int:
    target = parse_target(args.target)
    arch = _arch(args, (1,))
    r = depth(target, arch.T, arch.d, arch.E, arch.positional)
    _write_witness(args, _witness_document(target, r.arch, r.witness, r.proofs))
    if args.json:
        print(json_text(_depth_json(r)))
        return 0
    print(_target_line(target, arch))
    if r.depth is None:
        print("depth      none: no number of layers gives a T-bounded exponent")
    else:
        print(f"depth      {r.depth} layer(s), least heads {','.join(map(str, r.min_heads))}")
    f = r.fewer
    if f is not None:
        if f.witness is None:
            print(f"fewer      {f.arch.layers} layer(s): no derivation reaches the readout")
        else:
            c = f.witness.dominant
            print(f"fewer      {f.arch.layers} layer(s): exponent {f.exponent} = max(0, {c.formula}) "
                  f"[{c.law}] at T={f.arch.T}, "
                  + ("bounded in T" if f.efficient else "grows with T"))
    return _proofs_and_witness(args, r.proofs, r.witness)


def _check(args: argparse.Namespace) -> int:
    from tfcert.infoflow.check import PROOF_TIMEOUT_MS, check_file
    from tfcert.cli.smt import Observer, Query

    # refused before the run: cvc5 missing, or DIR not new or empty (exit 2, nothing written)
    observer = Observer(args.emit_smt, args.cross_check, PROOF_TIMEOUT_MS / 1000)
    report = check_file(args.file, proofs=not args.no_proofs)
    for i, c in enumerate(report.certified):
        if c["smt2"] is not None:  # the checker's own query, which z3 answered unsat
            problem = observer.ask(Query(f"statement{i}-{c['kind']}", c["statement"], c["kind"], None,
                                         f"a counterexample to: {c['statement']}", "unsat", "unsat"), c["smt2"])
            if problem:
                report.errors.append(problem)
                report.valid = False
    observer.write()
    if args.json:
        print(json_text({"file": args.file, "valid": report.valid, "errors": report.errors,
                          "exponent": None if report.exponent is None else str(report.exponent),
                          "bounded_in_T": report.bounded, "certified": report.certified,
                          "not_checked": report.not_checked}))
        return 0 if report.valid else 1
    print(f"witness    {report.summary}")
    if report.valid:
        if report.exponent is None:
            print("valid      yes: no derivation; the statements below are certified")
        else:
            bound = "T-bounded (no cost term grows with T)" if report.bounded else "grows with T"
            print(f"valid      yes: exponent {report.exponent}, {bound}")
    else:
        print(f"invalid    {report.errors[0]}")
        if len(report.errors) > 1:
            print(f"           ({len(report.errors) - 1} more; --json lists them all)")
    for c in report.certified:
        how = "replayed step by step" if c["smt2"] is None else \
            "the checker's own query, unsat; --json prints it"
        print(f"certified  {c['statement']} ({how})")
    for c in report.not_checked:
        print(f"unchecked  {c['statement']} (--no-proofs)")
    return 0 if report.valid else 1


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
                            "triangle-center | alternation:k=K | path to a comparison-tree .json")
        q.add_argument("--T", required=True, help="number of input tokens")
        q.add_argument("--d", default="1", help="token dimension (default 1)")
        q.add_argument("--E", default="1", help="embedding dimension (default 1)")
        q.add_argument("--positional", action="store_true", help="positional encoding")
        q.add_argument("--json", action="store_true", help="one JSON document on stdout")
        q.add_argument("--witness", metavar="FILE",
                       help="write the derivation and its proofs (check: tfcert infoflow check)")

    pr = isub.add_parser("predict", help="least cost exponent, witness and minimality proof")
    common(pr)
    pr.add_argument("--heads", required=True, help="heads per layer, e.g. 1,1")
    pr.set_defaults(func=_predict)
    mh = isub.add_parser("min-heads", help="least heads per layer for a T-bounded derivation")
    common(mh)
    mh.add_argument("--layers", required=True, help="number of layers L")
    mh.set_defaults(func=_min_heads)
    dp = isub.add_parser("depth", help="least layers for a T-bounded derivation, and what fewer "
                                       "layers cost")
    common(dp)
    dp.set_defaults(func=_depth)
    ck = isub.add_parser("check", help="re-check a witness file independently (exit 0 valid, "
                                       "1 invalid, 2 bad input)")
    ck.add_argument("file", help="a witness written by --witness")
    ck.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ck.add_argument("--no-proofs", action="store_true", help="do not re-run the unsat queries")
    ck.add_argument("--emit-smt", metavar="DIR",
                    help="also write every query the checker certifies as an SMT-LIB2 file in DIR, "
                         "with DIR/index.json")
    ck.add_argument("--cross-check", choices=["cvc5"],
                    help="also answer every query with cvc5 (pip install cvc5): the witness is "
                         "invalid unless both solvers answer unsat")
    ck.set_defaults(func=_check)
    tb = isub.add_parser("table", help="the predictions table (Yu-Jiang-Bao-Li, arXiv 2605.17930), computed by the search")
    tb.add_argument("--json", action="store_true", help="one JSON document on stdout")
    tb.set_defaults(func=_table)
