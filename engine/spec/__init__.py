"""Model specs: the JSON contract of each family (schema, typed access, option parsing)."""

from .model_spec import ModelSpec, OptionSpec, Source
from .options import format_options, parse_key_values, resolve_options
from .validate import builtin_spec_path, load_spec_file, load_spec_text, spec_problems, validate_spec

__all__ = [
    "ModelSpec",
    "OptionSpec",
    "Source",
    "builtin_spec_path",
    "format_options",
    "load_spec_file",
    "load_spec_text",
    "parse_key_values",
    "resolve_options",
    "spec_problems",
    "validate_spec",
]
