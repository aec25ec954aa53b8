"""tfcert: build transformers that interpolate exactly, certify every phase,
and check certificates and arbitrary models with an independent verifier.

Exit codes: 0 every claim holds, 1 some claim fails, 2 bad input or usage."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tfcert.errors import InputError


def _progress(label: str):
    """A progress callback that draws on stderr only when it is a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        end = "\n" if done == total else ""
        print(f"\r{label}: block {done}/{total}", end=end, file=sys.stderr, flush=True)
    return show


def _write_text(path: str, data: bytes) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist yet
        return os.path.abspath(a) == os.path.abspath(b)


def _refuse_overwrite(outputs: list, inputs: list) -> None:
    """An output path that is one of the inputs would destroy what was read."""
    for out in outputs:
        for given in inputs:
            if _same_file(out, given):
                raise InputError(f"{out}: is the input {given}; refusing to overwrite it")


def _limits(pairs: list[str] | None) -> None:
    """Set the checker's limits: the defaults, then ``--limit NAME=VALUE`` options."""
    from dataclasses import fields
    from tfcert.verify.numbers import LIMITS

    kinds = {f.name: f.type for f in fields(LIMITS)}
    for f in fields(LIMITS):
        setattr(LIMITS, f.name, f.default)
    for pair in pairs or ():
        name, _, text = pair.partition("=")
        if name not in kinds:
            raise InputError(f"--limit {pair}: expected NAME=VALUE with NAME one of {', '.join(kinds)}")
        try:
            value = float(text) if kinds[name] == "float" else int(text)
        except ValueError:
            value = -1
        if not value > 0:
            raise InputError(f"--limit {pair}: expected a positive number")
        setattr(LIMITS, name, value)


def _warn(warnings: tuple[str, ...]) -> None:
    """The dataset's warnings (dropped duplicates), one ``warning:`` line each."""
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


def cmd_construct(args) -> int:
    from tfcert.construct.bundle import build, write
    from tfcert.report import phase_table, size_line
    from tfcert.verify.claims.size import measure

    _refuse_overwrite([Path(args.output) / name for name in ("dataset.json", "model.json", "certificate.json")],
                      [args.dataset])
    start = time.perf_counter()
    bundle = build(args.dataset, args.attention, args.width, _progress("verifying"))
    write(bundle.files, args.output)
    seconds = time.perf_counter() - start
    size = measure(bundle.construction.model, bundle.dataset, bundle.construction.theorem)
    _warn(bundle.dataset.warnings)
    if args.json:
        print(json.dumps({"output": str(args.output), "size": size, "seconds": round(seconds, 3),
                          "phases": [{"name": p.name, "blocks": list(p.span), "claims": len(p.claims)}
                                     for p in bundle.construction.phases],
                          "claims": len(bundle.report.results)}, indent=1))
    else:
        print(phase_table(bundle.construction))
        print(size_line(size))
        print(f"{len(bundle.report.results)} claims verified; wrote {args.output}/"
              f"{{dataset,model,certificate}}.json in {seconds:.2f}s")
    return 0


def cmd_verify(args) -> int:
    from tfcert.report import as_json, human, junit
    from tfcert.verify.check import verify_files

    if args.junit:
        _refuse_overwrite([args.junit], [args.model, args.dataset, args.certificate])
    report = verify_files(args.model, args.dataset, args.certificate, _progress("verifying"))
    _warn(report.warnings)
    if args.junit:
        _write_text(args.junit, junit(report))
    print(json.dumps(as_json(report), indent=1) if args.json else human(report))
    return 0 if report.ok else 1


