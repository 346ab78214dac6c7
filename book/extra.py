"""The ``book`` extra: the packages ``audiocpp book`` needs beyond the engine's."""

from __future__ import annotations

import importlib.util

from audiocpp.engine.errors import UsageError

#: import name -> the package that provides it (the ``book`` extra)
EXTRA = {"lxml": "lxml", "markdown_it": "markdown-it-py", "scipy": "scipy", "pyloudnorm": "pyloudnorm"}


def need_extra() -> None:
    """A UsageError naming the ``book`` extra when one of its packages is missing."""
    missing = [package for name, package in EXTRA.items() if importlib.util.find_spec(name) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise UsageError(f"`audiocpp book` needs {', '.join(missing)}, which {verb} not installed",
                         hint="install the extra: pip install 'audiocpp[book]'")
