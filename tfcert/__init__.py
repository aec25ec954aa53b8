"""tfcert: certified exact interpolation by transformers.

One namespace over the checkout's top-level folders, mapped by pyproject.toml's
package-dir (an install, editable from a checkout, is what finds them):
``tfcert.verify`` (the independent checker), ``tfcert.construct`` (builds
models), ``tfcert.audit`` (the checker pointed at any model),
``tfcert.infoflow`` (the InfoFlow calculus); the notebook API is
``tfcert.api`` and the command line ``tfcert.cli`` (docs/architecture.md).
Importing the package loads nothing else, so importing the checker never
pulls in construction code.
"""
from __future__ import annotations


def __getattr__(name: str):
    """``tfcert.__version__``, read from the installed metadata only when asked."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("tfcert")
        except PackageNotFoundError:
            return "unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
