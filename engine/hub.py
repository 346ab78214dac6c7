"""Models by name: a Hugging Face repo id or a spec's package id, resolved to a local snapshot.

A name that is an existing local path stays a path. A package id is looked up in the installed
specs (its ``download`` block gives repo, revision and files). Any other ``org/name[@revision]``
is a repo id whose file list is matched against the families' folder ``sources``, so only the
files a family reads are fetched (a repo holding one GGUF resolves to that file). huggingface_hub
does the transfer, into the standard cache shared with every hub tool (offline mode, resume,
tokens as everywhere); files fetched are checked against the hub's checksums. The result is a
folder or file that detection and loading treat exactly like a local path (docs/hub.md).
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import AudiocppError, ModelError, UsageError

if TYPE_CHECKING:
    from .plugin import FamilyPlugin
    from .spec.model_spec import Download, ModelSpec, Package

_PART = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?"
NAME_RE = re.compile(rf"(?P<repo>{_PART}/{_PART})(?:/(?P<file>.+\.gguf))?")
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
LOGIN = "log in with `hf auth login` or set HF_TOKEN (tokens: https://huggingface.co/settings/tokens)"


@dataclass(frozen=True)
class ModelRef:
    """What a name means on the hub."""

    name: str
    repo_id: str
    revision: str | None = None
    filename: str | None = None  # one file of the repo (org/name/FILE.gguf)
    package: str | None = None  # a spec's package id, with its family
    family: str | None = None

    @property
    def label(self) -> str:
        return f"{self.package} ({self.repo_id})" if self.package else self.name


@dataclass(frozen=True)
class RemoteFile:
    size: int | None = None
    sha256: str | None = None  # LFS files
    blob_id: str | None = None  # git blob id (sha1 of "blob <size>\0" + content)


@dataclass(frozen=True)
class Listing:
    commit: str
    files: dict[str, RemoteFile | None]  # None: known from the cache only
    remote: bool


@dataclass(frozen=True)
class Plan:
    allow: tuple[str, ...]
    ignore: tuple[str, ...] = ()
    target: str = ""  # what to load, inside the snapshot ("" = the snapshot folder)
    families: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """A resolved name: ``path`` is what to load (the snapshot folder or a file in it)."""

    name: str
    repo_id: str
    commit: str
    path: Path
    files: tuple[str, ...]
    size_bytes: int
    downloaded_bytes: int
    package: str | None = None


# -- names ---------------------------------------------------------------------------------
def is_local_path(name: str) -> bool:
    """True for an existing path, or one written as a path (``./x``, ``/x``, ``~/x``, ``x/``)."""
    if os.path.exists(os.path.expanduser(name)):
        return True
    return (name in (".", "..") or name.startswith(("/", "./", "../", "~")) or name.endswith("/")
            or "\\" in name)


def package_index() -> dict[str, tuple[FamilyPlugin, Package]]:
    """Every package id the installed specs declare, with its family."""
    from .registry import families

    index: dict[str, tuple[FamilyPlugin, Package]] = {}
    for plugin in families().values():
        for package in plugin.spec.packages:
            index.setdefault(package.id, (plugin, package))
    return index


def package_download(spec: ModelSpec, package: Package) -> Download | None:
    if package.download is not None:
        return package.download
    return spec.package_defaults.download if spec.package_defaults is not None else None


def parse_name(name: str, *, revision: str | None = None) -> ModelRef | None:
    """``name`` as a package id or repo id (``@rev`` allowed), or None when it is neither."""
    base, at, rev = name.partition("@")
    if at:
        if not rev:
            raise UsageError(f"{name!r} ends with '@' but names no revision")
        if revision is not None and revision != rev:
            raise UsageError(f"{name!r} names revision {rev!r} but --revision is {revision!r}")
        revision = rev
    index = package_index()
    if base in index:
        plugin, package = index[base]
        dl = package_download(plugin.spec, package)
        if dl is None or dl.kind != "huggingface_snapshot" or not dl.repo:
            raise _not_downloadable(package, dl)
        return ModelRef(name, dl.repo, revision or dl.revision, package=package.id, family=plugin.name)
    match = NAME_RE.fullmatch(base)
    if match is None:
        return None
    return ModelRef(name, match["repo"], revision, filename=match["file"])


def _not_downloadable(package: Package, dl: Download | None) -> UsageError:
    pid = package.id
    if dl is None:
        return UsageError(f"package {pid!r} declares no download source",
                          hint=f"get its files ({', '.join(package.files)}) and pass their folder as --model")
    if dl.kind == "converter":
        return UsageError(f"package {pid!r} is built, not downloaded: {dl.description or dl.converter}",
                          hint="run that command on the downloaded checkpoint, then pass the result as "
                          "--model")
    if dl.kind == "local_snapshot":
        return UsageError(f"package {pid!r} is a local snapshot", hint=f"pass --model {dl.path}")
    if dl.kind == "modelscope_snapshot":
        return UsageError(f"package {pid!r} comes from ModelScope ({dl.repo}), which audiocpp does not "
                          "download from",
                          hint="download it with ModelScope's tools and pass the folder as --model")
    return UsageError(f"package {pid!r} cannot be downloaded: {dl.reason or dl.kind}")


# -- resolution ----------------------------------------------------------------------------
def resolve_model(model: str | Path | None, *, family: str | None = None, revision: str | None = None,
                  cache_dir: str | Path | None = None, progress: bool | None = None,
                  runnable_only: bool = False) -> Path | None:
    """The local path to load for ``model``: itself when it is a local path (or a ``Path``),
    else the cached or freshly downloaded snapshot of the repo or package it names."""
    if model is None:
        if revision is not None:
            raise UsageError("--revision needs a model name", hint="pass --model org/name --revision R")
        return None
    if isinstance(model, Path) or is_local_path(model):
        if revision is not None:
            raise UsageError(f"--revision applies to model names, and {str(model)!r} is a local path")
        return Path(model)
    ref = parse_name(model, revision=revision)
    if ref is None:
        raise ModelError(f"model path {model!r} does not exist",
                         hint="give an existing file or folder, a Hugging Face repo id (org/name) "
                         "or a package id (`audiocpp download --list`)")
    return fetch(ref, family=family, cache_dir=cache_dir, progress=progress, runnable_only=runnable_only).path


def download(name: str, *, family: str | None = None, revision: str | None = None,
             cache_dir: str | Path | None = None, progress: bool | None = None) -> Snapshot:
    """Download (or find in the cache) what ``name`` names: ``audiocpp.engine.download("org/name")``."""
    ref = parse_name(name, revision=revision)
    if ref is None:
        what = "a local path" if is_local_path(name) else "neither a package id nor a repo id (org/name)"
        raise UsageError(f"{name!r} is {what}: nothing to download",
                         hint="pass a Hugging Face repo id or a package id (`audiocpp download --list`)")
    return fetch(ref, family=family, cache_dir=cache_dir, progress=progress)


def fetch(ref: ModelRef, *, family: str | None = None, cache_dir: str | Path | None = None,
          progress: bool | None = None, runnable_only: bool = False) -> Snapshot:
    from .registry import get_family

    if family is not None and ref.family is not None and ref.family != family:
        raise UsageError(f"package {ref.package!r} belongs to family {ref.family!r}, not {family!r}")
    if runnable_only and ref.family is not None:
        get_family(ref.family).ensure_runnable()  # refuse before downloading gigabytes
    root = cache_root(cache_dir)
    with _explained(ref, root):
        listing = _listing(ref, root)
        plan = _plan(ref, listing, family, runnable_only)
        wanted = _wanted(plan, listing)
        snapshot = _storage(root, ref.repo_id) / "snapshots" / listing.commit
        todo = [f for f in wanted if not (snapshot / f).exists()] if listing.remote else []
        if todo:
            size = sum((listing.files[f] or RemoteFile()).size or 0 for f in todo)
            print(f"downloading {ref.label}: {len(todo)} file(s), {human_size(size)} into {root}",
                  file=sys.stderr)
        folder = _snapshot_download(ref, plan, root, progress, offline=not listing.remote)
    if folder.name != listing.commit:  # the branch moved between the listing and the download
        with _explained(ref, root):
            listing = _remote_listing(replace(ref, revision=folder.name))
        wanted = todo = _wanted(plan, listing)
    _verify(ref, folder, todo, listing)
    missing = [f for f in wanted if not (folder / f).exists()]
    if missing or not wanted:
        raise ModelError(f"the cached snapshot of {ref.label} lacks "
                         f"{', '.join(missing) or 'the files it needs'}",
                         hint=f"run `audiocpp download {ref.name}` with network access to complete it")
    sizes = {f: (folder / f).stat().st_size for f in wanted}
    return Snapshot(ref.name, ref.repo_id, listing.commit, folder / plan.target if plan.target else folder,
                    tuple(wanted), sum(sizes.values()), sum(sizes[f] for f in todo), ref.package)


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """The hub cache folder: ``cache_dir``, else huggingface_hub's (HF_HUB_CACHE, HF_HOME/hub)."""
    if cache_dir is None:
        cache_dir = _constants().HF_HUB_CACHE
    return Path(cache_dir).expanduser().resolve()


