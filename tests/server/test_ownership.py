"""Voices belong to the key that stored them, against a real ``audiocpp serve`` with keys: key A cannot
see, use, overwrite or delete key B's voice (by name, by ``{"id": ...}``, by ``owner/name``, in a
WebSocket session, through ``ref_audio`` naming a stored file): it gets exactly what a name nobody uses
gets. Two keys each have a voice called ``me``. The admin key sees, uses and deletes every voice. Voices
an earlier version stored are shared and kept byte for byte; folders and files are private (0700/0600);
names cannot leave the folder (traversal, NUL bytes, long names, symbolic links); at most
``--max-voices-per-key`` voices a key; Wyoming, which has no keys, offers only the shared voices."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import stat
from pathlib import Path

import httpx
import pytest
import soundfile as sf
import websockets
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info

from tests.support import cli_ok, voice_like_signal

from .conftest import FAST, LEGACY_TRANSCRIPT, Keys, ServerProcess, write_legacy_voice

TEXT = "Cloned words."
SEED = 5


def _wav(seed: int, seconds: float, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, voice_like_signal(seed, int(seconds * rate), rate), rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


A_AUDIO, B_AUDIO = _wav(1, 1.5), _wav(2, 2.0)


def upload(server: ServerProcess, key: str, name: str, data: bytes = A_AUDIO,
           **fields: str) -> httpx.Response:
    return httpx.post(server.url + "/v1/audio/voices", headers={"Authorization": f"Bearer {key}"},
                      timeout=60, data={"name": name, "transcript": LEGACY_TRANSCRIPT, **fields},
                      files={"file": ("x.wav", data, "audio/wav")})


def speak(server: ServerProcess, key: str, voice, **body) -> httpx.Response:
    return httpx.post(server.url + "/v1/audio/speech", headers={"Authorization": f"Bearer {key}"},
                      timeout=120, json={"input": TEXT, "voice": voice, "seed": SEED, **FAST, **body})


def call(server: ServerProcess, key: str, method: str, name: str) -> httpx.Response:
    return httpx.request(method, f"{server.url}/v1/audio/voices/{name}", timeout=60,
                         headers={"Authorization": f"Bearer {key}"})


def listed(server: ServerProcess, key: str) -> dict[str, dict]:
    r = httpx.get(server.url + "/v1/audio/voices", headers={"Authorization": f"Bearer {key}"}, timeout=60)
    assert r.status_code == 200, r.text
    return {v["id"]: v for v in r.json()["voices"] if v["stored"]}


def owner_folder(server: ServerProcess, key: str) -> Path:
    from audiocpp.server.auth import KeyRing

    voices: Path = server.voices_dir  # type: ignore[attr-defined]
    salt = bytes.fromhex((voices / ".owner-salt").read_text().strip())
    return voices / f"@{KeyRing(salt).owner_id(key)}"


def same_answer(a: httpx.Response, b: httpx.Response, a_name: str, b_name: str) -> None:
    """``a`` (about a voice of another key) is what ``b`` (a name nobody uses) is, but for the name."""
    assert a.status_code == b.status_code, (a.text, b.text)
    assert a.text.replace(a_name, "NAME") == b.text.replace(b_name, "NAME"), (a.text, b.text)


def test_two_keys_each_have_their_own_me(keyed_server: ServerProcess, keys: Keys) -> None:
    for key, data in ((keys.alice, A_AUDIO), (keys.bob, B_AUDIO)):
        r = upload(keyed_server, key, "me", data)
        assert r.status_code == 201, r.text
        assert r.json()["id"] == "me" and r.json()["shared"] is False
    assert listed(keyed_server, keys.alice)["me"]["duration_s"] == pytest.approx(1.5)
    assert listed(keyed_server, keys.bob)["me"]["duration_s"] == pytest.approx(2.0)
    assert listed(keyed_server, keys.alice)["me"]["owner"] == "alice"
    assert call(keyed_server, keys.bob, "GET", "me").json()["duration_s"] == pytest.approx(2.0)
    assert (owner_folder(keyed_server, keys.alice) / "me" / "reference.wav").read_bytes() == A_AUDIO
    assert (owner_folder(keyed_server, keys.bob) / "me" / "reference.wav").read_bytes() == B_AUDIO
    alice, bob = speak(keyed_server, keys.alice, "me"), speak(keyed_server, keys.bob, "me")
    assert alice.status_code == bob.status_code == 200
    assert alice.content != bob.content  # each key clones its own voice
    assert speak(keyed_server, keys.alice, {"id": "me"}).content == alice.content
    for key in (keys.alice, keys.bob):
        assert call(keyed_server, key, "DELETE", "me").status_code == 200
    assert "me" not in listed(keyed_server, keys.alice)


def test_another_keys_voice_is_a_name_nobody_uses(keyed_server: ServerProcess, keys: Keys) -> None:
    assert upload(keyed_server, keys.alice, "secret").status_code == 201
    own = speak(keyed_server, keys.alice, "secret")
    assert own.status_code == 200
    reference = owner_folder(keyed_server, keys.alice) / "secret" / "reference.wav"

    assert "secret" not in listed(keyed_server, keys.bob)
    for method in ("GET", "DELETE"):
        same_answer(call(keyed_server, keys.bob, method, "secret"),
                    call(keyed_server, keys.bob, method, "nosuch"), "secret", "nosuch")
        assert call(keyed_server, keys.bob, method, "secret").status_code == 404
    for voice, nobody in (("secret", "nosuch"), ({"id": "secret"}, {"id": "nosuch"}),
                          ("alice/secret", "alice/nosuch")):
        answer = speak(keyed_server, keys.bob, voice)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "voice_not_found"
        same_answer(answer, speak(keyed_server, keys.bob, nobody), "secret", "nosuch")
    # ref_audio never names a file: not the voice, not its folder, not the path of its upload
    for value in ("secret", "alice/secret", f"{reference.parent.parent.name}/secret/reference.wav",
                  str(reference), f"file://{reference}", "data:audio/wav;base64," +
                  base64.b64encode(str(reference).encode()).decode()):
        answer = speak(keyed_server, keys.bob, "alloy", ref_audio=value, ref_text=LEGACY_TRANSCRIPT)
        assert answer.status_code == 400, (value, answer.text)
        assert answer.json()["error"]["param"] == "ref_audio", (value, answer.text)

    async def session(key: str) -> list:
        url = keyed_server.url.replace("http", "ws", 1) + "/v1/audio/speech/stream"
        received = []
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as ws:
            await ws.send(json.dumps({"type": "session.config", "voice": "secret", "seed": SEED, **FAST}))
            await ws.send(json.dumps({"type": "input.text", "text": "Hello there."}))
            await ws.send(json.dumps({"type": "input.done"}))
            async for message in ws:
                received.append(message if isinstance(message, bytes) else json.loads(message))
        return received

    refused = asyncio.run(session(keys.bob))
    assert refused == [refused[0]] and refused[0]["code"] == "voice_not_found", refused
    spoken = asyncio.run(session(keys.alice))
    assert spoken[-1]["type"] == "session.done" and any(isinstance(m, bytes) for m in spoken)

    # bob's own "secret" is his; alice's is untouched, and deleting bob's leaves hers
    assert upload(keyed_server, keys.bob, "secret", B_AUDIO).status_code == 201
    assert reference.read_bytes() == A_AUDIO
    assert speak(keyed_server, keys.alice, "secret").content == own.content
    assert call(keyed_server, keys.bob, "DELETE", "secret").status_code == 200
    assert call(keyed_server, keys.bob, "DELETE", "secret").status_code == 404
    assert speak(keyed_server, keys.alice, "secret").content == own.content
    assert call(keyed_server, keys.alice, "DELETE", "secret").status_code == 200


def test_the_admin_key_sees_uses_and_deletes_every_voice(keyed_server: ServerProcess, keys: Keys) -> None:
    assert upload(keyed_server, keys.alice, "mine").status_code == 201
    everything = listed(keyed_server, keys.root)
    assert everything["alice/mine"]["owner"] == "alice" and everything["alice/mine"]["name"] == "mine"
    assert everything["legacy"]["shared"] is True and everything["legacy"]["owner"] is None
    as_admin = speak(keyed_server, keys.root, "alice/mine")
    assert as_admin.status_code == 200 and as_admin.content == speak(keyed_server, keys.alice, "mine").content
    assert call(keyed_server, keys.root, "GET", "alice/mine").json()["id"] == "alice/mine"
    deleted = call(keyed_server, keys.root, "DELETE", "alice/mine")
    assert deleted.status_code == 200 and deleted.json()["id"] == "alice/mine", deleted.text
    assert call(keyed_server, keys.alice, "GET", "mine").status_code == 404

    # shared voices: an admin stores them; every key uses them; only an admin deletes them
    refused = upload(keyed_server, keys.alice, "common", shared="true")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_only"
    assert upload(keyed_server, keys.root, "common", shared="true").status_code == 201
    for key in (keys.alice, keys.bob):
        assert listed(keyed_server, key)["common"]["shared"] is True
        assert speak(keyed_server, key, "common").status_code == 200
    clash = upload(keyed_server, keys.bob, "common")
    assert clash.status_code == 409 and "shared" in clash.json()["error"]["message"]
    denied = call(keyed_server, keys.bob, "DELETE", "common")
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "admin_only"
    assert call(keyed_server, keys.root, "DELETE", "common").status_code == 200


def test_voices_stored_before_keys_are_shared_and_kept(keyed_server: ServerProcess, keys: Keys,
                                                       tmp_path: Path) -> None:
    """The fixture's voices folder was written as the version before keys wrote it (0755/0644): every
    key clones with its voice (the CLI's clone of that audio and transcript, byte for byte), its files
    are unchanged and now private, only an admin deletes it."""
    voices: Path = keyed_server.voices_dir  # type: ignore[attr-defined]
    expected = write_legacy_voice(tmp_path, "legacy")
    legacy = voices / "legacy"
    for name in ("reference.wav", "voice.json"):
        assert (legacy / name).read_bytes() == (expected / name).read_bytes(), name
        assert stat.S_IMODE((legacy / name).stat().st_mode) == 0o600, name
    for folder in (voices, legacy, legacy / "prompts"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    out = tmp_path / "clone.wav"
    cli_ok("--family", "omnivoice", "--task", "clon", "--voice-ref", expected / "reference.wav",
           "--reference-text", LEGACY_TRANSCRIPT, "--text", TEXT, "--seed", str(SEED), "-r",
           f"num_inference_steps={FAST['num_inference_steps']}", "--out", out)
    for key in (keys.alice, keys.bob, keys.carol):
        assert listed(keyed_server, key)["legacy"]["shared"] is True
        assert speak(keyed_server, key, "legacy").content == out.read_bytes()
    prompts = list((legacy / "prompts").glob("*.prompt"))
    assert len(prompts) == 1 and stat.S_IMODE(prompts[0].stat().st_mode) == 0o600  # one prompt, shared
    denied = call(keyed_server, keys.alice, "DELETE", "legacy")
    assert denied.status_code == 403 and "admin" in denied.json()["error"]["message"]
    assert legacy.is_dir()
    assert call(keyed_server, keys.root, "DELETE", "old").status_code == 200
    assert not (voices / "old").exists()


def test_files_are_private_to_the_server(keyed_server: ServerProcess, keys: Keys) -> None:
    assert upload(keyed_server, keys.carol, "private").status_code == 201
    assert speak(keyed_server, keys.carol, "private").status_code == 200  # saves a voice prompt
    voices: Path = keyed_server.voices_dir  # type: ignore[attr-defined]
    owner = owner_folder(keyed_server, keys.carol)
    assert stat.S_IMODE((voices / ".owner-salt").stat().st_mode) == 0o600
    modes = {}
    for root, _dirs, files in os.walk(owner):
        modes[root] = stat.S_IMODE(os.stat(root).st_mode)
        for name in files:
            modes[os.path.join(root, name)] = stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode)
    assert any(p.endswith(".prompt") for p in modes) and any(p.endswith("voice.json") for p in modes), modes
    bad = {p: oct(m) for p, m in modes.items() if m != (0o700 if os.path.isdir(p) else 0o600)}
    assert not bad, bad
    assert call(keyed_server, keys.carol, "DELETE", "private").status_code == 200


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "a\x00b", "x" * 65, "y" * 10000, "@" + "0" * 32,
                                  "~x", ".hidden", "a\\b", "é"])
def test_upload_names_cannot_escape(keyed_server: ServerProcess, keys: Keys, name: str) -> None:
    voices: Path = keyed_server.voices_dir  # type: ignore[attr-defined]
    around = sorted(p.name for p in voices.parent.iterdir())
    r = upload(keyed_server, keys.alice, name)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_voice_name", r.text
    assert len(r.text) < 600  # a long name is not sent back whole
    assert sorted(p.name for p in voices.parent.iterdir()) == around


@pytest.mark.parametrize(("path", "status"), [
    ("%2e%2e%2f%2e%2e%2fkeys.txt", 400), ("..%2F..%2Fetc%2Fpasswd", 400), ("a%00b", 400), ("z" * 5000, 400),
    ("alice/..%2Fx", 400), ("%2F", 400), ("alice/nosuch", 404), ("~" + "0" * 32 + "/legacy", 404),
])
def test_paths_cannot_escape(keyed_server: ServerProcess, keys: Keys, path: str, status: int) -> None:
    for method in ("GET", "DELETE"):
        r = call(keyed_server, keys.bob, method, path)
        assert r.status_code == status, (method, path, r.text)
        assert r.json()["error"]["code"] == ("invalid_voice_name" if status == 400 else "voice_not_found")
    for voice in ("../../keys.txt", "a\x00b", "w" * 100000):
        r = speak(keyed_server, keys.bob, voice)
        assert r.status_code == 400 and r.json()["error"]["code"] == "voice_not_found" and len(r.text) < 600


def test_symbolic_links_are_never_followed(keyed_server: ServerProcess, keys: Keys, tmp_path: Path) -> None:
    voices: Path = keyed_server.voices_dir  # type: ignore[attr-defined]
    outside = write_legacy_voice(tmp_path / "outside", "elsewhere")
    before = {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()}
    (voices / "linked").symlink_to(outside, target_is_directory=True)
    half = voices / "halflinked"
    half.mkdir()
    (half / "prompts").mkdir()
    (half / "voice.json").write_text((outside / "voice.json").read_text())
    (half / "reference.wav").symlink_to(outside / "reference.wav")
    mine = owner_folder(keyed_server, keys.alice)
    mine.mkdir(exist_ok=True, mode=0o700)
    (mine / "planted").symlink_to(tmp_path / "outside", target_is_directory=True)
    try:
        for key in (keys.alice, keys.root):
            assert not {"linked", "halflinked", "planted"} & set(listed(keyed_server, key))
        for voice in ("linked", "halflinked", "planted"):
            r = speak(keyed_server, keys.alice, voice)
            assert r.status_code == 400 and r.json()["error"]["code"] == "voice_not_found", r.text
            assert call(keyed_server, keys.root, "DELETE", voice).status_code == 404
        clash = upload(keyed_server, keys.alice, "planted")
        assert clash.status_code == 409, clash.text
        assert {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()} == before
        assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["elsewhere"]
    finally:
        for link in (voices / "linked", half / "reference.wav", mine / "planted"):
            link.unlink()
        for path in (half / "voice.json",):
            path.unlink()
        (half / "prompts").rmdir()
        half.rmdir()


def test_at_most_max_voices_per_key(keyed_server: ServerProcess, keys: Keys) -> None:
    names = [f"v{i}" for i in range(4)]
    for name in names:
        assert upload(keyed_server, keys.erin, name).status_code == 201
    full = upload(keyed_server, keys.erin, "v4")
    assert full.status_code == 403 and full.json()["error"]["code"] == "voice_limit_reached", full.text
    assert upload(keyed_server, keys.bob, "v4").status_code == 201  # another key has its own count
    assert call(keyed_server, keys.erin, "DELETE", "v0").status_code == 200
    assert upload(keyed_server, keys.erin, "v4").status_code == 201
    for key, name in [(keys.erin, n) for n in names[1:] + ["v4"]] + [(keys.bob, "v4")]:
        assert call(keyed_server, key, "DELETE", name).status_code == 200


def test_wyoming_offers_only_the_shared_voices(keyed_server: ServerProcess, keys: Keys) -> None:
    assert upload(keyed_server, keys.alice, "hidden").status_code == 201
    port = keyed_server.wyoming_port  # type: ignore[attr-defined]
    assert f"Wyoming on tcp://127.0.0.1:{port}" in keyed_server.log()  # this machine by default

    async def describe() -> Info:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            while True:
                event = await client.read_event()
                if Info.is_type(event.type):
                    return Info.from_event(event)

    voices = {v.name for v in asyncio.run(describe()).tts[0].voices}
    shared = {name for name, v in listed(keyed_server, keys.root).items() if v["shared"]}
    assert "hidden" not in voices and {"default", "legacy"} <= voices, voices
    assert voices - {"default"} <= shared, voices
    assert call(keyed_server, keys.alice, "DELETE", "hidden").status_code == 200
