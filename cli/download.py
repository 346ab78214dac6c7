"""``audiocpp download NAME`` and ``audiocpp download --list``: the CLI face of ``engine.hub``."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from audiocpp.engine.errors import UsageError
from audiocpp.engine.hub import PackageRow, download, human_size, list_packages


def format_package_list(rows: list[PackageRow]) -> str:
    header = ("package", "family", "size", "cached", "source")
    table = [header] + [(r.id, r.family,
                         (human_size(r.size_bytes) if r.size_bytes is not None
                          else "?" if r.downloadable else "-"),
                         ("yes" if r.cached else "no") if r.downloadable else "-", r.source)
                        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in table)


def download_from_cli(name: str | None, *, list_: bool, as_json: bool, family: str | None,
                      revision: str | None, cache_dir: Path | None, progress: bool | None) -> None:
    """``audiocpp download NAME`` / ``audiocpp download --list``."""
    if list_:
        if name is not None or revision is not None:
            raise UsageError("--list takes no NAME or --revision")
        rows = list_packages(cache_dir)
        print(json.dumps([asdict(r) for r in rows], indent=2) if as_json else format_package_list(rows))
        return
    if name is None:
        raise UsageError("no model name",
                         hint="audiocpp download org/name (a Hugging Face repo id) or a package "
                         "id from `audiocpp download --list`")
    snap = download(name, family=family, revision=revision, cache_dir=cache_dir, progress=progress)
    fields = {"repo": snap.repo_id, "package": snap.package, "commit": snap.commit, "path": str(snap.path),
              "files": len(snap.files), "size_bytes": snap.size_bytes,
              "downloaded_bytes": snap.downloaded_bytes}
    lines = [f"{key}={value}" for key, value in fields.items() if value is not None]
    print(json.dumps({**fields, "files": list(snap.files)}, indent=2) if as_json else "\n".join(lines))
