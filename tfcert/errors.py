"""The bad-input exception, defined in the checker (``tfcert.verify.errors``)
and re-exported here for everything outside it; and the hint that a message
of a refusal by a raisable limit gets outside the checker."""
import re

from tfcert.verify.errors import InputError

__all__ = ["InputError", "with_limit_hint"]

# The checker's refusals by a limit that --limit raises, as it words them (verify/formats.py,
# verify/numbers.py): "larger than the limit file_bytes=N", "N input tokens, over the limit
# tokens=N", "number too large (N characters, limit digits=N)".
_RAISABLE = re.compile(r"(?:larger than the limit |over the limit |, limit )(file_bytes|tokens|digits)=(\d+)\)?$")

# construct/bundle.py wraps such a refusal of the bundle it built: "… (REFUSAL); raise it with --limit".
_WRAPPED = re.compile(r"limit (file_bytes|tokens|digits)=(\d+)\)?\); raise it with (--limit)$")


def with_limit_hint(message: str, library: bool = False) -> str:
    """``message`` with how to raise the limit that refused the input appended
    (``; raise it with --limit tokens=N``, or from Python ``...LIMITS.tokens = N``);
    other messages unchanged. The digits of a dataset or of --temperature are the
    format's (4000), not the limit: no hint for them."""
    from tfcert.verify.numbers import LIMITS

    wrapped = _WRAPPED.search(message)
    if wrapped:  # the construction's own bundle past a limit: its hint names the option, not the limit
        return f"{message[:wrapped.start(3)]}{_how(wrapped.group(1), library)}"
    match = _RAISABLE.search(message)
    if match is None or "; raise it with" in message:
        return message
    name = match.group(1)
    if int(match.group(2)) != getattr(LIMITS, name) or (name == "digits" and ": $.pairs" in message):
        return message
    return f"{message}; raise it with {_how(name, library)}"


def _how(name: str, library: bool) -> str:
    return f"tfcert.verify.numbers.LIMITS.{name} = N" if library else f"--limit {name}=N"
