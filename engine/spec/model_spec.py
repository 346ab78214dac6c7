"""Typed access to a model spec (pydantic). Validation lives in ``validate.py``.

``model_specs/schema.json`` is the one definition of what a spec may hold: building a
:class:`ModelSpec` runs it first (unless the caller already did), so the typed models accept
exactly what the schema accepts (tests/engine/test_spec_models.py checks both on one corpus).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, model_validator

OptionType = Literal[
    "bool", "int", "float", "string", "enum", "path", "audio_path",
    "string_list", "float_list", "path_list", "audio_path_list",
]
OptionScope = Literal["request", "session", "load"]

PRESETS: dict[str, tuple[str, ...]] = {
    "text_chunk_mode_full": ("word_budget", "tag_aware", "japanese", "endline"),
    "weight_type_full": ("native", "f32", "f16", "bf16", "q8_0"),
    "weight_type_codec_q8": ("native", "f32", "f16", "q8_0"),
    "weight_type_conv": ("native", "f32", "f16"),
    "perf_mode_flash_attention": ("off", "flash_attention"),
    "best_of_n_language": ("auto", "en", "ja"),
    # audiocpp addition: the torch dtype a session computes in.
    "compute_dtype": ("float32", "float32-stored", "bfloat16", "float16", "auto"),
}

#: The spellings users type for a preset's values -> the canonical value (case-insensitive).
#: The canonical ``compute_dtype`` names are torch's (``engine.nn.build.torch_dtype``).
PRESET_SPELLINGS: dict[str, dict[str, str]] = {
    "compute_dtype": {
        "float32": "float32", "fp32": "float32", "float": "float32",
        "float32-stored": "float32-stored", "fp32-stored": "float32-stored",
        "bfloat16": "bfloat16", "bf16": "bfloat16",
        "float16": "float16", "fp16": "float16", "half": "float16",
        "auto": "auto",
    },
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OptionSpec(_Model):
    name: str
    type: OptionType
    description: str
    required: bool = False
    default: Any = None
    min: int | float | None = None  # ints stay exact (a seed's 2**63 - 1 is not a float)
    max: int | float | None = None
    values: tuple[str, ...] | None = None
    preset: str | None = None
    #: The option gives reference audio for cloning (``engine.request_rules.reference_options``).
    reference: bool = False

    @property
    def allowed_values(self) -> tuple[str, ...] | None:
        if self.values is not None:
            return self.values
        if self.preset is not None:
            return PRESETS[self.preset]
        return None

    def canonical(self, value: str) -> str:
        """``value`` in the preset's canonical spelling (``bf16`` -> ``bfloat16``); else unchanged."""
        spellings = PRESET_SPELLINGS.get(self.preset or "") if self.values is None else None
        return spellings.get(value.strip().lower(), value) if spellings else value

    def aliases(self) -> tuple[str, ...]:
        """Other accepted spellings of the preset's values (``fp32``, ``bf16`` ...)."""
        spellings = PRESET_SPELLINGS.get(self.preset or "") if self.values is None else None
        return tuple(k for k, v in spellings.items() if k != v) if spellings else ()

    def show_number(self, value: float) -> str:
        """A bound as users type it: ints in full (not 9.22337e+18), floats short."""
        return str(int(value)) if self.type == "int" else f"{value:g}"

    def describe_type(self) -> str:
        allowed = self.allowed_values
        if allowed:
            return "|".join(allowed)
        if self.min is not None or self.max is not None:
            lo = "" if self.min is None else self.show_number(self.min)
            hi = "" if self.max is None else self.show_number(self.max)
            return f"{self.type} [{lo}..{hi}]"
        return self.type


class Options(_Model):
    request: tuple[OptionSpec, ...] = ()
    session: tuple[OptionSpec, ...] = ()
    load: tuple[OptionSpec, ...] = ()

    def scope(self, scope: OptionScope) -> tuple[OptionSpec, ...]:
        return getattr(self, scope)


class Download(_Model):
    kind: str
    repo: str | None = None
    revision: str | None = None
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] | None = None
    strip_prefix: str | None = None
    gated: bool | None = None
    path: str | None = None
    converter: str | None = None
    description: str | None = None
    reason: str | None = None


