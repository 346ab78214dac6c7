"""audiocpp: today's open text-to-speech models behind one engine, one CLI and one package format.

The subpackages map the repository's top-level folders (``setup.py``): ``audiocpp.engine``,
``audiocpp.families``, ``audiocpp.cli``, ``audiocpp.server``, ``audiocpp.batch``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("audiocpp")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