def _hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise ModelError("models by name need huggingface_hub, which is not installed",
                         hint="pip install huggingface_hub (a dependency of audiocpp)") from None
    return huggingface_hub


def _constants() -> Any:
    _hub()
    from huggingface_hub import constants

    return constants


def _storage(root: Path, repo_id: str) -> Path:
    return root / ("models--" + repo_id.replace("/", "--"))


# -- what the repo holds -------------------------------------------------------------------
def _listing(ref: ModelRef, root: Path) -> Listing:
    """The repo's files: from the hub, or from the cache when offline or the hub is unreachable."""
    endpoint = _constants().ENDPOINT
    if not _constants().HF_HUB_OFFLINE:
        try:
            return _remote_listing(ref)
        except Exception as exc:
            if not _is_connection_error(exc):
                raise
            cached = _cached_listing(ref, root)
            if cached is None:
                raise ModelError(f"cannot reach {endpoint} to download {ref.label}, and it is not in the "
                                 f"Hugging Face cache ({root}): {_first_line(exc)}",
                                 hint="check the network connection, proxy settings and "
                                 "HF_ENDPOINT") from None
            print(f"note: cannot reach {endpoint}; using the cached snapshot of {ref.label}", file=sys.stderr)
            return cached
    cached = _cached_listing(ref, root)
    if cached is None:
        raise ModelError(f"{ref.label} is not in the Hugging Face cache ({root}) and HF_HUB_OFFLINE=1 "
                         "forbids downloading it",
                         hint=f"run `audiocpp download {ref.name}` once with network access "
                         "(HF_HUB_OFFLINE unset), or point HF_HOME / --cache-dir at a cache that holds it")
    return cached


