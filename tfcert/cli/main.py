"""tfcert: build transformers that interpolate exactly, certify every phase,
and check certificates and arbitrary models with an independent verifier.

Exit codes: 0 every claim holds, 1 some claim fails, 2 bad input or usage."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from tfcert.errors import InputError, with_limit_hint


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
            if given not in (None, "-") and _same_file(out, given):
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
        if not 0 < value < 2**62:  # inf and NaN too: z3 takes milliseconds, a read an index-sized count
            raise InputError(f"--limit {pair}: expected a positive number below 2^62")
        setattr(LIMITS, name, value)


def _warn(warnings: tuple[str, ...]) -> None:
    """The dataset's warnings (dropped duplicates), one ``warning:`` line each."""
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _print_json(doc: object) -> None:
    from tfcert.report import json_text

    print(json_text(doc))


def cmd_construct(args) -> int:
    from tfcert.construct.bundle import build, refuse_to_replace, write_bundle
    from tfcert.construct.snap import UNITS
    from tfcert.files import load
    from tfcert.progress import Bar
    from tfcert.report import approx, phase_table, size_line
    from tfcert.verify.claims.size import measure

    if args.width < UNITS:
        raise InputError(f"--width: {args.width} is too small; a leader hat or a snap needs {UNITS} units")
    _refuse_overwrite([Path(args.output) / name for name in ("dataset.json", "model.json", "certificate.json")],
                      [args.dataset])
    refuse_to_replace(args.output, args.force)  # before the work, not after it
    start = time.perf_counter()
    with Bar("construct") as bar:
        with _sharded(args, bar) as replay:
            bundle = build(load(args.dataset, "dataset"), args.attention, args.width, bar, replay)
    write_bundle(bundle.files, args.output, args.force)
    seconds = time.perf_counter() - start
    size = measure(bundle.construction.model, bundle.dataset, bundle.construction.theorem)
    _warn(bundle.dataset.warnings)
    if args.json:
        _print_json({"output": str(args.output), "size": size, "seconds": round(seconds, 3),
                     "phases": [{"name": p.name, "blocks": list(p.span), "claims": len(p.claims)}
                                for p in bundle.construction.phases],
                     "claims": len(bundle.report.results), "notes": list(bundle.notes)})
    else:
        print(phase_table(bundle.construction))
        print(size_line(size))
        for name, bound, why in bundle.floats:  # which float runs are certified, and why not the others
            print(f"float {name}: " + (f"every output within {approx(bound, digits=3)} of the exact one"
                                       if bound is not None else f"no claim: {why}"))
        for note in bundle.notes:
            print(f"note: {note}")
        print(f"{len(bundle.report.results)} claims verified; wrote {args.output}/"
              f"{{dataset,model,certificate}}.json in {seconds:.2f}s")
    return 0


def _sharded(args, bar):
    """--shards/--scheduler: the sharded replay on Dask (tfcert/shards.py), as a context
    manager that gives it (None: one process)."""
    from tfcert.shards import from_options

    return from_options(args.shards, args.scheduler, bar)


def _documents(args, slots: tuple[str, ...]) -> dict:
    from tfcert.files import load, resolve

    paths = resolve(args.bundle, {slot: getattr(args, slot) for slot in slots})
    return {slot: load(path, slot) for slot, path in paths.items()}


def cmd_verify(args) -> int:
    from tfcert.progress import Bar, Replay
    from tfcert.report import as_json, human, junit
    from tfcert.verify.check import check_certificate

    docs = _documents(args, ("model", "dataset", "certificate"))
    if args.junit:
        _refuse_overwrite([args.junit], [d.path for d in docs.values()])
    with Bar("verify") as bar:
        watch = Replay(bar)
        with _sharded(args, bar) as replay:
            report = check_certificate(docs["model"], docs["dataset"], docs["certificate"], watch, observers=(watch,),
                                       replay=replay)
    _warn(report.warnings)
    if args.junit:
        _write_text(args.junit, junit(report))
    if args.json:
        _print_json(as_json(report))
    else:
        print(human(report))
    return 0 if report.ok else 1


