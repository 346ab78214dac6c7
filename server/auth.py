"""API keys: who may use the server, and as whom.

Keys come from ``--api-key`` (repeatable), ``--admin-key`` (repeatable), ``--api-keys-file FILE``
(one entry a line, ``#`` comments, reloaded on SIGHUP) and ``AUDIOCPP_API_KEYS`` (entries separated by
commas or whitespace). An entry is ``KEY``, ``LABEL:KEY`` or ``admin:KEY`` / ``admin:LABEL:KEY`` (an
admin key). A key is 16 to 512 printable ASCII characters without spaces, ``:`` or ``,``; a label is
1-64 letters, digits, ``.``, ``-`` or ``_``. A key without a label is named ``key-`` and 8 hex digits
of a keyed hash of it (stable, and useless to guess the key from).

With any key configured, a request is authenticated by comparing a keyed hash (HMAC-SHA256 with the
voices folder's secret salt) of what it presents with the hash of every configured key, each with
``hmac.compare_digest`` and without stopping at a match: the time taken does not depend on which key
matched, on how much of one matched, or on the presented key's length. The key itself is kept only to
redact it from log lines (:class:`Redact`); it is never written anywhere, and no error repeats what a
client presented.

A key's voices belong to its *owner id*: 32 hex digits of the same keyed hash, so they stay its own
across restarts and label changes, and no file on disk holds the key.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import socket
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs

from audiocpp.engine.errors import UsageError

from .errors import ApiError

MIN_KEY_CHARS = 16
MAX_KEY_CHARS = 512
#: The largest credential hashed: anything longer is refused as it is (no configured key is longer).
MAX_PRESENTED_BYTES = 4 * MAX_KEY_CHARS
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEY_CHARS = re.compile(r"^[\x21-\x7e]+$")
ENV_VAR = "AUDIOCPP_API_KEYS"
KEY_HINT = ("make one with: python -c \"import secrets; print(secrets.token_urlsafe(32))\" (16-512 printable "
            "characters without spaces, ':' or ',')")
log = logging.getLogger("audiocpp.serve")


@dataclass(frozen=True)
class Principal:
    """Who a request is: a key's label and owner id, whether it is an admin key, whether a key was
    checked at all (``keyed``: False on a server without keys, and for Wyoming)."""

    label: str
    owner: str | None  # the owner id of the key's voices; None: the shared voices only
    admin: bool = False
    keyed: bool = True

    @property
    def queue_key(self) -> str:
        """The key the model's queue shares out by ("" for a server without keys: one user)."""
        return self.owner or ""


#: A request on a server without keys: the shared voices, as before keys existed.
ANONYMOUS = Principal(label="anonymous", owner=None, admin=False, keyed=False)
#: A Wyoming exchange (the protocol has no authentication): the shared voices only.
WYOMING = Principal(label="wyoming", owner=None, admin=False, keyed=False)


@dataclass(frozen=True)
class KeyEntry:
    """One configured key. ``secret`` is never shown (not in repr, not in any message)."""

    label: str | None
    secret: str = field(repr=False)
    admin: bool
    source: str  # where it was configured, for messages: "line 3 of keys.txt", "--api-key #2"


def parse_entry(text: str, source: str, *, admin: bool = False) -> KeyEntry:
    """``KEY``, ``LABEL:KEY``, ``admin:KEY`` or ``admin:LABEL:KEY``; errors name ``source``, never the key."""
    parts = text.strip().split(":")
    label: str | None = None
    if len(parts) == 1:
        secret = parts[0]
    elif len(parts) == 2:
        label, secret = parts
        if label == "admin":
            admin = True
    elif len(parts) == 3 and parts[0] == "admin":
        admin, label, secret = True, parts[1], parts[2]
    else:
        raise UsageError(f"the API key entry at {source} has {len(parts) - 1} ':'; write KEY, LABEL:KEY, "
                         "admin:KEY or admin:LABEL:KEY (a key has no ':')")
    if label is not None and not LABEL_RE.match(label):
        raise UsageError(f"the API key entry at {source} has a bad label: use 1-64 letters, digits, '.', '-' "
                         "or '_', starting with a letter or digit")
    check_secret(secret, source)
    return KeyEntry(label=label, secret=secret, admin=admin, source=source)


def check_secret(secret: str, source: str) -> None:
    if not secret:
        raise UsageError(f"the API key at {source} is empty", hint=KEY_HINT)
    if not _KEY_CHARS.match(secret) or "," in secret:
        raise UsageError(f"the API key at {source} has characters a key may not have (spaces, control or "
                         "non-ASCII characters, ',')", hint=KEY_HINT)
    if len(secret) < MIN_KEY_CHARS:
        raise UsageError(f"the API key at {source} has {len(secret)} characters: too short to be safe; use "
                         f"at least {MIN_KEY_CHARS}", hint=KEY_HINT)
    if len(secret) > MAX_KEY_CHARS:
        raise UsageError(f"the API key at {source} has {len(secret)} characters; use at most {MAX_KEY_CHARS}",
                         hint=KEY_HINT)


