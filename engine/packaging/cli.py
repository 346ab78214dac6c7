"""``audiocpp package``: parse the command line, pick the spec and family, plan, write, report."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import UsageError
from ..plugin import FamilyPlugin
from ..progress import Progress
from ..spec.model_spec import ModelSpec
from .plan import MODEL_INPUT, PackagePlan, plan_from_spec
from .policy import parse_keep_type, parse_weight_type
from .writer import PackageSummary, write_package

_NS_INPUT = re.compile(r"^(?P<ns>[A-Za-z_][A-Za-z0-9_.-]*)=(?P<path>.+)$")


def parse_inputs(items: list[str]) -> dict[str, Path]:
    """``ns=PATH`` items and at most one bare model folder/file (key ``""``)."""
    if not items:
        raise UsageError("no --input given", hint="pass --input MODEL_FOLDER or --input NS=PATH (repeatable)")
    out: dict[str, Path] = {}
    for item in items:
        match = _NS_INPUT.match(item)
        if match and not Path(item).exists():
            key, path = match["ns"], Path(match["path"])
        else:
            key, path = MODEL_INPUT, Path(item)
        if key in out:
            what = "more than one model folder/file" if key == MODEL_INPUT else f"namespace {key!r} twice"
            raise UsageError(f"--input gives {what}",
                             hint="give each namespace once, and at most one bare path")
        out[key] = path
    return out


def _plugin(name: str) -> FamilyPlugin | None:
    from ..registry import families

    return families().get(name)


def _spec_text(plugin: FamilyPlugin) -> str | None:
    from ..spec.validate import builtin_spec_path

    path = Path(plugin.spec_file) if plugin.spec_file is not None else builtin_spec_path(plugin.name)
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def resolve_spec(inputs: dict[str, Path], spec_path: Path | None, family: str | None
                 ) -> tuple[ModelSpec, str | None, FamilyPlugin | None]:
    """(spec, its JSON text, the installed plugin of its family or None)."""
    from ..registry import detect_family, get_family
    from ..spec.validate import load_spec_file

    if spec_path is not None:
        spec = load_spec_file(spec_path, check_name=False)
        if family is not None and family != spec.family:
            raise UsageError(f"--family {family} disagrees with the spec's family {spec.family!r}",
                             hint="drop --family, or pass that family's spec")
        return spec, spec_path.read_text(encoding="utf-8"), _plugin(spec.family)
    if family is not None:
        plugin = get_family(family)
        return plugin.spec, _spec_text(plugin), plugin
    probe = inputs.get(MODEL_INPUT) or next(iter(inputs.values()))
    if not probe.exists():
        raise UsageError(f"input {str(probe)!r} does not exist", hint="check the --input path")
    embedded = _embedded_spec(probe)
    if embedded is not None and _plugin(embedded[0].family) is None:
        return embedded[0], embedded[1], None  # a package of a family not installed here
    plugin = detect_family(probe)
    return plugin.spec, _spec_text(plugin), plugin


def _embedded_spec(path: Path) -> tuple[ModelSpec, str] | None:
    """The spec a package GGUF embeds, if ``path`` is one."""
    from ..spec.validate import load_spec_text
    from ..weights.gguf_file import GGUFFile, is_gguf

    if not is_gguf(path):
        return None
    text = GGUFFile(path).metadata.get("audiocpp.model_spec.json")
    if not isinstance(text, str):
        return None
    return load_spec_text(text, origin=f"embedded in {path}"), text


def _overrides_package_plan(plugin: FamilyPlugin) -> bool:
    return type(plugin).package_plan is not FamilyPlugin.package_plan


def build_plan(inputs: dict[str, Path], spec: ModelSpec, spec_json: str | None,
               plugin: FamilyPlugin | None, spec_given: bool) -> PackagePlan:
    if plugin is not None and _overrides_package_plan(plugin):
        plan = plugin.package_plan(inputs)
        if spec_given or plan.spec is None:
            plan.spec, plan.spec_json, plan.family = spec, spec_json, spec.family
        elif plan.spec_json is None and plan.spec.model_dump() == spec.model_dump():  # origins may differ
            plan.spec_json = spec_json
        return plan
    return plan_from_spec(spec, inputs, spec_json=spec_json)


def _record_distribution(plan: PackagePlan, plugin: FamilyPlugin | None) -> None:
    """A third-party family's package names the distribution that provides the family, so that
    where it is not installed the engine can say what to ``pip install``."""
    from ..registry import DISTRIBUTION_KEY, distribution

    dist = distribution(plugin.name) if plugin is not None else None
    if dist is not None and dist.lower() != "audiocpp" and plan.family == plugin.name:
        plan.metadata.setdefault(DISTRIBUTION_KEY, dist)


def package_from_cli(*, out: Path, inputs: list[str], spec: Path | None, family: str | None,
                     weight_type: str, keep_types: list[str], overwrite: bool) -> PackageSummary:
    """The ``audiocpp package`` command: every check runs before the output is created."""
    wtype = parse_weight_type(weight_type)
    rules = tuple(parse_keep_type(k) for k in keep_types)
    out = Path(out).expanduser()
    if out.exists() and not overwrite:
        raise UsageError(f"{out} already exists", hint="pass --overwrite to replace it")
    parsed = parse_inputs(inputs)
    model_spec, spec_json, plugin = resolve_spec(parsed, spec, family)
    plan = build_plan(parsed, model_spec, spec_json, plugin, spec_given=spec is not None)
    _record_distribution(plan, plugin)
    summary = write_package(plan, out, wtype, rules, overwrite=overwrite, progress=Progress())
    print(summary.format())
    note = demo_note(parsed)
    if note:
        print(note)
    return summary


def demo_note(inputs: dict[str, Path]) -> str | None:
    """The caveat for packaging a demo checkpoint (a folder with a ``demo.json``, like the one
    ``audiocpp --family omnivoice`` builds): random weights, so quantization changes everything."""
    for path in inputs.values():
        folder = path if path.is_dir() else path.parent
        if (folder / "demo.json").is_file():
            return (f"note: {folder} is a demo checkpoint with random weights: its audio is not speech, "
                    "and a package of it in another type (q8_0, q4_0, bf16) can sound completely different "
                    "from the folder (audio cosine about 0.3 for q8_0). That is expected: with random "
                    "weights the small rounding of quantization flips token choices, and each flip changes "
                    "all later steps. Judge quantized packages on a real checkpoint.")
    return None