class Package(_Model):
    id: str
    display_name: str
    default: bool = False
    format: str
    precision: str
    target_directory: str | None = None
    files: tuple[str, ...]
    strip_prefix: str | None = None
    description: str | None = None
    download: Download | None = None


class PackageDefaults(_Model):
    download: Download | None = None


class TensorPrefix(_Model):
    source: str
    prefix: str


class Source(_Model):
    id: str | None = None
    format: str
    description: str | None = None
    roots: dict[str, str]
    files: dict[str, str] = Field(default_factory=dict)
    optional_files: dict[str, str] = Field(default_factory=dict)
    tensors: dict[str, str | TensorPrefix]
    optional_tensors: dict[str, str | TensorPrefix] = Field(default_factory=dict)

    @property
    def namespaces(self) -> list[str]:
        return list(self.tensors) + list(self.optional_tensors)


class Dependency(_Model):
    kind: str
    family: str
    scope: OptionScope
    option: str
    required: bool
    path: str | None = None
    required_when: tuple[dict[str, Any], ...] | None = None


class UI(_Model):
    recommended_package: str | None = None
    tags: tuple[str, ...] = ()
    docs: tuple[str, ...] = ()
    min_vram_gb: float | None = None
    summary: str | None = None


class Runtime(_Model):
    tags: tuple[str, ...] = ()


class Detection(_Model):
    gguf_architectures: tuple[str, ...] = ()
    gguf_metadata_keys: tuple[str, ...] = ()
    config_model_types: tuple[str, ...] = ()
    config_architectures: tuple[str, ...] = ()
    required_files: tuple[str, ...] = ()


class KeepType(_Model):
    pattern: str
    type: str


class Quantization(_Model):
    keep_types: tuple[KeepType, ...] = ()
    lookup_tables: tuple[str, ...] = ()


class ModelSpec(_Model):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    #: Where the spec was read from (its file, or a package's embedded spec): for messages.
    _origin: str = PrivateAttr(default="")

    @property
    def origin(self) -> str:
        """Where the spec comes from, for hints: its file (``.../model_specs/<family>.json``) or
        what embedded it; the family's name when built in memory."""
        return self._origin or f"of family {self.family!r}"

    @model_validator(mode="before")
    @classmethod
    def _check_schema(cls, data: Any, info: ValidationInfo) -> Any:
        """Run ``schema.json`` unless the caller did (``context={"schema_checked": True}``)."""
        if not (info.context or {}).get("schema_checked"):
            from .schema import schema_problems

            problems = schema_problems(data)
            if problems:
                raise ValueError("the spec does not match model_specs/schema.json: " + "; ".join(problems))
        return data

    schema_uri: str | None = Field(default=None, alias="$schema")
    schema_version: Literal[1]
    family: str
    display_name: str
    description: str
    category: str
    status: Literal["supported", "community", "experimental", "wip", "unsupported"]
    status_note: str | None = None
    tasks: tuple[str, ...]
    modes: tuple[str, ...]
    languages: tuple[str, ...]
    sample_rates: tuple[int, ...] = ()
    runtime: Runtime = Runtime()
    capabilities: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    options: Options
    package_defaults: PackageDefaults | None = None
    packages: tuple[Package, ...] = ()
    dependencies: tuple[Dependency, ...] = ()
    ui: UI = UI()
    sources: tuple[Source, ...]
    detection: Detection = Detection()
    quantization: Quantization = Quantization()

    @property
    def runnable(self) -> bool:
        return self.status in ("supported", "community", "experimental")

    def option(self, scope: OptionScope, name: str) -> OptionSpec | None:
        for row in self.options.scope(scope):
            if row.name == name:
                return row
        return None

    def source(self, format: str, id: str | None = None) -> Source | None:
        for src in self.sources:
            if src.format == format and (id is None or src.id == id):
                return src
        return None

    def summary(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "display_name": self.display_name,
            "status": self.status,
            "tasks": list(self.tasks),
            "modes": list(self.modes),
            "languages": list(self.languages),
            "sample_rates": list(self.sample_rates),
        }
