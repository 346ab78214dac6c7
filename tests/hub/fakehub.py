"""A local stand-in for the Hugging Face Hub: the endpoints huggingface_hub calls to download.

``HF_ENDPOINT=http://127.0.0.1:PORT`` points huggingface_hub here. Served, as the real hub
serves them (huggingface_hub >= 1.0):

- ``GET /api/models/{repo}[/revision/{rev}][?blobs=True]``: model info with ``sha`` and
  ``siblings`` (sizes, blob ids and LFS sha256 with ``blobs``);
- ``GET /api/models/{repo}/tree/{rev}[/{path}]?recursive=...``: the file tree;
- ``HEAD|GET /{repo}/resolve/{rev}/{file}``: ``ETag`` (sha256 for LFS files, the git blob id
  otherwise, as ``X-Linked-Etag`` too), ``X-Repo-Commit``, ``Content-Length``, and ``Range``
  requests answered with 206 + ``Content-Range`` (how huggingface_hub resumes).

Errors carry the hub's ``X-Error-Code`` (RepoNotFound, RevisionNotFound, EntryNotFound,
GatedRepo). Faults for the tests: a connection dropped after N bytes of a file (once), a file
whose body stalls until released, a status code for one file, corrupted bytes of the right size.
Every request is logged.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pth", ".pt", ".onnx")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    repo_id: str
    commits: dict[str, dict[str, bytes]]  # commit sha -> files
    refs: dict[str, str]  # branch or tag -> commit sha
    private: bool = False
    gated: bool = False
    token: str = "secret-token"

    def commit_of(self, rev: str) -> str | None:
        if rev in self.commits:
            return rev
        return self.refs.get(rev)


@dataclass
class Logged:
    method: str
    path: str
    range: str | None
    authorization: str | None


@dataclass
class Faults:
    # (repo, file) -> bytes sent, once
    truncate_once: dict[tuple[str, str], int] = field(default_factory=dict)
    # send half, wait for the event
    stall: dict[tuple[str, str], threading.Event] = field(default_factory=dict)
    status: dict[tuple[str, str], int] = field(default_factory=dict)  # answer GET with this status
    corrupt: set[tuple[str, str]] = field(default_factory=set)  # flip bytes, keep the size


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.log: list[Logged] = []
        self.faults = Faults()
        self._lock = threading.Lock()
        hub = self

        class Handler(_Handler):
            owner = hub

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        for event in self.faults.stall.values():
            event.set()
        self.server.shutdown()
        self.server.server_close()

    def add_repo(self, repo_id: str, files: dict[str, bytes], *,
                 tags: dict[str, dict[str, bytes]] | None = None,
                 private: bool = False, gated: bool = False) -> Repo:
        """A repo whose ``main`` holds ``files``; each tag names another commit."""
        commits: dict[str, dict[str, bytes]] = {}
        refs: dict[str, str] = {}
        for ref, content in {"main": files, **(tags or {})}.items():
            digest = hashlib.sha1(repo_id.encode())
            for path in sorted(content):
                digest.update(path.encode() + b"\0" + hashlib.sha256(content[path]).digest())
            sha = digest.hexdigest()
            commits[sha] = dict(content)
            refs[ref] = sha
        repo = Repo(repo_id, commits, refs, private=private, gated=gated)
        self.repos[repo_id] = repo
        return repo

    def record(self, entry: Logged) -> None:
        with self._lock:
            self.log.append(entry)

    def requests(self, kind: str | None = None) -> list[Logged]:
        """Logged requests; ``kind="resolve"`` keeps file requests, ``"api"`` the API calls."""
        with self._lock:
            entries = list(self.log)
        if kind == "resolve":
            return [e for e in entries if "/resolve/" in e.path]
        if kind == "api":
            return [e for e in entries if e.path.startswith("/api/")]
        return entries

    def downloaded(self) -> list[str]:
        """Files fetched with GET (path in the repo), in request order."""
        return [e.path.split("/resolve/", 1)[1].split("/", 1)[1] for e in self.requests("resolve")
                if e.method == "GET"]

    def clear_log(self) -> None:
        with self._lock:
            self.log.clear()


class _Handler(BaseHTTPRequestHandler):
    owner: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    # -- routing -----------------------------------------------------------------------
    def _dispatch(self, head: bool) -> None:
        hub = self.owner
        url = urlsplit(self.path)
        path = unquote(url.path)
        hub.record(Logged("HEAD" if head else "GET", path, self.headers.get("Range"),
                          self.headers.get("Authorization")))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo_id, rest = "/".join(parts[2:4]), parts[4:]
            repo = self._repo(repo_id, api=True)
            if repo is None:
                return
            query = parse_qs(url.query)
            if not rest:
                return self._info(repo, "main", query)
            if rest[0] == "revision" and len(rest) >= 2:
                return self._info(repo, "/".join(rest[1:]), query)
            if rest[0] == "tree" and len(rest) >= 2:
                return self._tree(repo, rest[1], "/".join(rest[2:]), query)
        elif len(parts) >= 5 and parts[2] == "resolve":
            repo = self._repo("/".join(parts[:2]), api=False)
            if repo is None:
                return
            return self._resolve(repo, parts[3], "/".join(parts[4:]), head)
        self._error(404, "EntryNotFound", "not an endpoint of this fake hub")

    def _authorized(self, repo: Repo) -> bool:
        return self.headers.get("Authorization") == f"Bearer {repo.token}"

    def _repo(self, repo_id: str, *, api: bool) -> Repo | None:
        repo = self.owner.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        if repo.private and not self._authorized(repo):
            self._error(401, "RepoNotFound", "Invalid username or password.")
            return None
        if repo.gated and not api and not self._authorized(repo):
            status = 403 if self.headers.get("Authorization") else 401
            self._error(status, "GatedRepo",
                        f"Access to model {repo_id} is restricted. You must have access to "
                        "it and be authenticated to access it. Please log in.")
            return None
        return repo

    # -- API ---------------------------------------------------------------------------
    def _info(self, repo: Repo, rev: str, query: dict[str, list[str]]) -> None:
        sha = repo.commit_of(rev)
        if sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        blobs = query.get("blobs", ["false"])[0].lower() == "true"
        siblings = []
        for name, data in sorted(repo.commits[sha].items()):
            entry: dict[str, object] = {"rfilename": name}
            if blobs:
                entry.update(size=len(data), blobId=git_blob_id(data))
                if name.endswith(LFS_SUFFIXES):
                    entry["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                    "pointerSize": 134}
            siblings.append(entry)
        self._json({"_id": "0" * 24, "id": repo.repo_id, "modelId": repo.repo_id, "sha": sha,
                    "private": repo.private, "gated": "auto" if repo.gated else False, "disabled": False,
                    "downloads": 0, "likes": 0, "tags": [], "lastModified": "2026-01-01T00:00:00.000Z",
                    "siblings": siblings})

    def _tree(self, repo: Repo, rev: str, sub: str, query: dict[str, list[str]]) -> None:
        sha = repo.commit_of(rev)
        if sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        prefix = f"{sub}/" if sub else ""
        entries: list[dict[str, object]] = []
        folders: set[str] = set()
        for name, data in sorted(repo.commits[sha].items()):
            if not name.startswith(prefix):
                continue
            rel = name[len(prefix):]
            if "/" in rel:
                folder = prefix + rel.split("/", 1)[0]
                if folder not in folders:
                    folders.add(folder)
                    entries.append({"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(),
                                    "size": 0, "path": folder})
                if not recursive:
                    continue
            entry: dict[str, object] = {"type": "file", "oid": git_blob_id(data), "size": len(data),
                                        "path": name}
            if name.endswith(LFS_SUFFIXES):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                "pointerSize": 134}
            entries.append(entry)
        self._json(entries)

    # -- files -------------------------------------------------------------------------
    def _resolve(self, repo: Repo, rev: str, name: str, head: bool) -> None:
        sha = repo.commit_of(rev)
        if sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        data = repo.commits[sha].get(name)
        if data is None:
            return self._error(404, "EntryNotFound", f"{name} does not exist", commit=sha)
        faults = self.owner.faults
        key = (repo.repo_id, name)
        if not head and key in faults.status:
            return self._error(faults.status[key], None, "injected failure", commit=sha)
        lfs = name.endswith(LFS_SUFFIXES)
        etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_id(data)
        if not head and key in faults.corrupt:
            data = bytes(b ^ 0xFF for b in data[:16]) + data[16:]
        start = 0
        range_header = self.headers.get("Range")
        if range_header and not head and range_header.startswith("bytes="):
            start = int(range_header[len("bytes="):].split("-", 1)[0] or 0)
        body = data[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{etag}"')
        self.send_header("X-Repo-Commit", sha)
        if lfs:
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(len(data)))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if head:
            return
        if key in faults.truncate_once and not start:
            return self._send_then_drop(body[: faults.truncate_once.pop(key)])
        stall = faults.stall.get(key)
        if stall is not None and not start:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            stall.wait(timeout=120)
            return self._send_then_drop(b"")
        self.wfile.write(body)

    def _send_then_drop(self, part: bytes) -> None:
        self.wfile.write(part)
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- helpers -----------------------------------------------------------------------
    def _json(self, payload: object) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str | None, message: str, *, commit: str | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        if commit:
            self.send_header("X-Repo-Commit", commit)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