def _remote_listing(ref: ModelRef, timeout: float | None = None) -> Listing:
    info = _hub().HfApi().model_info(ref.repo_id, revision=ref.revision, files_metadata=True, timeout=timeout)
    files: dict[str, RemoteFile | None] = {
        s.rfilename: RemoteFile(s.size, s.lfs.sha256 if s.lfs is not None else None, s.blob_id)
        for s in info.siblings or []
    }
    return Listing(info.sha, files, remote=True)


def _cached_listing(ref: ModelRef, root: Path) -> Listing | None:
    storage = _storage(root, ref.repo_id)
    rev = ref.revision or "main"
    commit: str | None = rev if COMMIT_RE.fullmatch(rev) else None
    if commit is None and (storage / "refs" / rev).is_file():
        commit = (storage / "refs" / rev).read_text(encoding="utf-8").strip()
    snapshot = storage / "snapshots" / (commit or "")
    if commit is None or not snapshot.is_dir():
        return None
    files = {p.relative_to(snapshot).as_posix(): None for p in sorted(snapshot.rglob("*")) if p.is_file()}
    return Listing(commit, files, remote=False)


def _wanted(plan: Plan, listing: Listing) -> list[str]:
    from huggingface_hub.utils import filter_repo_objects

    return list(filter_repo_objects(sorted(listing.files), allow_patterns=list(plan.allow),
                                    ignore_patterns=list(plan.ignore) or None))


