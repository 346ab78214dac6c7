"""Helpers of the batch tests: manifests, the CLI request an item stands for, processes left."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.support import run_cli


def write_manifest(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def summary(stdout: str) -> dict[str, str]:
    """The key=value lines the batch prints at the end."""
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


def cli_args(item: dict[str, Any], base: Path, defaults: dict[str, Any]) -> list[str]:
    """The `audiocpp` flags of the same request as manifest ``item`` (paths relative to ``base``)."""
    merged = {**defaults, **{k: v for k, v in item.items() if k != "options"}}
    options = {**defaults.get("options", {}), **item.get("options", {})}
    args = ["--task", merged.get("task", "tts"), "--text", merged["text"]]
    for field, flag in (("reference_text", "--reference-text"), ("instruct", "--instruct"),
                        ("language", "--language"), ("seed", "--seed")):
        if merged.get(field) is not None:
            args += [flag, str(merged[field])]
    if merged.get("voice_ref"):
        args += ["--voice-ref", str(base / merged["voice_ref"])]
    for key, value in options.items():
        args += ["--request-option", f"{key}={value}"]
    return args


def cli_output(item: dict[str, Any], base: Path, defaults: dict[str, Any], model_args: list[str],
               out: Path, env: dict[str, str] | None = None) -> Path:
    """Run `audiocpp` for ``item`` into ``out``; assert it succeeded."""
    proc = run_cli(*model_args, *cli_args(item, base, defaults), "--out", out, env=env)
    assert proc.returncode == 0, proc.stderr
    return out


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def ray_processes() -> set[int]:
    """Processes of a Ray instance (GCS, raylet, workers) running on this machine."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and ("gcs_server" in cmdline or "raylet" in cmdline or cmdline.startswith("ray::")
                             or "ray/_private/workers/default_worker.py" in cmdline):
            found.add(int(entry.name))
    return found
