"""Progress of long stages on stderr.

One mechanism for every command: a stage gets a ``Bar``, a callback
``bar(done, total, label=None)`` that the library calls as it works; the
label names the phase, ``done``/``total`` count its work (blocks, phases).
On a terminal tqdm draws it as a bar. Anywhere else (CI logs, pipes) a run
that lasts longer than the interval prints a line every interval seconds
(``TFCERT_PROGRESS_INTERVAL``, default 5) with the phase, the count and the
elapsed time, so a log shows life; shorter runs print nothing.
``set_quiet(True)`` (``--quiet``) turns both off. Only stderr is written:
stdout stays the command's (``--json``)."""
from __future__ import annotations

import os
import sys
import threading
import time

INTERVAL = 5.0  # seconds between lines when stderr is not a terminal
_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def quiet() -> bool:
    """Whether --quiet was given (progress lines that are not bars honour it too)."""
    return _quiet


def enabled() -> bool:
    """Whether bars are drawn: stderr is a terminal and --quiet was not given."""
    return not _quiet and sys.stderr.isatty()


def interval() -> float:
    """Seconds between progress lines off a terminal: TFCERT_PROGRESS_INTERVAL, else INTERVAL."""
    try:
        value = float(os.environ.get("TFCERT_PROGRESS_INTERVAL", INTERVAL))
    except ValueError:
        return INTERVAL
    return value if 0 < value < float("inf") else INTERVAL


class Bar:
    """A tqdm bar created on first use; ``total=None`` counts without an end
    (a search whose length is not known in advance). Off a terminal, a
    thread prints the latest state every ``interval()`` seconds."""

    def __init__(self, desc: str, unit: str = "block"):
        self.desc, self.unit = desc, unit
        self._bar = None
        self._state: tuple[int, int | None, str | None] | None = None
        self._start = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def layout(self, total: int | None) -> str:
        """Count and elapsed time; a bar when the end is known. No rate: the
        steps of one bar (blocks, replays) differ too much in cost for one."""
        return "{desc} {n_fmt} [{elapsed}]" if total is None else "{desc} {bar} {n_fmt}/{total_fmt} [{elapsed}]"

    def __call__(self, done: int, total: int | None, label: str | None = None) -> None:
        if _quiet:
            return
        with self._lock:
            self._state = (done, total, label if label is not None else self._state and self._state[2])
            if sys.stderr.isatty():
                self._draw(done, total, label)
            elif self._ticker is None:
                self._start = time.monotonic()
                self._ticker = threading.Thread(target=self._tick, args=(interval(),), daemon=True)
                self._ticker.start()

    def _draw(self, done: int, total: int | None, label: str | None) -> None:
        from tqdm import tqdm

        if self._bar is None:
            self._bar = tqdm(total=total, desc=self.desc, unit=self.unit, file=sys.stderr, leave=False,
                             dynamic_ncols=True, bar_format=self.layout(total))
        if self._bar.total != total:
            self._bar.reset(total=total)
            self._bar.bar_format = self.layout(total)
        if label is not None:
            self._bar.set_description_str(f"{self.desc}: {label}", refresh=False)
        self._bar.n = done
        self._bar.refresh()

    def report(self) -> str:
        """The latest state as one log line: stage, phase, count, elapsed seconds."""
        done, total, label = self._state
        count = f" {done}/{total}" if total is not None else "" if label else f" {done}"
        return f"{self.desc}: {label or ''}{count} [{time.monotonic() - self._start:.0f}s]"

    def _tick(self, seconds: float) -> None:
        while not self._stop.wait(seconds):
            with self._lock:
                print(self.report(), file=sys.stderr, flush=True)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Replay:
    """A verification's progress as a ``Bar`` hears it: verify calls it with
    the replay's blocks; passed among verify's observers too, it sees the
    second replay that a softmax certificate's float claims take, then the
    claims checked at the end. ``phase`` prefixes its labels. Its
    ``failure`` is set, so verify never replays on its account alone."""

    failure = "an observer of progress, not a float analysis"

    def __init__(self, progress, phase: str = ""):
        self.progress, self.phase = progress, phase
        self.blocks: int | None = None

    def __call__(self, done: int, total: int) -> None:
        self.progress(done, total, f"{self.phase}replay, block")
        if done == total:
            self.blocks = total
            self.progress(0, 1, f"{self.phase}float bounds and the claims on the outputs")

    def step(self, step) -> None:
        if self.blocks is not None and step.layer == "sa":
            self.progress(step.block + 1, self.blocks, f"{self.phase}float replay at the model's temperature, block")
            if step.block + 1 == self.blocks:
                self.progress(0, 1, f"{self.phase}the claims on the outputs")


class Status(Bar):
    """A long job that reports in lines (training: "step 300/2000 loss …"):
    on a terminal the latest line is redrawn in place with the elapsed time."""

    def layout(self, total: int | None) -> str:
        return "{desc} [{elapsed}]"

    def line(self, text: str) -> None:
        self(0, None, text)