def read_keys_file(path: Path) -> list[KeyEntry]:
    """The entries of a keys file: one a line, blank lines and ``#`` comments skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--api-keys-file {str(path)!r} does not exist",
                         hint="one key a line (LABEL:KEY names it, admin:KEY makes an admin key)") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else "not UTF-8 text"
        raise UsageError(f"cannot read --api-keys-file {str(path)!r}: {reason}") from None
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            entries.append(parse_entry(line, f"line {number} of {path.name}"))
    return entries


def env_entries(value: str | None) -> list[KeyEntry]:
    if not value or not value.strip():
        return []
    return [parse_entry(item, f"entry {i} of {ENV_VAR}")
            for i, item in enumerate(re.split(r"[,\s]+", value.strip()), 1) if item]


@dataclass(frozen=True)
class _Key:
    digest: bytes
    principal: Principal
    secret: str = field(repr=False)


class KeyRing:
    """The configured keys (static ones from flags and the environment, plus the keys file's, which
    :meth:`reload` reads again). ``enabled``: keys were asked for (even a keys file that is empty now:
    then every request is refused, never let through)."""

    def __init__(self, salt: bytes, static: Sequence[KeyEntry] = (), file: Path | None = None) -> None:
        self.salt = salt
        self.static = list(static)
        self.file = file
        self.enabled = bool(self.static) or file is not None
        self._keys: tuple[_Key, ...] = ()
        self._build(self.static + (read_keys_file(file) if file is not None else []))

    # -- hashing -------------------------------------------------------------------------------
    def digest(self, presented: bytes) -> bytes:
        return hmac.new(self.salt, presented, hashlib.sha256).digest()

    def owner_id(self, secret: str) -> str:
        return self.digest(secret.encode("ascii")).hex()[:32]

    def _build(self, entries: list[KeyEntry]) -> None:
        keys: list[_Key] = []
        labels: dict[str, str] = {}
        digests: dict[bytes, str] = {}
        for entry in entries:
            digest = self.digest(entry.secret.encode("ascii"))
            if digest in digests:
                raise UsageError(f"the API key at {entry.source} is the same key as at {digests[digest]}",
                                 hint="give each key once (one label each)")
            digests[digest] = entry.source
            label = entry.label or f"key-{digest.hex()[32:40]}"
            if label in labels:
                raise UsageError(f"the label {label!r} is used at {labels[label]} and at {entry.source}",
                                 hint="give each key its own label")
            labels[label] = entry.source
            keys.append(_Key(digest, Principal(label=label, owner=digest.hex()[:32], admin=entry.admin),
                             entry.secret))
        self._keys = tuple(keys)

    # -- what the server asks ------------------------------------------------------------------
    def authenticate(self, presented: bytes) -> Principal | None:
        """The principal of the key ``presented`` is, or None; constant time (see the module docstring)."""
        if len(presented) > MAX_PRESENTED_BYTES:
            return None
        digest = self.digest(presented)
        found: Principal | None = None
        for key in self._keys:  # every key compared, no early exit
            if hmac.compare_digest(digest, key.digest):
                found = key.principal
        return found

    def still_valid(self, principal: Principal) -> bool:
        """Whether ``principal``'s key is still configured (after a reload)."""
        return not principal.keyed or any(k.principal == principal for k in self._keys)

    def principals(self) -> list[Principal]:
        return [k.principal for k in self._keys]

    def label_of(self, owner: str | None) -> str | None:
        return next((k.principal.label for k in self._keys if k.principal.owner == owner), None)

    def owner_of(self, label: str) -> str | None:
        return next((k.principal.owner for k in self._keys if k.principal.label == label), None)

    def secrets(self) -> list[str]:
        return [k.secret for k in self._keys]

    def describe(self) -> str:
        principals = self.principals()
        if not principals:
            return "no keys yet: every request to /v1 is refused until the keys file has one"
        return ", ".join(p.label + (" (admin)" if p.admin else "") for p in principals)

    def reload(self) -> str:
        """Read the keys file again (static keys stay). A file that cannot be read or has a bad entry
        leaves the keys as they were. Returns what happened, for the server's log."""
        if self.file is None:
            return "no --api-keys-file to reload"
        try:
            self._build(self.static + read_keys_file(self.file))
        except UsageError as error:
            return f"the keys file was not reloaded, the previous keys stay in use: {error.message}"
        return f"keys reloaded from {self.file.name}: {self.describe()}"


# -- credentials in requests --------------------------------------------------------------------
@dataclass(frozen=True)
class Credential:
    """What a request presented: the key's bytes, or the problem (``missing``, ``malformed``)."""

    value: bytes | None
    problem: str | None = None  # None, "missing" or "malformed"
    detail: str = ""