def cmd_check(args) -> int:
    from tfcert.files import BUNDLE_FILES, find_bundles, load
    from tfcert.progress import Bar
    from tfcert.report import as_json, junit_suites
    from tfcert.verify.check import check_certificate

    bundles = [b for root in args.roots for b in find_bundles(root)]
    if not bundles:
        raise InputError(f"{', '.join(args.roots)}: no bundle folders found (a bundle holds dataset.json, "
                         f"model.json and certificate.json)")
    if args.junit:
        _refuse_overwrite([args.junit], [b / name for b in bundles for name in BUNDLE_FILES.values()])
    reports = []
    with Bar("check", unit="bundle") as bar:
        for i, folder in enumerate(bundles):
            bar(i, len(bundles), str(folder))
            docs = [load(folder / f"{slot}.json", slot) for slot in ("model", "dataset", "certificate")]
            reports.append((str(folder), check_certificate(*docs)))
    if args.junit:
        _write_text(args.junit, junit_suites(reports))
    ok = all(r.ok for _, r in reports)
    if args.json:
        _print_json({"ok": ok, "bundles": [{"path": name, **as_json(r)} for name, r in reports]})
    else:
        for name, r in reports:
            failed = [x for x in r.results if not x.ok]
            print(f"{'ok  ' if r.ok else 'FAIL'} {name}: {len(r.results)} claims"
                  + ("" if r.ok else f", {len(failed)} fail"))
            for x in failed:
                for failure in x.failures:
                    print(f"     {x.phase}/{x.kind} ({x.where}): {failure}")
        print(f"{len(reports)} bundle(s): " + ("all verify" if ok else
                                              f"{sum(not r.ok for _, r in reports)} FAIL"))
    return 0 if ok else 1


def cmd_audit(args) -> int:
    from tfcert.audit.audit import audit, certificate
    from tfcert.progress import Bar
    from tfcert.report import audit_human, audit_json, audit_stopped_json, json_text
    from tfcert.verify.check import check_certificate, check_compatible
    from tfcert.verify.formats import parse_document, read_dataset, read_model
    from tfcert.canonical import dumps
    from tfcert.verify.numbers import parse_number

    tau = None
    if args.temperature is not None:
        tau = parse_number(args.temperature, "--temperature")
        if tau <= 0:
            raise InputError("--temperature: must be > 0")
    docs = _documents(args, ("model", "dataset"))
    model_doc, dataset_doc = docs["model"], docs["dataset"]
    if args.output:
        _refuse_overwrite([args.output], [model_doc.path, dataset_doc.path])
    model, dataset = read_model(model_doc), read_dataset(dataset_doc)
    check_compatible(model, dataset, model_doc.path, dataset_doc.path)
    if args.output and model.attention == "softmax":
        raise InputError("-o: a softmax certificate must prove every temperature up to the model's (a tau_star "
                         "claim), and the audit checks one; build with tfcert construct --attention softmax")
    if args.output and tau is not None and tau != model.temperature:
        raise InputError(f"-o: a certificate speaks about the model at its own temperature {model.temperature}; "
                         f"drop --temperature {args.temperature}")
    try:
        with Bar("audit") as bar:
            report = audit(model, dataset, bar, tau, tuple(args.float or ()))
    except ArithmeticError as exc:  # the replay stopped (LimitError, or an enclosure out of range)
        print(json_text(audit_stopped_json(exc)) if args.json
              else f"verdict: not checked: the replay stopped: {exc}")
        return 1
    _warn(report.warnings)
    text = json_text(audit_json(report)) if args.json else audit_human(report)
    if args.output:
        cert = dumps(certificate(report, model_doc.raw, dataset_doc.raw, len(model.blocks)))
        check = check_certificate(model_doc, dataset_doc, parse_document(args.output, cert))
        if check.ok != report.interpolates:
            raise AssertionError("audit certificate disagrees with the audit")  # a bug
        _write_text(args.output, cert)
    print(text)
    return 0 if report.interpolates else 1


def cmd_plot(args) -> int:
    from tfcert.cli.plot import render_bundle

    pictures = render_bundle(args.bundle)
    files = pictures.write(args.output or args.bundle)
    for name, why in pictures.skipped.items():
        print(f"note: no {name}.png: {why}", file=sys.stderr)
    if args.json:
        _print_json({"files": {k: str(v) for k, v in files.items()}, "skipped": pictures.skipped})
    else:
        print("wrote " + ", ".join(str(v) for v in files.values()))
    return 0