def cmd_audit(args) -> int:
    from tfcert.audit.audit import audit_files, certificate
    from tfcert.report import audit_human, audit_json
    from tfcert.verify.check import verify
    from tfcert.verify.formats import dumps, parse_document
    from tfcert.verify.numbers import LimitError, parse_number

    tau = None
    if args.temperature is not None:
        tau = parse_number(args.temperature, "--temperature")
        if tau <= 0:
            raise InputError("--temperature: must be > 0")
    if args.output:
        _refuse_overwrite([args.output], [args.model, args.dataset])
    try:
        report, model, model_doc, dataset_doc = audit_files(args.model, args.dataset, _progress("auditing"), tau)
    except LimitError as exc:  # the replay stopped: nothing is known about interpolation
        print(json.dumps({"interpolates": False, "not_checked": str(exc)}, indent=1) if args.json
              else f"verdict: not checked: the replay stopped: {exc}")
        return 1
    _warn(report.warnings)
    if args.output and model.attention == "softmax":
        raise InputError("-o: a softmax certificate must prove every temperature up to the model's (a tau_star "
                         "claim), and the audit checks one; build with tfcert construct --attention softmax")
    if args.output and tau is not None and tau != model.temperature:
        raise InputError(f"-o: a certificate speaks about the model at its own temperature {model.temperature}; "
                         f"drop --temperature {args.temperature}")
    text = json.dumps(audit_json(report), indent=1) if args.json else audit_human(report)
    if args.output:
        cert = dumps(certificate(report, model_doc.raw, dataset_doc.raw, len(model.blocks)))
        check = verify(model_doc, dataset_doc, parse_document(args.output, cert))
        if check.ok != report.interpolates:
            raise AssertionError("audit certificate disagrees with the audit")  # a bug
        _write_text(args.output, cert)
    print(text)
    return 0 if report.interpolates else 1


def cmd_demo(args) -> int:
    from tfcert.demo import run_demo

    return run_demo(args.output, args.attention)


def cmd_selftest(args) -> int:
    from tfcert.selftest import run_selftest

    return run_selftest(args.mutations, args.seed, args.json)


def cmd_bench(args) -> int:
    from tfcert.bench import run_bench

    return run_bench(args.quick, args.json)


def _limit_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", action="append", metavar="NAME=VALUE",
                   help="file_bytes, digits, bits or z3_seconds (docs/certificates.md, Limits)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfcert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("construct", help="build, certify and verify an interpolating transformer")
    p.add_argument("dataset")
    p.add_argument("-o", "--output", required=True, help="bundle directory")
    p.add_argument("--attention", choices=["hardmax", "softmax"], default="hardmax")
    p.add_argument("--width", type=int, default=4, help="FF width: ⌊W/3⌋ hats per layer (default 4)")
    p.add_argument("--json", action="store_true")
    _limit_option(p)
    p.set_defaults(func=cmd_construct)

    p = sub.add_parser("verify", help="check a certificate against a model and a dataset")
    p.add_argument("--model", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--certificate", required=True)
    p.add_argument("--json", action="store_true")
    p.add_argument("--junit", metavar="FILE")
    _limit_option(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("audit", help="audit any model against a dataset")
    p.add_argument("--model", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--temperature")
    p.add_argument("-o", "--output", metavar="CERT", help="write a certificate of the audit")
    p.add_argument("--json", action="store_true")
    _limit_option(p)
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("demo", help="build, certify and verify a bundled 2-D example, with a picture")
    p.add_argument("-o", "--output", default="tfcert-demo")
    p.add_argument("--attention", choices=["hardmax", "softmax"], default="hardmax")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("selftest", help="mutation campaign: the checker against an independent judge")
    p.add_argument("--mutations", type=int, default=200, metavar="N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_selftest)

    p = sub.add_parser("bench", help="time exact certification against a dense float64 forward pass")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_bench)

    from tfcert.experiments.cli import register as register_experiments
    from tfcert.infoflow.cli import register as register_infoflow

    register_infoflow(sub)
    register_experiments(sub)
    return parser


def _broken_pipe() -> int:
    """The reader of stdout went away (``tfcert verify --json | head``): stop
    quietly like a tool killed by SIGPIPE (exit 128 + 13 = 141, which is not
    one of the 0/1/2 verdicts). stdout is pointed at devnull so the flush at
    interpreter exit cannot print "Exception ignored … BrokenPipeError"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor: nothing to silence
        pass
    return 141


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return int(exc.code or 0)
    try:
        _limits(getattr(args, "limit", None))
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows up here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _broken_pipe()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ArithmeticError as exc:  # numbers so large that no enclosure can be formed
        print(f"error: the input's numbers are out of range: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
