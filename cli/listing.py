"""Printing for `audiocpp families` and `audiocpp inspect`."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from audiocpp.engine.tasks import Task


def print_families(as_json: bool) -> None:
    from audiocpp.engine.device import cpu_auto_mode_name
    from audiocpp.engine.registry import broken_families, families, origin

    rows = []
    for name, plugin in sorted(families().items()):
        spec = plugin.spec
        rows.append({
            "family": name,
            "display_name": spec.display_name,
            "status": spec.status,
            "status_note": spec.status_note,
            "tasks": [Task(t).cli_name for t in spec.tasks],
            "modes": list(spec.modes),
            "languages": list(spec.languages),
            "sample_rates": list(spec.sample_rates),
            "origin": origin(name),
        })
    broken = [asdict(b) for b in broken_families()]
    cpu = _cpu_defaults()
    for r in rows:
        plugin = families()[r["family"]]
        r["max_batch_cpu"] = plugin.default_max_batch("cpu")
        r["compute_dtype_auto_cpu_q8_0"] = cpu_auto_mode_name(
            "Q8_0", bf16_for_quantized=getattr(plugin, "cpu_bf16_for_quantized", True))
    if as_json:
        print(json.dumps({"families": rows, "broken": broken, "cpu": cpu}, indent=2))
        return
    header = ("family", "status", "tasks", "modes", "languages", "rate (Hz)", "from")
    table = [header]
    for r in rows:
        langs = r["languages"]
        lang_text = ",".join(langs) if len(langs) <= 4 else f"{len(langs)} ({','.join(langs[:3])},...)"
        table.append((
            r["family"], r["status"], ",".join(r["tasks"]), ",".join(r["modes"]), lang_text,
            ",".join(str(s) for s in r["sample_rates"]), r["origin"],
        ))
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())
    for r in rows:
        if r["status"] in ("wip", "unsupported") and r["status_note"]:
            print(f"note: {r['family']}: {r['status_note']}")
    for b in broken:
        print(f"broken: {b['name']} ({b['target']}): {b['error']}")
    modes = cpu["compute_dtype_auto"]
    batch = ", ".join(f"{r['family']} {r['max_batch_cpu']}" for r in rows)
    own = [f"{r['family']} {r['compute_dtype_auto_cpu_q8_0']}" for r in rows
           if r["compute_dtype_auto_cpu_q8_0"] != modes["Q8_0"]]
    print(f"on this CPU ({cpu['describe']}): compute_dtype=auto is {modes['F32']} for F32 weights and "
          f"snapshot folders, {modes['BF16']} for BF16/F16 packages, {modes['Q8_0']} for Q8_0/Q4_0 "
          f"packages{' (' + ', '.join(own) + ')' if own else ''}; batches of up to: {batch}")


def _cpu_defaults() -> dict:
    """What ``auto`` computes in on this CPU per weight type, and the CPU's line (no torch import)."""
    from audiocpp.engine.device import cpu_auto_mode_name
    from audiocpp.engine.nn.kernels import cpu_isa

    return {"describe": cpu_isa.describe(), "level": cpu_isa.level(), "native_bf16": cpu_isa.native_bf16(),
            "compute_dtype_auto": {stored: cpu_auto_mode_name(stored) for stored in ("F32", "BF16", "Q8_0")}}


def _cli_summary(summary) -> dict:  # noqa: ANN001
    """A spec summary with tasks in the CLI's words (``clon``), as ``families`` prints them."""
    out = dict(summary)
    if "tasks" in out:
        out["tasks"] = [Task(t).cli_name for t in out["tasks"]]
    return out


def print_inspection(path: Path, family: str | None, as_json: bool) -> None:
    from audiocpp.engine.errors import ModelError
    from audiocpp.engine.inspect import embedded_spec, inspect_path
    from audiocpp.engine.registry import resolve_family

    try:
        info = resolve_family(path, family).inspect(path)
    except ModelError:
        # A package of a family that is not installed still describes itself.
        from audiocpp.engine.weights import open_weights

        if family is not None or not Path(path).is_file():
            raise
        spec = embedded_spec(open_weights(path))
        if spec is None:
            raise
        info = inspect_path(path, spec.family, spec)
    data = {
        "family": info.family,
        "path": str(info.path),
        "format": info.format,
        "spec": _cli_summary(info.spec_summary),
        "num_tensors": info.num_tensors,
        "namespaces": info.namespaces,
        "dtypes": info.dtype_counts,
        "embedded_files": info.embedded_files,
        "metadata": info.metadata,
    }
    if as_json:
        print(json.dumps(data, indent=2, default=str))
        return
    print(f"path:        {data['path']}")
    print(f"family:      {data['family']}")
    print(f"format:      {data['format']}")
    spec = data["spec"]
    if spec:
        print(f"spec:        {spec.get('display_name')} status={spec.get('status')} "
              f"tasks={','.join(spec.get('tasks', []))} modes={','.join(spec.get('modes', []))}")
    print(f"tensors:     {data['num_tensors']}")
    if data["namespaces"]:
        print("namespaces:  " + ", ".join(f"{ns} ({n})" for ns, n in data["namespaces"].items()))
    print("dtypes:      " + ", ".join(f"{dt} x{n}" for dt, n in sorted(data["dtypes"].items())))
    if data["embedded_files"]:
        print("files:       " + ", ".join(data["embedded_files"]))
    for key, value in data["metadata"].items():
        print(f"meta:        {key} = {value}")


def print_voices(model: str | None, family: str | None, as_json: bool) -> None:
    """`audiocpp voices`: the named voices of a model (the default model when none is named)."""
    import sys

    from audiocpp.engine.loader import ModelRef, load_planned, plan_load

    plan = plan_load(ModelRef(model, family))
    if plan.note:
        print(f"note: {plan.note}", file=sys.stderr)
    loaded = load_planned(plan)
    voices = loaded.named_voices()
    default = loaded.default_voice() if voices else None
    if as_json:
        body = {"family": plan.family, "model": str(plan.path), "default": default, "voices": voices}
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return
    if not voices:
        print(f"{plan.family} has no named voices: it speaks in the voice of a reference (--task clon "
              "--voice-ref FILE) or designs one (--task design --instruct ...)")
        return
    width = max(len(v["name"]) for v in voices)
    print(f"{'voice':<{width}}  language                 gender")
    for v in voices:
        lang = f"{v.get('language') or '?'} ({v.get('language_name') or 'unknown'})"
        mark = "  (default)" if v["name"] == default else ""
        print(f"{v['name']:<{width}}  {lang:<24} {v.get('gender') or '?'}{mark}")
    print("mix voices as --voice 'a(2)+b(1)' (weights normalised); the server's \"voice\" field takes "
          "the same")
