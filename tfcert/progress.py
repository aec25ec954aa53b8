"""Progress bars for long stages, drawn by tqdm on stderr.

One mechanism for every command: a stage gets a ``Bar``, a callback
``bar(done, total, label=None)`` that the library calls as it works. Bars
are off when stderr is not a terminal (CI logs, pipes) or after
``set_quiet(True)`` (``--quiet``), so stdout and captured stderr never see
them.
"""
from __future__ import annotations

import sys

_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def quiet() -> bool:
    """Whether --quiet was given (progress lines that are not bars honour it too)."""
    return _quiet


def enabled() -> bool:
    return not _quiet and sys.stderr.isatty()


class Bar:
    """A tqdm bar created on first use; ``total=None`` counts without an end
    (a search whose length is not known in advance)."""

    def __init__(self, desc: str, unit: str = "block"):
        self.desc, self.unit = desc, unit
        self._bar = None

    def layout(self, total: int | None) -> str:
        """Count and elapsed time; a bar when the end is known. No rate: the
        steps of one bar (blocks, replays) differ too much in cost for one."""
        return "{desc} {n_fmt} [{elapsed}]" if total is None else "{desc} {bar} {n_fmt}/{total_fmt} [{elapsed}]"

    def __call__(self, done: int, total: int | None, label: str | None = None) -> None:
        if not enabled():
            return
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

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Status(Bar):
    """A long job that reports in lines (training: "step 300/2000 loss …"):
    on a terminal the latest line is redrawn in place with the elapsed time."""

    def layout(self, total: int | None) -> str:
        return "{desc} [{elapsed}]"

    def line(self, text: str) -> None:
        self(0, None, text)
