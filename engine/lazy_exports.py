"""Names a package exports without importing their modules until first use (``import audiocpp.engine``
and the plugin API stay light: no torch until a weight or network class is touched)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_getattr(module: str, package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``: ``name`` is imported from ``package.where[name]`` on
    first use and kept in ``module``'s namespace."""

    def __getattr__(name: str) -> Any:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{source}"), name)
        setattr(sys.modules[module], name, value)
        return value

    return __getattr__