# -- which files -----------------------------------------------------------------------------
def _plan(ref: ModelRef, listing: Listing, family: str | None, runnable_only: bool) -> Plan:
    if ref.package is not None:
        return _plan_package(ref, listing)
    if ref.filename is not None:
        if ref.filename not in listing.files:
            ggufs = [f for f in listing.files if f.endswith(".gguf")]
            raise ModelError(f"{ref.repo_id} has no file {ref.filename!r}",
                             hint=f"its GGUF files: {', '.join(ggufs) or 'none'}")
        return Plan((ref.filename,), target=ref.filename)
    return _plan_repo(ref, listing, family, runnable_only)


def _plan_package(ref: ModelRef, listing: Listing) -> Plan:
    plugin, package = package_index()[ref.package or ""]
    dl = package_download(plugin.spec, package)
    assert dl is not None
    if listing.remote and not dl.include:
        missing = [f for f in package.files if f not in listing.files]
        if missing:
            raise ModelError(f"{ref.repo_id} at {listing.commit[:12]} lacks files package {package.id!r} "
                             f"needs: {', '.join(missing)}",
                             hint="pass another --revision, or tell the spec's maintainers")
    files = package.files
    target = (files[0] if len(files) == 1 and files[0].endswith(".gguf")
              else (package.strip_prefix or dl.strip_prefix or "").strip("/"))
    return Plan(tuple(dl.include or files), tuple(dl.exclude or ()), target, (plugin.name,))


def folder_files(spec: ModelSpec, files: set[str] | dict[str, Any]) -> tuple[list[str] | None, list[str]]:
    """The files a family reads from a folder holding ``files`` (first matching folder source,
    plus the optional files present), or None and what the closest source lacks."""
    closest: list[str] | None = None
    for src in spec.sources:
        if not src.roots or any(v != "." for v in src.roots.values()):
            continue
        required = _rel_paths(src.roots, [*src.files.values(), *src.tensors.values()])
        required += [f for f in spec.detection.required_files if f not in required]
        optional = _rel_paths(src.roots, [*src.optional_files.values(), *src.optional_tensors.values()])
        missing = [f for f in required if f not in files]
        if not missing:
            # an optional glob (Kokoro's "voices/*.pt") takes every file of the repo it matches
            wanted = {f for pattern in optional for f in files if fnmatch.fnmatchcase(f, pattern)}
            return sorted({*required, *wanted}), []
        if closest is None or len(missing) < len(closest):
            closest = missing
    return None, closest or []


def _rel_paths(roots: dict[str, str], refs: list[Any]) -> list[str]:
    out = []
    for ref in refs:
        if isinstance(ref, str):  # "root:relative/path"; namespaces of package GGUFs are not files
            root, _, rel = ref.partition(":")
            if rel and roots.get(root) == "." and rel not in out:
                out.append(rel)
    return out


def _plan_repo(ref: ModelRef, listing: Listing, family: str | None, runnable_only: bool) -> Plan:
    from .registry import families, get_family

    plugins = [get_family(family)] if family else list(families().values())
    allow: set[str] = set()
    used: list[str] = []
    refused: list[FamilyPlugin] = []
    lacking: list[str] = []
    for plugin in plugins:
        needed, missing = folder_files(plugin.spec, listing.files)
        if needed is None:
            if missing:
                lacking.append(f"{plugin.name} needs {', '.join(missing)}")
        elif runnable_only and not plugin.spec.runnable:
            refused.append(plugin)
        else:
            allow.update(needed)
            used.append(plugin.name)
    if used:
        return Plan(tuple(sorted(allow)), families=tuple(used))
    if refused:
        refused[0].ensure_runnable()  # raises: the family cannot run, so do not download it
    ggufs = sorted(f for f in listing.files if f.endswith(".gguf"))
    if len(ggufs) == 1:
        return Plan((ggufs[0],), target=ggufs[0])
    if ggufs:
        shown = ", ".join(ggufs[:8]) + (f", ... ({len(ggufs)} in all)" if len(ggufs) > 8 else "")
        raise UsageError(f"{ref.repo_id} holds several GGUF files: {shown}",
                         hint=f"name one, e.g. --model {ref.repo_id}/{ggufs[0]}")
    found = sorted(listing.files)
    shown = ", ".join(found[:12]) + (f", ... ({len(found)} files)" if len(found) > 12 else "") or "no files"
    names = ", ".join(p.name for p in plugins)
    hint = "; ".join(lacking) or "see `audiocpp families`"
    if not listing.remote:
        hint += f"; the cached snapshot may be incomplete: run `audiocpp download {ref.name}` online"
    raise ModelError(f"the files of {ref.repo_id} match no installed family ({names}): it holds {shown}",
                     hint=hint)