def bearer(headers: Iterable[tuple[bytes, bytes]]) -> Credential:
    """The key of the request's ``Authorization: Bearer KEY`` header (one header; scheme in any case)."""
    values = [value for name, value in headers if name.lower() == b"authorization"]
    if not values:
        return Credential(None, "missing")
    if len(values) > 1:
        return Credential(None, "malformed", "the request has several Authorization headers: send one")
    scheme, _, rest = values[0].strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return Credential(None, "malformed", "the Authorization header must be 'Bearer KEY'")
    key = rest.strip(b" \t")
    if not key:
        return Credential(None, "malformed", "the Authorization header has no key after 'Bearer'")
    return Credential(key)


def query_key(query_string: bytes) -> Credential:
    """The ``api_key`` query parameter (a WebSocket from a browser cannot set headers); names and values
    percent-decoded once (``api%5Fkey`` is ``api_key``), as every query parser reads them."""
    if not query_string:
        return Credential(None, "missing")
    try:
        values = parse_qs(query_string.decode("latin-1"), keep_blank_values=True, encoding="utf-8",
                          errors="surrogateescape", max_num_fields=64).get("api_key", [])
    except ValueError:
        return Credential(None, "malformed", "the query string has too many fields")
    if not values:
        return Credential(None, "missing")
    if len(values) > 1:
        return Credential(None, "malformed", "the query string has several api_key parameters: send one")
    try:
        key = values[0].encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return Credential(None, "malformed", "the api_key parameter is not text")
    if not key:
        return Credential(None, "malformed", "the api_key parameter is empty")
    return Credential(key)


def websocket_credential(headers: Sequence[tuple[bytes, bytes]], query_string: bytes) -> Credential:
    """A WebSocket's key: its Authorization header, else its ``api_key`` query parameter."""
    header = bearer(headers)
    return header if header.problem != "missing" else query_key(query_string)


def unauthorized(credential: Credential, *, websocket: bool = False) -> ApiError:
    """401 with OpenAI's ``invalid_api_key`` body; never repeats what the client sent."""
    where = "the header Authorization: Bearer KEY" + (" or the query parameter api_key" if websocket else "")
    if credential.problem == "missing":
        message = f"this server needs an API key: send it as {where} (the openai client's api_key)"
        challenge = 'Bearer realm="audiocpp"'
    elif credential.problem == "malformed":
        message = f"{credential.detail}; send the key as {where}"
        challenge = 'Bearer realm="audiocpp", error="invalid_request"'
    else:
        message = "the API key is not valid on this server: check the key your client sends"
        challenge = 'Bearer realm="audiocpp", error="invalid_token"'
    return ApiError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": challenge})


# -- addresses -----------------------------------------------------------------------------------
def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is this machine only (127.0.0.0/8, ::1, localhost)."""
    text = host.strip().strip("[]")
    try:
        return _loopback_ip(text)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(text, None)
    except (OSError, UnicodeError):
        return False
    try:
        return bool(infos) and all(_loopback_ip(str(info[4][0])) for info in infos)
    except ValueError:
        return False


def _loopback_ip(text: str) -> bool:
    ip = ipaddress.ip_address(text.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def client_is_loopback(client: tuple[str, int] | list | None) -> bool:
    if not client:
        return False
    try:
        return _loopback_ip(str(client[0]))
    except ValueError:
        return False


# -- logs ------------------------------------------------------------------------------------------
_QUERY_SECRET = re.compile(r"((?:api_key|access_token|token)=)[^&\s\"']*", re.IGNORECASE)
_BEARER = re.compile(r"(Bearer\s+)\S+", re.IGNORECASE)


class Redact(logging.Filter):
    """Takes configured keys, ``api_key=`` query values and bearer tokens out of log records
    (uvicorn's access and error logs show the path with its query string)."""

    def __init__(self, keys: KeyRing | None) -> None:
        super().__init__()
        self.keys = keys

    def redact(self, text: str) -> str:
        text = _BEARER.sub(r"\1[redacted]", _QUERY_SECRET.sub(r"\1[redacted]", text))
        for secret in self.keys.secrets() if self.keys is not None else ():
            text = text.replace(secret, "[redacted]")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot format is left to logging
            return True
        redacted = self.redact(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True


def install_redaction(keys: KeyRing | None) -> Redact:
    """The filter on uvicorn's loggers and their handlers (after uvicorn configured its logging)."""
    redact = Redact(keys)
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "audiocpp.serve"):
        logger = logging.getLogger(name)
        logger.addFilter(redact)
        for handler in logger.handlers:
            handler.addFilter(redact)
    return redact


def say(message: str) -> None:
    print(f"audiocpp serve: {message}", file=sys.stderr, flush=True)
