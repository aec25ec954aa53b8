"""The one exception type for bad input: the CLI prints it as a single
``error: …`` line and exits 2, never with a traceback. It lives in the
checker, which must not reach outside ``verify/``."""


class InputError(Exception):
    """Bad input or usage: the message names the file and the JSON path."""