def cmd_report(args) -> int:
    from tfcert.cli.htmlreport import page
    from tfcert.cli.plot import phases, render
    from tfcert.progress import Bar
    from tfcert.verify.check import check_certificate
    from tfcert.verify.formats import read_dataset, read_model

    docs = _documents(args, ("model", "dataset", "certificate"))
    _refuse_overwrite([args.output], [d.path for d in docs.values()])
    with Bar("verify") as bar:
        report = check_certificate(docs["model"], docs["dataset"], docs["certificate"], bar)
    _warn(report.warnings)
    model, cert = read_model(docs["model"]), docs["certificate"]
    pictures, note = None, None
    try:
        pictures = render(model, read_dataset(docs["dataset"]), cert.value,
                          phases(cert.value, len(model.blocks), cert.path), cert.path)
    except InputError as exc:  # a certificate that fails may not be drawable; the page says why
        if report.ok:
            raise
        note = str(exc)
    _write_text(args.output, page(docs, report, pictures, note).encode("utf-8"))
    failed = sum(not r.ok for r in report.results)
    print(f"wrote {args.output}: {len(report.results)} claims checked: "
          + ("all claims hold" if report.ok else f"{failed} claim(s) FAIL"))
    return 0 if report.ok else 1


def cmd_schema(args) -> int:
    from tfcert.cli.schemas import load_schema, names

    if args.name is None:
        print("\n".join(names()))
    else:
        _print_json(load_schema(args.name))
    return 0


def cmd_export(args) -> int:
    import hashlib

    from tfcert.files import load
    from tfcert.verify.formats import read_model

    out = Path(args.output)
    if out.exists() and Path(args.model).exists() and os.path.samefile(out, args.model):
        raise InputError(f"{args.output}: is the input model; refusing to overwrite it")
    doc = load(args.model, "model")
    model = read_model(doc)
    import tfcert.export as tx  # torch / onnx are imported only here: their absence is one error line

    if args.onnx:
        from tfcert.export.onnxgraph import to_onnx

        data = to_onnx(model, args.dtype, name=args.model, sha256=doc.sha256)
        reader = "onnxruntime.InferenceSession"
    else:
        tx._torch()
        data = tx._module_bytes(tx.to_torch(model, args.dtype, name=args.model, sha256=doc.sha256))
        reader = "tfcert.export.load"
    tx.write_atomic(args.output, data)
    print(f"wrote {args.output}: {args.dtype}, {len(model.blocks)} blocks, {model.attention}, "
          f"sha256 {hashlib.sha256(data).hexdigest()[:16]}… (load with {reader})")
    return 0


def cmd_demo(args) -> int:
    from tfcert.cli.demo import run_demo

    return run_demo(args.output, args.attention)


def cmd_selftest(args) -> int:
    from tfcert.selftest.selftest import run_selftest

    return run_selftest(args.mutations, args.seed, args.json)


def cmd_bench(args) -> int:
    from tfcert.bench.bench import run_bench

    return run_bench(args.quick, args.json, args.out, args.shapes, args.suite, args.naive_cap, args.shards)


def version() -> str:
    """The installed distribution's version: pyproject.toml is its one source."""
    from importlib.metadata import PackageNotFoundError, version as dist_version

    try:
        return dist_version("tfcert")
    except PackageNotFoundError:
        return "unknown (not installed)"


JSON_HELP = "print one JSON document on stdout instead of the text summary"


def _limit_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", action="append", metavar="NAME=VALUE",
                   help="file_bytes, digits, bits, z3_seconds or tokens (docs/certificates.md, Limits); repeatable")


def _shard_options(p: argparse.ArgumentParser) -> None:
    """--shards and --scheduler: the claims checked on shards of the dataset on Dask (docs/scaling.md)."""
    p.add_argument("--shards", type=int, metavar="K",
                   help="check the claims on K shards of the dataset by sequence, on a local Dask cluster of K "
                        "worker processes (with --scheduler: on that cluster); the same verdict and report "
                        "(docs/scaling.md; pip install 'dask[distributed]')")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the shards on the existing Dask cluster whose scheduler is at ADDRESS "
                        "(tcp://HOST:PORT); one shard per worker unless --shards K")


def _solver_options(p: argparse.ArgumentParser, emit: bool = False) -> None:
    """--emit-smt and --cross-check: the region queries seen by tfcert/cli/smt.py (docs/certificates.md)."""
    if emit:
        p.add_argument("--emit-smt", metavar="DIR",
                       help="also write every region query as an SMT-LIB2 file in DIR, with DIR/index.json")
    p.add_argument("--cross-check", choices=["cvc5"],
                   help="also answer every region query with cvc5 (pip install cvc5): "
                        "a claim fails unless both solvers answer alike")
    p.set_defaults(region_observers=True)


