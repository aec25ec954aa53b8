"""``pytest --tfcert DIR``: every bundle under DIR becomes a test item that
verifies it; a failing claim is reported by name, file and JSON path.

Registered through the ``pytest11`` entry point, so installing tfcert is
enough. DIR may be given several times; bundles are folders holding
dataset.json, model.json and certificate.json, as ``tfcert construct``
writes them.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tfcert.errors import InputError

SLOTS = ("model", "dataset", "certificate")


def pytest_addoption(parser) -> None:
    group = parser.getgroup("tfcert", "tfcert certificate bundles")
    group.addoption("--tfcert", action="append", default=[], metavar="DIR",
                    help="verify every tfcert bundle under DIR as a test item (may be repeated)")


def pytest_configure(config) -> None:
    """Collect the --tfcert folders as well as the usual test paths: the
    bundles ``tfcert check`` finds there (tfcert.files.find_bundles), every
    folder on the way to one collected whatever pytest's norecursedirs say."""
    roots = [Path(d).resolve() for d in config.getoption("tfcert")]
    if not roots:
        return
    from tfcert.files import find_bundles  # the checker loads only when bundles are asked for

    bundles: set[Path] = set()
    for root in roots:
        try:
            bundles.update(find_bundles(root))
        except InputError as exc:
            raise pytest.UsageError(f"--tfcert {exc}") from None
    # compared resolved: a bundle reached through a symlinked folder is the folder it points to
    config._tfcert_bundles = {b.resolve() for b in bundles}
    config._tfcert_keep = {p.resolve() for b in bundles for p in (b, *b.parents)
                           if any(p == root or root in p.parents for root in roots)}
    given = [Path(a.split("::")[0]).resolve() for a in config.args]
    for root in roots:
        if not any(root == g or g in root.parents for g in given):
            config.args.append(str(root))


@pytest.hookimpl(tryfirst=True)
def pytest_ignore_collect(collection_path: Path, config):
    """A folder on the way to a bundle is walked even if norecursedirs names it (build, dist, …)."""
    keep = getattr(config, "_tfcert_keep", ())
    return False if keep and collection_path.resolve() in keep else None


def pytest_collect_file(file_path: Path, parent):
    bundles = getattr(parent.config, "_tfcert_bundles", ())
    if bundles and file_path.name == "certificate.json" and file_path.parent.resolve() in bundles:
        return BundleFile.from_parent(parent, path=file_path)
    return None


class BundleFile(pytest.File):
    def collect(self):
        yield BundleItem.from_parent(self, name="bundle " + self.path.parent.name)


class ClaimsFailed(Exception):
    """Some claims of a bundle do not hold."""


class BundleItem(pytest.Item):
    def runtest(self) -> None:
        from tfcert.files import load
        from tfcert.verify.check import check_certificate

        folder = self.path.parent
        docs = [load(folder / f"{slot}.json", slot) for slot in SLOTS]
        report = check_certificate(*docs)
        if not report.ok:
            raise ClaimsFailed([r for r in report.results if not r.ok], len(report.results))

    def repr_failure(self, excinfo, style=None) -> str:
        if isinstance(excinfo.value, ClaimsFailed):
            failed, total = excinfo.value.args
            lines = [f"{len(failed)} of {total} claims fail in {self.path.parent}:"]
            for r in failed:
                name = f"{r.phase}/{r.kind}" + ("" if r.block is None else f"/block {r.block}")
                lines += [f"  {name} ({r.where}): {failure}" for failure in r.failures]
            return "\n".join(lines)
        if isinstance(excinfo.value, InputError):
            return f"error: {excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path.parent, None, f"tfcert bundle {self.path.parent}"