# -- transfer and checks -----------------------------------------------------------------------
def _snapshot_download(ref: ModelRef, plan: Plan, root: Path, progress: bool | None, offline: bool) -> Path:
    with _progress_bars(progress):
        folder = _hub().snapshot_download(
            ref.repo_id, revision=ref.revision, cache_dir=str(root), allow_patterns=list(plan.allow),
            ignore_patterns=list(plan.ignore) or None, local_files_only=offline,
        )
    return Path(folder)


@contextmanager
def _progress_bars(enabled: bool | None) -> Iterator[None]:
    """huggingface_hub's progress bars, on a terminal only (or as ``enabled`` says)."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    show = sys.stderr.isatty() if enabled is None else enabled
    if show or are_progress_bars_disabled():
        yield
        return
    disable_progress_bars()
    try:
        yield
    finally:
        enable_progress_bars()


def _verify(ref: ModelRef, folder: Path, fetched: list[str], listing: Listing) -> None:
    """Check the files fetched by this call against the hub's checksums; remove the bad ones."""
    from huggingface_hub.utils.sha import git_hash, sha_fileobj

    bad: list[str] = []
    for name in fetched:
        info = listing.files.get(name)
        path = folder / name
        if info is None or not path.exists():
            continue
        if info.sha256:
            expected = info.sha256
            with path.open("rb") as f:
                actual = sha_fileobj(f).hex()
        elif info.blob_id:
            expected, actual = info.blob_id, git_hash(path.read_bytes())
        else:
            continue
        if actual != expected:
            bad.append(f"{name} ({'sha256' if info.sha256 else 'git blob id'} {actual[:12]}..., "
                       f"the hub says {expected[:12]}...)")
            blob = Path(os.path.realpath(path))
            path.unlink(missing_ok=True)
            blob.unlink(missing_ok=True)
    if bad:
        raise ModelError(f"{len(bad)} file(s) of {ref.label} failed their checksum: {'; '.join(bad)}",
                         hint="the damaged files were removed from the cache; run the command again")


@contextmanager
def _explained(ref: ModelRef, root: Path) -> Iterator[None]:
    """Turn huggingface_hub's errors into one audiocpp error that says what to do."""
    try:
        yield
    except AudiocppError:
        raise
    except Exception as exc:
        error = _explain(exc, ref, root)
        if error is None:
            raise
        raise error from None