def _observed(args):
    """The command runs with tfcert/cli/smt.py watching the verifier's region queries, when asked to."""
    import contextlib

    emit, second = getattr(args, "emit_smt", None), getattr(args, "cross_check", None)
    if not getattr(args, "region_observers", False) or (emit is None and second is None):
        return contextlib.nullcontext()
    from tfcert.cli.smt import observing

    return observing(emit, second)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfcert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tfcert {version()}",
                        help="print the installed version and exit")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bars (they are drawn on stderr only when it is a terminal)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress bars (they are drawn on stderr only when it is a terminal)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, func) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[common])
        p.set_defaults(func=func)
        return p

    p = command("construct", "build, certify and verify an interpolating transformer", cmd_construct)
    p.add_argument("dataset", metavar="DATASET", help="the dataset file (tfcert.dataset/1); '-' reads stdin")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="bundle folder to write: DIR/{dataset,model,certificate}.json")
    p.add_argument("--attention", choices=["hardmax", "softmax"], default="hardmax",
                   help="hardmax (Theorem 1.6) or softmax at the certified temperature tau* (Theorem 1.8); "
                        "default hardmax")
    p.add_argument("--width", type=int, default=4, metavar="W",
                   help="FF width: floor(W/4) leader hats or snaps per layer (default 4, the least)")
    p.add_argument("--force", action="store_true",
                   help="replace a bundle already in DIR: the whole folder, pictures included; a folder "
                        "holding files tfcert did not write is never replaced")
    _limit_option(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    _shard_options(p)

    def files(p: argparse.ArgumentParser, slots: tuple[str, ...]) -> None:
        p.add_argument("bundle", nargs="?", metavar="BUNDLE",
                       help="a bundle folder as construct writes it; --" + ", --".join(slots) +
                            " override its files")
        for slot in slots:
            p.add_argument(f"--{slot}", metavar="FILE",
                           help=f"the {slot} file (tfcert.{slot}/1); '-' reads stdin")

    p = command("verify", "check a certificate against a model and a dataset", cmd_verify)
    files(p, ("model", "dataset", "certificate"))
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report, one testcase per claim")
    _limit_option(p)
    _solver_options(p, emit=True)
    _shard_options(p)

    p = command("audit", "audit any model against a dataset", cmd_audit)
    files(p, ("model", "dataset"))
    p.add_argument("--temperature", metavar="TAU",
                   help="softmax models: audit at this temperature (a number such as 1/8) instead of the model's")
    p.add_argument("--float", action="append", choices=["binary64", "binary32", "binary16", "bfloat16"], metavar="FORMAT",
                   help="also prove a bound on float runs in this format (binary64, binary32, binary16 or bfloat16; repeatable): "
                        "the bound, or the first layer where none can be given and why (docs/float.md)")
    p.add_argument("-o", "--output", metavar="CERT", help="write a certificate of the audit")
    _limit_option(p)
    _solver_options(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)

    p = command("check", "verify every bundle found under folders (for CI and pre-commit)", cmd_check)
    p.add_argument("roots", nargs="*", default=["."], metavar="ROOT",
                   help="folders to search for bundles (default: the current folder)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report, one testsuite per bundle")
    _solver_options(p)

    p = command("plot", "draw a bundle: tokens through the phases (d = 2), per-layer gaps and margins", cmd_plot)
    p.add_argument("bundle", metavar="BUNDLE", help="a bundle folder as construct writes it")
    p.add_argument("-o", "--output", metavar="DIR", help="where the pictures go (default: BUNDLE)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)

    p = command("report", "verify a bundle and write one self-contained HTML page of the result", cmd_report)
    files(p, ("model", "dataset", "certificate"))
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the HTML file to write (inline CSS and pictures, nothing fetched)")
    _limit_option(p)

    p = command("schema", "print the JSON Schema of a file format or of a --json output", cmd_schema)
    p.add_argument("name", nargs="?", metavar="NAME", help="a schema name; without it, list the names")

    p = command("export", "write a model as a PyTorch module file or an ONNX model (docs/export.md)", cmd_export)
    p.add_argument("model", metavar="MODEL", help="the model file (tfcert.model/1)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the module file to write")
    fmt = p.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--torch", action="store_true", help="PyTorch (safetensors layout, no pickle; docs/export.md)")
    fmt.add_argument("--onnx", action="store_true", help="ONNX (opset 17; input x [n, d], output y [n, d])")
    p.add_argument("--dtype", choices=["float64", "float32", "float16", "bfloat16"], default="float64",
                   help="parameters rounded once from the exact rationals to this format (default float64; "
                        "float16 and bfloat16: --torch only)")

    p = command("demo", "build, certify and verify a bundled 2-D example, with pictures", cmd_demo)
    p.add_argument("-o", "--output", default="tfcert-demo", metavar="DIR",
                   help="folder for the bundle and phases.png, replaced if it exists (default tfcert-demo)")
    p.add_argument("--attention", choices=["hardmax", "softmax"], default="hardmax",
                   help="softmax also prints tau*, the empirical tau and their ratio (default hardmax)")

    p = command("selftest", "mutation campaign: the checker against an independent judge", cmd_selftest)
    p.add_argument("--mutations", type=int, default=200, metavar="N", help="how many single changes (default 200)")
    p.add_argument("--seed", type=int, default=0, help="the campaign's random seed (default 0)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)

    p = command("bench", "the benchmark suite: exact certification against a dense float64 forward pass "
                         "and a naive exact replay", cmd_bench)
    p.add_argument("--quick", action="store_true",
                   help="three small shapes (seconds), the naive replay must agree, and a corrupted model must "
                        "fail both (the CI check)")
    p.add_argument("--suite", action="append", metavar="NAME",
                   help="a named set of shapes: quick, N-scaling, n-scaling, tiny, m-scaling, d-scaling or naive "
                        "(repeatable; default: all but quick, naive and the ones below); noop (a 50 MB model of "
                        "300 000 blocks that change nothing: verify against float64) or noop-quick (3 000 blocks; "
                        "--quick runs it too); or one long sequence, construct and verify alone: one-sequence "
                        "(hardmax, d=2, n=49500 and 240000), one-sequence-softmax (n=2000, d=3), and their -quick "
                        "variants")
    p.add_argument("--shapes", action="append", metavar="SPEC",
                   help="shapes to measure: N=250,500 (N, n, m or d varied from N=250 n=64 m=2 d=16; "
                        "n from N=1 m=40 d=2) or 10x8x2x8 (N x n x m x d); repeatable")
    p.add_argument("--naive-cap", type=float, default=120.0, metavar="SECONDS",
                   help="stop the naive exact replay after this many seconds and report null (default 120; "
                        "0 skips it)")
    p.add_argument("--shards", type=int, metavar="K",
                   help="instead: measure verification sharded by sequence into K shards, and the merge "
                        "(docs/scaling.md; default shape N=250 n=64 m=2 d=16)")
    p.add_argument("--out", default="tfcert-bench", metavar="DIR",
                   help="where results.jsonl (one line per shape, written as measured), scaling.png and width.png "
                        "go (default tfcert-bench)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)

    from tfcert.cli.experiments import register as register_experiments
    from tfcert.cli.infoflow import register as register_infoflow

    register_infoflow(sub)
    register_experiments(sub)
    return parser


class StdoutError(Exception):
    """A write to stdout failed (a full disk, ``> /dev/full``): the output is lost, whatever
    the verdict was. Not an OSError, so no command mistakes it for a file of its own."""


class _Stdout:
    """sys.stdout while a command runs: a failed write or flush raises ``StdoutError``, so
    main() tells it apart from the files a command writes. A closed pipe stays a
    BrokenPipeError (the reader went away, which is not an error)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.strerror or str(exc)) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.strerror or str(exc)) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _drop_stdout() -> None:
    """Point stdout at devnull, so that the flush at interpreter exit cannot print
    "Exception ignored …" for output that could not be written."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor: nothing to silence
        pass


def _broken_pipe() -> int:
    """The reader of stdout went away (``tfcert verify --json | head``): stop
    quietly like a tool killed by SIGPIPE (exit 128 + 13 = 141, which is not
    one of the 0/1/2 verdicts)."""
    _drop_stdout()
    return 141


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return int(exc.code or 0)
    from tfcert.process import rare_collection
    from tfcert.progress import set_quiet

    set_quiet(args.quiet)
    stdout, sys.stdout = sys.stdout, _Stdout(sys.stdout)
    try:
        _limits(getattr(args, "limit", None))
        with rare_collection(), _observed(args):
            code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe or a full disk shows up here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _broken_pipe()
    except StdoutError as exc:
        print(f"error: stdout: cannot write the output: {exc}", file=sys.stderr)
        _drop_stdout()
        return 2
    except InputError as exc:
        print(f"error: {with_limit_hint(str(exc))}", file=sys.stderr)
        return 2
    except ArithmeticError as exc:  # numbers so large that no enclosure can be formed
        print(f"error: the input's numbers are out of range: {exc}", file=sys.stderr)
        return 2
    except MemoryError:  # numbers or tokens beyond this machine's memory: one line, as for any refusal
        print("error: out of memory (the input's numbers or tokens are too large for this machine; "
              "--limit digits=N or tokens=N refuses such input at once)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    finally:
        sys.stdout = stdout

