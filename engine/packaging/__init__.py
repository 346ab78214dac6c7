"""The package writer: spec-driven GGUF packages in audio.cpp's layout.

``plan_from_spec(spec, inputs)`` (or a family's ``package_plan``) gathers namespaces of
tensors and sidecar files; ``write_package(plan, out, type)`` applies the quantization
policy and streams the GGUF. ``audiocpp package`` is the command-line front end.
"""

from .plan import MODEL_INPUT, PackagePlan, package_files, package_namespaces, plan_from_spec, validate_plan
from .policy import WRITE_TYPES, Decision, KeepRule, QuantizationPolicy, parse_keep_type, parse_weight_type
from .writer import PackageSummary, write_package

__all__ = [
    "MODEL_INPUT",
    "WRITE_TYPES",
    "Decision",
    "KeepRule",
    "PackagePlan",
    "PackageSummary",
    "QuantizationPolicy",
    "package_files",
    "package_namespaces",
    "parse_keep_type",
    "parse_weight_type",
    "plan_from_spec",
    "validate_plan",
    "write_package",
]
