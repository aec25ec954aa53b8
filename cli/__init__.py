"""tfcert: certified exact interpolation by transformers.

The package is a namespace over the top-level folders: ``tfcert.construct``
(builds models), ``tfcert.verify`` (the independent checker), ``tfcert.audit``
(the checker pointed at any model) and ``tfcert.infoflow`` (the InfoFlow
calculus). This module stays empty so that importing the checker never pulls
in construction code.
"""

__version__ = "0.1.0"
