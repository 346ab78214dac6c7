"""Maps the repository's top-level folders into the ``audiocpp`` namespace.

``engine/`` becomes ``audiocpp.engine``, ``families/`` becomes ``audiocpp.families`` and
``model_specs/`` (JSON only) becomes ``audiocpp.model_specs``; ``server/`` and ``batch/``
(the HTTP server and batch jobs, layers over the public API that the engine never imports)
become ``audiocpp.server`` and ``audiocpp.batch``. Every sub-package is found automatically so
a new family folder needs no packaging change. ``audiocpp/`` holds only the top package's
``__init__.py`` (``audiocpp.__version__``).
"""

from setuptools import find_packages, setup

ROOTS = ("engine", "families", "model_specs", "cli", "server", "batch", "book")

packages: list[str] = ["audiocpp"]  # audiocpp/__init__.py: the version
package_dir: dict[str, str] = {"audiocpp": "audiocpp"}
for root in ROOTS:
    package_dir[f"audiocpp.{root}"] = root
    packages.append(f"audiocpp.{root}")
    for sub in find_packages(where=root):
        packages.append(f"audiocpp.{root}.{sub}")

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={"audiocpp.model_specs": ["*.json"], "audiocpp.families": ["*/data/*"]},
    include_package_data=True,
)
