"""tfcert: certified exact interpolation by transformers.

The package is a namespace over the top-level folders: ``tfcert.construct``
(builds models), ``tfcert.verify`` (the independent checker), ``tfcert.audit``
(the checker pointed at any model) and ``tfcert.infoflow`` (the InfoFlow
calculus). Importing it loads nothing else, so importing the checker never
pulls in construction code.

For notebooks the three subpackages are also callable, mirroring the CLI
(``tfcert.construct(dataset)``, ``tfcert.verify(bundle)``,
``tfcert.audit(model, dataset)``; see ``tfcert.api``). A subpackage and a
function cannot share a name on one module, so the subpackage itself is
made callable when it is imported, and the call goes to ``tfcert.api``.
"""
from __future__ import annotations

import os
import sys
import types

CALLABLE = ("construct", "verify", "audit")


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from tfcert import api

        return getattr(api, self.__name__.rsplit(".", 1)[1])(*args, **kwargs)


class _Root(types.ModuleType):
    def __setattr__(self, name: str, value) -> None:
        if name in CALLABLE and type(value) is types.ModuleType:
            value.__class__ = _CallablePackage  # set as the import system binds the subpackage
        super().__setattr__(name, value)


def __getattr__(name: str):
    if name in CALLABLE:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("tfcert")
        except PackageNotFoundError:
            return "unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _checkout_subpackages() -> None:
    """In a source checkout the subpackages sit beside this folder
    (construct/, verify/, …; pyproject.toml's package-dir maps them into
    the package when it is installed). Run from the checkout's root, Python
    finds this folder before the installed package; let it find the
    subpackages beside it too."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(root, "pyproject.toml")) and os.path.isfile(os.path.join(root, "verify", "check.py")):
        __path__.append(root)


_checkout_subpackages()
sys.modules[__name__].__class__ = _Root
