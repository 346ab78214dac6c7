"""Fuzz the server's auth surface over raw sockets against a running ``audiocpp serve`` with keys:
``Authorization`` headers of any bytes (empty, non-ASCII, NUL, 1 MB, dozens of them, near-misses of a
real key, other schemes), WebSocket ``api_key`` query parameters in every encoding (percent-encoded,
twice, ``+``, overlong UTF-8, repeated, NUL), and hostile voice names (traversal, NUL, long, other keys'
``owner/name``) in paths, bodies and uploads.

The promises, per request: no 5xx and no traceback in the server's log (0 internal errors); a request
gets past the gate exactly when it carries one configured key in one of the accepted forms (an oracle
written from the documented rules, not from the code); no response carries a configured key or the
credential the request presented (0 leaks; the server's log, access log and metrics are searched too);
a hostile name changes nothing on disk outside the voices folder and never reaches another key's voice.
Requests the HTTP parser itself refuses (a header line over its limit, bytes it does not allow) are
answered 400 or the connection is closed, which is fine: they never reach the application.
"""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .harness import check, fuzz_settings
from .mutate import mutated

pytest.importorskip("fastapi")

#: The HTTP parser's limit on a request's head (h11's default): a larger head is refused before the app.
HEAD_LIMIT = 16 * 1024
WS_LINE_LIMIT = 8192 - len("GET  HTTP/1.1\r\n")


class Server:
    def __init__(self, proc, keys: dict[str, str]) -> None:
        self.proc, self.keys = proc, keys
        self.port = proc.port
        self.windows = {k[i:i + 12].encode() for k in keys.values() for i in range(len(k) - 11)}

    def leaks(self, data: bytes) -> list[bytes]:
        return [w for w in self.windows if w in data]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    import httpx
    import soundfile as sf

    from tests.server.conftest import LEAKS, ServerProcess, new_key
    from tests.support import voice_like_signal

    keys = {"alice": new_key(), "bob": new_key(), "root": new_key()}
    root = tmp_path_factory.mktemp("auth-fuzz")
    (root / "keys.txt").write_text(f"alice:{keys['alice']}\nbob:{keys['bob']}\nadmin:root:{keys['root']}\n")
    cache = os.environ.get("AUDIOCPP_CACHE_DIR") or str(tmp_path_factory.getbasetemp() / "audiocpp-cache")
    proc = ServerProcess(["--voices-dir", str(root / "voices"), "--api-keys-file", str(root / "keys.txt"),
                          "--access-log", str(root / "access.log"), "--max-body-mb", "1"],
                         root / "serve.log", env={"AUDIOCPP_CACHE_DIR": cache})
    buffer = io.BytesIO()
    sf.write(buffer, voice_like_signal(3, 8000, 16000), 16000, format="WAV", subtype="PCM_16")
    wav = buffer.getvalue()
    r = httpx.post(proc.url + "/v1/audio/voices", headers={"Authorization": f"Bearer {keys['bob']}"},
                   data={"name": "secret", "transcript": "Words."}, files={"file": ("s.wav", wav)})
    assert r.status_code == 201, r.text
    server = Server(proc, keys)
    server.root, server.wav = root, wav  # type: ignore[attr-defined]
    server.secret = next((root / "voices").glob("@*/secret/reference.wav"))  # type: ignore[attr-defined]
    LEAKS.clear()
    yield server
    assert httpx.get(proc.url + "/health").status_code == 200
    proc.stop()  # searches its log, access log and metrics for the keys
    log = (root / "serve.log").read_text(errors="replace")
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]
    assert not LEAKS, LEAKS


# -- one exchange over a raw socket ------------------------------------------------------------------
def exchange(port: int, head: bytes, body: bytes = b"") -> tuple[int | None, bytes, bytes]:
    """(status, head, body) of one request; status None: the connection was closed without an answer.
    A 101 (a WebSocket accepted) returns at once, and the socket is closed."""
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=8) as sock:
        try:
            sock.sendall(head + body)
        except OSError:
            return None, b"", b""
        try:
            while b"\r\n\r\n" not in data and (chunk := sock.recv(1 << 16)):
                data += chunk
            top, _, rest = data.partition(b"\r\n\r\n")
            if not top.startswith(b"HTTP/1.1 "):
                return None, b"", data
            if top.startswith(b"HTTP/1.1 101"):
                return 101, top, b""
            while chunk := sock.recv(1 << 16):  # Connection: close: the server ends the body
                rest += chunk
        except OSError:
            if not data.startswith(b"HTTP/1.1 "):
                return None, b"", b""
            top, _, rest = data.partition(b"\r\n\r\n")
    return int(top[9:12]), top, rest


