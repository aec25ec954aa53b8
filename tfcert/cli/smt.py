"""Region queries as files any SMT-LIB2 solver reads, and cvc5's answer beside z3's
(docs/certificates.md, "A second solver").

The verifier decides each region claim with one z3 query and hands that query's text, as
z3 prints the very solver it decided, to the observers in ``tfcert.verify.regions``. This
module holds the two observers the command line offers: ``--emit-smt DIR`` keeps every
query (one file per claim that asks it, and ``index.json``), ``--cross-check cvc5`` asks
cvc5 the same text and fails the claim unless both solvers give the same sat/unsat answer.
Nothing here can make a claim pass: an observer only adds failures.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from tfcert.errors import InputError

INDEX = "index.json"
INDEX_FORMAT = "tfcert.smt-index/1"
SOLVERS = ("cvc5",)
_WHERE = re.compile(r"\$\.phases\[(\d+)\]\.claims\[(\d+)\]$")


@dataclass(frozen=True)
class Query:
    """One query as the index lists it; ``expected`` is the answer under which its claim holds."""
    file: str
    claim: str | None  # the claim's JSON path in the certificate, or the statement it proves
    kind: str | None
    block: int | None
    what: str
    expected: str
    z3: str | None


def cvc5_available() -> bool:
    try:
        import cvc5  # noqa: F401
    except ImportError:
        return False
    return True


def cvc5_answer(smt2: str, seconds: float) -> str:
    """cvc5's answer to the text's one (check-sat): sat, unsat, unknown (also past ``seconds``),
    or why the text is not one query."""
    import cvc5

    solver = cvc5.Solver(cvc5.TermManager())
    solver.setOption("tlimit-per", str(max(1, int(seconds * 1000))))
    parser = cvc5.InputParser(solver)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, smt2, "query")
    symbols, answers = parser.getSymbolManager(), []
    try:
        while not (command := parser.nextCommand()).isNull():
            out = command.invoke(solver, symbols)
            if command.getCommandName() == "check-sat":
                answers.append(out.strip())
    except RuntimeError as exc:
        return f"not a query ({str(exc).splitlines()[0][:80]})"
    return answers[0] if len(answers) == 1 else f"not one query ({len(answers)} check-sat commands)"


class Observer:
    """Sees every query a run asks: keeps it for ``--emit-smt`` and asks cvc5 for ``--cross-check``."""

    def __init__(self, emit: str | None, cross_check: str | None, seconds: float) -> None:
        if cross_check is not None and not cvc5_available():
            raise InputError(f"--cross-check {cross_check}: the cvc5 package is not installed "
                             "(pip install cvc5; in a tfcert checkout: pip install '.[cross-check]')")
        if emit is not None and Path(emit).exists() and (not Path(emit).is_dir() or any(Path(emit).iterdir())):
            raise InputError(f"--emit-smt: {emit}: exists and is not an empty folder; refusing to mix queries")
        self.emit, self.cross_check, self.seconds = emit, cross_check, seconds
        self.queries: list[tuple[Query, str]] = []
        self._cvc5: dict[str, str] = {}  # text -> answer: one query, asked by many claims, is solved once
        self._asked: dict[str, int] = {}

    def __call__(self, claim, what: str, smt2: str, answer: str) -> str | None:
        """The verifier's observer (``tfcert.verify.regions.OBSERVERS``)."""
        where = _WHERE.search(claim.where) if claim is not None else None
        stem = "query" if where is None else \
            f"phase{where[1]}-claim{where[2]}-block{claim.block}-{claim.module.KIND}"
        return self.ask(Query(stem, where and where[0], claim and claim.module.KIND, claim and claim.block,
                              what, "unsat", answer), smt2)

    def ask(self, query: Query, smt2: str) -> str | None:
        """Keep the query (``query.file`` is its name's stem) and, cross-checking, a failure
        naming both answers unless cvc5 gives z3's sat or unsat."""
        n = self._asked[query.file] = self._asked.get(query.file, 0) + 1
        self.queries.append((Query(**{**asdict(query), "file": f"{query.file}-{n}.smt2"}), smt2))
        if self.cross_check is None:
            return None
        if smt2 not in self._cvc5:
            self._cvc5[smt2] = cvc5_answer(smt2, self.seconds)
        second = self._cvc5[smt2]
        if second == query.z3 and second in ("sat", "unsat"):
            return None
        return f"cross-check: z3 says {query.z3}, cvc5 says {second}: {query.what}"

    def write(self) -> None:
        """DIR/<claim's name>.smt2 and DIR/index.json, whole or not at all (a temporary folder renamed)."""
        if self.emit is None:
            return
        target = Path(self.emit)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        try:
            tmp.mkdir(parents=True)
            for query, smt2 in self.queries:
                (tmp / query.file).write_text(smt2 if smt2.endswith("\n") else smt2 + "\n")
            index = {"format": INDEX_FORMAT, "queries": [asdict(query) for query, _ in self.queries]}
            (tmp / INDEX).write_text(json.dumps(index, indent=1, ensure_ascii=False) + "\n")
            if target.is_dir():
                target.rmdir()  # empty (checked before the run)
            os.replace(tmp, target)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise InputError(f"--emit-smt: {self.emit}: cannot write: {exc.strerror or exc}") from None


@contextmanager
def observing(emit: str | None, cross_check: str | None):
    """The verifier's region queries seen by an Observer while the block runs; the files are
    written when it ends without an error (bad input writes nothing)."""
    from tfcert.verify import regions
    from tfcert.verify.numbers import LIMITS

    observer = Observer(emit, cross_check, LIMITS.z3_seconds)
    regions.OBSERVERS[:] = [observer]
    try:
        yield observer
    finally:
        regions.OBSERVERS.clear()
    observer.write()
