"""The bad-input exception, defined in the checker (``tfcert.verify.errors``)
and re-exported here for everything outside it."""
from tfcert.verify.errors import InputError

__all__ = ["InputError"]