def _explain(exc: BaseException, ref: ModelRef, root: Path) -> AudiocppError | None:
    from huggingface_hub import errors as he

    chain = _chain(exc)
    status = next((getattr(getattr(e, "response", None), "status_code", None) for e in chain
                   if isinstance(e, he.HfHubHTTPError) and getattr(e, "response", None) is not None), None)
    repo, endpoint, label = ref.repo_id, _constants().ENDPOINT, ref.label
    if any(isinstance(e, he.GatedRepoError) for e in chain):
        refused = " (the token found was refused)" if _hub().get_token() else ""
        return ModelError(f"access to {repo} was refused (HTTP {status}): it is a gated repo{refused}",
                          hint=f"accept its conditions at {endpoint}/{repo} with your account, then {LOGIN}")
    if any(isinstance(e, he.RevisionNotFoundError) for e in chain):
        return ModelError(f"{repo} has no revision {ref.revision!r}",
                          hint="pass a branch, tag or commit of the repo")
    if any(isinstance(e, he.RepositoryNotFoundError) for e in chain):
        if status == 401:
            return ModelError(f"{repo} was not found on {endpoint}, or it is private and access was refused "
                              "(HTTP 401)", hint=f"check the name; for a private or gated repo, {LOGIN}")
        local = "" if ref.package else f", and {ref.name!r} is not a local path either"
        return ModelError(f"there is no model {repo!r} on {endpoint} (HTTP {status}){local}",
                          hint="check the repo id (org/name) or the path; `audiocpp download --list` shows "
                          "the package ids")
    if status in (401, 403):
        return ModelError(f"access to {repo} was refused (HTTP {status})",
                          hint=f"{LOGIN}, with a token that can read the repo")
    if any(isinstance(e, he.RemoteEntryNotFoundError) for e in chain):
        return ModelError(f"a file of {label} is missing on {endpoint}: {_first_line(exc)}")
    if _constants().HF_HUB_OFFLINE and isinstance(exc, he.LocalEntryNotFoundError):
        return ModelError(f"{label} is not completely in the Hugging Face cache ({root}) and "
                          "HF_HUB_OFFLINE=1 forbids downloading it",
                          hint=f"run `audiocpp download {ref.name}` once with network access "
                          "(HF_HUB_OFFLINE unset)")
    resume = "run the same command again: finished files are kept and the rest is downloaded"
    if status is not None:
        return ModelError(f"downloading {label} from {endpoint} failed (HTTP {status})", hint=resume)
    if any(_is_connection_error(e) for e in chain) or isinstance(exc, he.LocalEntryNotFoundError):
        return ModelError(f"downloading {label} from {endpoint} failed: {_first_line(exc)}",
                          hint=f"check the network connection, then {resume}")
    if isinstance(exc, OSError):
        return ModelError(f"downloading {label} failed: {_first_line(exc)}",
                          hint=f"check free disk space and permissions of {root}, then {resume}")
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _is_connection_error(exc: BaseException) -> bool:
    """A network failure, whichever HTTP library huggingface_hub uses (httpx, httpx2, requests)."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(exc, (HfHubHTTPError, OfflineModeIsEnabled)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"TransportError", "ConnectError", "TimeoutException", "NetworkError",
                         "ProtocolError"})


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def human_size(n: int | None) -> str:
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"



# -- the package list ------------------------------------------------------------------------
@dataclass(frozen=True)
class PackageRow:
    id: str
    family: str
    display_name: str
    source: str  # "hf:org/name", "converter: ...", "none"
    downloadable: bool
    size_bytes: int | None  # on disk when cached, else the hub's figure when it could be asked
    cached: bool
    path: str | None


def list_packages(cache_dir: str | Path | None = None, *, remote: bool | None = None) -> list[PackageRow]:
    """Every package id of the installed specs: where it comes from, its size, whether it is cached.

    Sizes of packages that are not cached come from the hub (one request per repo, skipped when
    offline and given up after the first connection failure)."""
    root = cache_root(cache_dir)
    ask = (not _constants().HF_HUB_OFFLINE) if remote is None else remote
    rows: list[PackageRow] = []
    listings: dict[tuple[str, str | None], Listing | None] = {}
    for pid, (plugin, package) in package_index().items():
        dl = package_download(plugin.spec, package)
        if dl is None or dl.kind != "huggingface_snapshot" or not dl.repo:
            source = ("none" if dl is None
                      else f"{dl.kind}: {dl.description or dl.converter or dl.path or dl.reason}")
            rows.append(PackageRow(pid, plugin.name, package.display_name, source, False, None, False, None))
            continue
        ref = ModelRef(pid, dl.repo, dl.revision, package=pid, family=plugin.name)
        plan = _plan_package(ref, Listing("", {}, remote=False))
        cached_listing = _cached_listing(ref, root)
        size: int | None = None
        path: str | None = None
        cached = False
        if cached_listing is not None:
            wanted = _wanted(plan, cached_listing)
            snap = _storage(root, ref.repo_id) / "snapshots" / cached_listing.commit
            cached = bool(wanted) and all(f in cached_listing.files for f in package.files)
            if cached:
                size = sum((snap / f).stat().st_size for f in wanted)
                path = str(snap / plan.target if plan.target else snap)
        if not cached and ask:
            key = (ref.repo_id, ref.revision)
            if key not in listings:
                try:
                    listings[key] = _remote_listing(ref, timeout=10)
                except Exception as exc:
                    listings[key] = None
                    if _is_connection_error(exc):
                        ask = False
            found = listings[key]
            if found is not None:
                wanted = _wanted(plan, found)
                if wanted:
                    size = sum((found.files[f] or RemoteFile()).size or 0 for f in wanted)
        rows.append(PackageRow(pid, plugin.name, package.display_name, f"hf:{dl.repo}", True, size, cached,
                               path))
    return rows