def request_head(method: str, target: bytes, headers: list[tuple[bytes, bytes]], length: int = 0) -> bytes:
    lines = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    if length:
        lines += [b"Content-Type: application/json", b"Content-Length: " + str(length).encode()]
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def parser_refuses(head: bytes) -> bool:
    """What the HTTP parser (h11) refuses before the application: a head over its limit, or a header
    value with a byte it does not allow (controls but tab, DEL)."""
    if len(head) > HEAD_LIMIT:
        return True
    for line in head.split(b"\r\n")[1:]:
        value = line.partition(b":")[2]
        if any(b < 0x20 and b != 0x09 or b == 0x7F for b in value):
            return True
    return False


def _stripped(value: bytes) -> bytes:
    return value.strip(b" \t")


def bearer_key(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The documented rule: exactly one Authorization header, 'Bearer' in any case, one space, the key
    (spaces and tabs around it ignored)."""
    values = [v for n, v in headers if n.lower() == b"authorization"]
    if len(values) != 1:
        return None
    value = values[0].strip(b" \t\r\n\x0b\x0c")
    if value[:7].lower() != b"bearer " or len(value) < 8:
        return None
    return _stripped(value[7:])


ROUTES = [("GET", b"/v1/models", b""), ("GET", b"/v1/audio/voices", b""),
          ("POST", b"/v1/audio/speech", b'{"input": ""}'), ("DELETE", b"/v1/audio/voices/nosuch", b""),
          ("GET", b"/v1/nothing/here", b""), ("GET", b"/v1/audio/voices/bob/secret", b"")]


def _values(keys: dict[str, str]) -> st.SearchStrategy[bytes]:
    real = [k.encode() for k in keys.values()]
    near = ([k[:-1] for k in real] + [k + b"x" for k in real] + [k[:-1] + bytes([k[-1] ^ 1]) for k in real]
            + [k.upper() for k in real] + [k * 2 for k in real] + [b"", b"x", b"sk-" + b"0" * 48])
    schemes = [b"Bearer ", b"bearer ", b"BEARER ", b"Bearer  ", b"Bearer\t", b" Bearer ", b"Basic ",
               b"Token ", b"", b"Bearer", b"Bearer:"]
    composed = st.builds(lambda a, b, c: a + b + c, st.sampled_from(schemes), st.sampled_from(real + near),
                         st.sampled_from([b"", b" ", b"\t", b"x", b"\x00", b"\xff", b" extra", b"\xc3\xa9"]))
    seeds = {name: b"Bearer " + key.encode() for name, key in keys.items()}
    return st.one_of(
        composed,
        mutated(seeds, max_edits=3).map(lambda case: case[1]),
        st.binary(max_size=96),
        st.text(max_size=40).map(lambda t: b"Bearer " + t.encode("utf-8")),
        st.sampled_from([b"Bearer " + b"a" * (1 << 20), b"Bearer " + base64.b64encode(os.urandom(3000))]),
    ).map(lambda v: v.replace(b"\r", b"").replace(b"\n", b""))


@st.composite
def auth_headers(draw: st.DrawFn, keys: dict[str, str]) -> list[tuple[bytes, bytes]]:
    names = st.sampled_from([b"Authorization", b"authorization", b"AUTHORIZATION", b"X-Api-Key"])
    count = draw(st.one_of(st.integers(0, 3), st.just(64)))
    if count == 64:  # many headers: one valid among them is still several headers
        return [(b"Authorization", b"Bearer " + keys["alice"].encode())] * count
    return [(draw(names), draw(_values(keys))) for _ in range(count)]


@given(data=st.data())
@fuzz_settings("auth_header")
def test_authorization_headers(server: Server, data: st.DataObject) -> None:
    headers = data.draw(auth_headers(server.keys))
    method, target, body = data.draw(st.sampled_from(ROUTES))
    head = request_head(method, target, headers, len(body))
    status, top, rest = check("auth_header", lambda: exchange(server.port, head, body))
    if status is None or (status == 400 and (b"Invalid HTTP request" in rest or not rest)):
        assert parser_refuses(head), (status, head[:300])
        return
    assert status < 500, (status, rest[:300])
    presented = bearer_key(headers)
    valid = presented is not None and presented.decode("latin-1") in server.keys.values()
    assert (status != 401) == valid, (status, headers, rest[:300])
    if status == 401:
        assert json.loads(rest)["error"]["code"] == "invalid_api_key"
        assert b"www-authenticate: Bearer" in top
    assert not server.leaks(top + rest), (headers, rest[:300])
    for _, value in headers:
        credential = value.partition(b" ")[2]
        if len(credential) >= 12 and len(set(credential)) >= 4:
            assert credential not in rest, (value, rest[:300])


def _encodings(key: str) -> st.SearchStrategy[str]:
    every = "".join(f"%{b:02X}" for b in key.encode())
    lower = "".join(f"%{b:02x}" for b in key.encode())
    return st.sampled_from([key, every, lower, quote(quote(key + "=")), key.replace("-", "%2D"), key + "%00",
                            key[:-1], key + "+", "+" + key, key + "%C0%AF", "%C3%A9" + key, key.upper(),
                            every[:-3], "", "%", "%G0", "%" + key, key + "&api_key=" + key, key * 2,
                            "a" * 20000])


@st.composite
def queries(draw: st.DrawFn, keys: dict[str, str]) -> str:
    key = draw(st.sampled_from(sorted(keys.values())))
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(["api_key", "API_KEY", "apikey", "api_key[]", "api%5Fkey", "model",
                                     "api_key ", "x"]))
        value = draw(st.one_of(_encodings(key), st.text(max_size=20).map(lambda t: quote(t, safe=""))))
        parts.append(f"{name}={value}")
    if draw(st.booleans()):
        printable = st.characters(min_codepoint=0x21, max_codepoint=0x7E)
        parts.append(draw(st.text(alphabet=printable, max_size=30)))
    return "&".join(parts)


def query_key(query: str) -> str | None:
    """The documented rule for a WebSocket without an Authorization header: exactly one ``api_key``
    parameter (names are exact; values percent-decoded once as UTF-8, + is a space)."""
    values = [v for n, v in parse_qsl(query, keep_blank_values=True) if n == "api_key"]
    return values[0] if len(values) == 1 else None


@given(data=st.data())
@fuzz_settings("auth_query")
def test_websocket_query_keys(server: Server, data: st.DataObject) -> None:
    query = data.draw(queries(server.keys))
    header = data.draw(st.sampled_from([None, None, "alice", "wrong"]))
    headers = [(b"Upgrade", b"websocket"), (b"Connection", b"Upgrade"),
               (b"Sec-WebSocket-Key", b"dGhlIHNhbXBsZSBub25jZQ=="), (b"Sec-WebSocket-Version", b"13")]
    if header is not None:
        key = server.keys["alice"] if header == "alice" else server.keys["alice"][::-1]
        headers.append((b"Authorization", b"Bearer " + key.encode()))
    target = b"/v1/audio/speech/stream" + (b"?" + query.encode() if query else b"")
    head = request_head("GET", target, headers).replace(b"Connection: close\r\n", b"")
    status, top, rest = check("auth_query", lambda: exchange(server.port, head))
    if status is None or (status == 400 and (b"Invalid HTTP request" in rest or not rest)):
        assert len(head) > HEAD_LIMIT or any(b <= 0x20 or b >= 0x7F for b in target), (status, target[:200])
        return
    assert status < 500, (status, rest[:300])
    if status == 414:  # the WebSocket handshake's parser (websockets) reads lines of at most 8 KiB
        assert len(target) > WS_LINE_LIMIT, (status, target[:200])
        assert not server.leaks(top + rest), (query, rest[:300])
        return
    if header is not None:
        valid = header == "alice"
    else:
        presented = query_key(query)
        valid = presented is not None and presented in server.keys.values()
    assert (status == 101) == valid, (status, query, header, rest[:300])
    if status != 101:
        assert status == 401 and json.loads(rest)["error"]["code"] == "invalid_api_key", (status, rest)
    assert not server.leaks(top + rest), (query, rest[:300])


NAMES = st.one_of(
    st.sampled_from(["..", "../secret", "../../keys.txt", "bob/secret", "bob/../secret", "@x/secret",
                     "secret\x00", "/etc/passwd", "~" + "0" * 32 + "/secret", "secret/", "./secret", "x" * 70,
                     "x" * 5000, "sécret", "a\\b", "%2e%2e", "C:\\x", "secret" + "\u202e"]),
    st.text(max_size=24),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,12}", fullmatch=True),  # names that are valid
    st.just("secret"),  # bob's voice's name: the admin's own upload of it, never bob's voice
)


@given(data=st.data())
@fuzz_settings("auth_names")
def test_voice_names(server: Server, data: st.DataObject) -> None:
    """As alice (and as the admin key for uploads): any name in a path, a body's voice, {"id": ...} or
    an upload; bob's voice stays his and unread, nothing appears outside the voices folder."""
    name = data.draw(NAMES)
    where = data.draw(st.sampled_from(["get", "delete", "voice", "id", "upload"]))
    key = server.keys["root" if where == "upload" else "alice"]
    auth = [(b"Authorization", b"Bearer " + key.encode())]
    root: Path = server.root  # type: ignore[attr-defined]
    around = sorted(p.name for p in root.iterdir())
    if where in ("get", "delete"):
        target = b"/v1/audio/voices/" + quote(name, safe="").encode()
        head, body = request_head(where.upper(), target, auth), b""
    elif where in ("voice", "id"):  # sample_rate 1 is refused after the voice: nothing is synthesized
        body = json.dumps({"input": "x", "voice": name if where == "voice" else {"id": name},
                           "sample_rate": 1}).encode()
        head = request_head("POST", b"/v1/audio/speech", auth, len(body))
    else:
        boundary = b"fuzzboundary"
        part = b"--" + boundary + b'\r\nContent-Disposition: form-data; name="'
        body = (part + b'name"\r\n\r\n' + name.encode() + b"\r\n"
                + part + b'transcript"\r\n\r\nWords.\r\n'
                + part + b'file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n'
                + server.wav  # type: ignore[attr-defined]
                + b"\r\n--" + boundary + b"--\r\n")
        head = request_head("POST", b"/v1/audio/voices", auth, len(body)).replace(
            b"Content-Type: application/json", b"Content-Type: multipart/form-data; boundary=" + boundary)
    status, top, rest = check("auth_names", lambda: exchange(server.port, head, body))
    assert status is not None and status < 500, (status, name, where, rest[:300])
    assert status in (200, 201, 400, 404, 409), (status, name, where, rest[:300])
    if where == "delete" and status == 200:  # only a real voice of alice's (she has none): never bob's
        raise AssertionError(f"alice deleted {name!r}")
    if where in ("voice", "id") and status == 400:  # alice resolves only the built-in names
        from audiocpp.server.voices import BUILTIN_VOICES

        param = json.loads(rest)["error"]["param"]
        builtin = isinstance(name, str) and name.strip().lower() in BUILTIN_VOICES
        assert param == ("sample_rate" if builtin else "voice"), (name, rest[:300])
    if status == 201:  # a valid new name: stored for the admin key, then removed again
        voice = json.loads(rest)["id"]
        cleanup = request_head("DELETE", b"/v1/audio/voices/" + quote(voice, safe="").encode(), auth)
        assert exchange(server.port, cleanup)[0] == 200
    assert server.secret.read_bytes() == server.wav  # type: ignore[attr-defined]
    assert sorted(p.name for p in root.iterdir()) == around
    voices = root / "voices"
    assert all(p.name.startswith((".", "@")) or p.is_dir() for p in voices.iterdir())
    assert not server.leaks(top + rest), (name, rest[:300])


def test_bobs_voice_survived(server: Server) -> None:
    """After the names target: bob still lists and clones with his voice (a last check that no name
    reached it)."""
    import httpx

    auth = {"Authorization": f"Bearer {server.keys['bob']}"}
    listed = httpx.get(server.proc.url + "/v1/audio/voices", headers=auth).json()["voices"]
    assert "secret" in {v["id"] for v in listed}
    started = time.monotonic()
    r = httpx.post(server.proc.url + "/v1/audio/speech", headers=auth, timeout=120,
                   json={"input": "Hi.", "voice": "secret", "num_inference_steps": 1})
    assert r.status_code == 200 and time.monotonic() - started < 60
