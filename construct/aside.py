"""The float analyses a construction states its ``float`` claims from
(bundle.build): one per format, fed the verifier's own replay. On a large
dataset the analyses but binary64's run in a second process (``Aside``),
beside the verification, so that a construction's wall time is not the sum of
four analyses: ``python -m tfcert.construct.aside JOB`` reads the pickled job
(the model, the dataset, the formats and the LIMITS in force) and prints each
analysis's failure and bound, pickled. It imports the checker only.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass, fields

from flint import fmpq

from tfcert.verify.check import follow
from tfcert.verify.evaluate import Replay
from tfcert.verify.float_analysis import Analysis
from tfcert.verify.floats import FORMATS, Format
from tfcert.verify.formats import Dataset, Model
from tfcert.verify.numbers import LIMITS

ASIDE_TOKENS = 4096  # from this many input tokens bundle.build runs the analyses but binary64's aside


def float_analyses(model: Model, dataset: Dataset, formats: tuple[str, ...] = tuple(FORMATS)) -> list[Analysis]:
    """One float analysis per format (of ``formats``), to be fed the verifier's
    own replay of the model (bundle.build): each that stays useful — no error
    bound ever above 1 + max|y|, beyond which a float run may land anywhere
    among the targets — gives a ``float`` claim."""
    inputs = [p.input for p in dataset.pairs]
    useful = 1 + max(abs(v) for p in dataset.pairs for y in p.output for v in y)
    return [Analysis(model, inputs, FORMATS[name], give_up_above=useful) for name in formats]


@dataclass(frozen=True)
class Finished:
    """A float analysis that ran in the other process, as its finish() left it."""
    fmt: Format
    bound: fmpq | None
    failure: str | None

    def finish(self) -> None:
        pass


def run(model: Model, dataset: Dataset, formats: tuple[str, ...]) -> list[Analysis]:
    """The analyses of ``formats``, finished, on a replay of their own:
    ``Replay(model, inputs)``, the one the verifier's observers follow (at the
    model's temperature), to its end or until each has failed. Where that
    replay stops (ArithmeticError: a limit) each fails, as the verification
    beside them fails there."""
    analyses = float_analyses(model, dataset, formats)
    try:
        for step in Replay(model, [p.input for p in dataset.pairs]).steps():
            if all(a.failure is not None for a in analyses):
                break  # nothing is left to prove
            follow(analyses, step)
    except ArithmeticError as exc:
        for analysis in analyses:
            analysis.failure = analysis.failure or f"not checked: the replay stopped: {exc}"
    for analysis in analyses:
        analysis.finish()
    return analyses


class Aside:
    """``run`` in a process of its own (``python -m tfcert.construct.aside``,
    the job in a temporary file), started at once; ``join`` waits and returns
    what each analysis's finish() left: its bound or its failure, the same as
    in one process."""

    def __init__(self, model: Model, dataset: Dataset, formats: tuple[str, ...]):
        self.formats = formats
        limits = {f.name: getattr(LIMITS, f.name) for f in fields(LIMITS)}
        handle, self.job = tempfile.mkstemp(prefix="tfcert-aside-", suffix=".pickle")
        with os.fdopen(handle, "wb") as out:
            pickle.dump((model, dataset, formats, limits), out, protocol=pickle.HIGHEST_PROTOCOL)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # tfcert as this process finds it
        self.process = subprocess.Popen([sys.executable, "-m", "tfcert.construct.aside", self.job],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env)

    def join(self) -> list[Finished]:
        answer, _ = self.process.communicate()
        if self.process.returncode != 0:
            raise RuntimeError(f"the float analyses' process failed (exit code {self.process.returncode})")
        return [Finished(FORMATS[name], bound, failure)
                for name, (failure, bound) in zip(self.formats, pickle.loads(answer))]

    def stop(self) -> None:
        """End the process if it still runs (the caller failed or was interrupted) and remove the job."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        os.unlink(self.job)


def main(job: str) -> int:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the caller's to handle: it ends this process
    with open(job, "rb") as handle:
        model, dataset, formats, limits = pickle.load(handle)
    for name, value in limits.items():
        setattr(LIMITS, name, value)
    answer = pickle.dumps([(a.failure, a.bound) for a in run(model, dataset, formats)])
    sys.stdout.buffer.write(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
