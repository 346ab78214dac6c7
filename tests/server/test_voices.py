"""Stored voices: uploaded with the ``openai`` client, used for cloning (the same audio as the
CLI's ``--task clon`` with that file and transcript), reused through the saved voice prompt,
kept across a restart, deleted."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import soundfile as sf

from tests.support import cli_ok, voice_like_signal

from .conftest import FAST, ServerProcess

TRANSCRIPT = "This is the reference voice."
TEXT = "Cloned words."
SEED = 5


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ref") / "me.wav"
    sf.write(path, voice_like_signal(7, 2 * 16000, 16000), 16000, subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def cli_clone(tmp_path_factory: pytest.TempPathFactory, reference: Path) -> bytes:
    out = tmp_path_factory.mktemp("cli-clone") / "clone.wav"
    cli_ok("--family", "omnivoice", "--task", "clon", "--voice-ref", reference,
           "--reference-text", TRANSCRIPT, "--text", TEXT, "--seed", str(SEED), "-r", "num_inference_steps=4",
           "--out", out)
    return out.read_bytes()


def _speak(client, voice: str) -> bytes:
    return client.audio.speech.create(model="omnivoice-demo", voice=voice, input=TEXT, response_format="wav",
                                      extra_body={"seed": SEED, **FAST}).content


def test_upload_use_reuse_restart_delete(server: ServerProcess, client, reference: Path, cli_clone: bytes,
                                         voices_dir: Path, server_cache: dict[str, str],
                                         tmp_path: Path) -> None:
    with open(reference, "rb") as fh:
        voice = client.audio.voices.create(name="alice", audio_sample=fh, consent="recorded-with-consent",
                                           extra_body={"transcript": TRANSCRIPT})
    assert voice.id == "alice" and voice.object == "audio.voice" and voice.type == "audio_sample"
    listed = {v["name"]: v for v in httpx.get(server.url + "/v1/audio/voices").json()["voices"]}
    assert listed["alice"]["transcript"] == TRANSCRIPT and listed["alice"]["sample_rate"] == 16000
    assert listed["alice"]["duration_s"] == pytest.approx(2.0)
    assert "default" in listed
    stored = server.voice_folder(voices_dir, "alice")
    assert (stored / "reference.wav").read_bytes() == reference.read_bytes()

    assert _speak(client, "alice") == cli_clone  # from the audio and transcript
    prompts = list((stored / "prompts").glob("*.prompt"))
    assert len(prompts) == 1  # the engine's voice-prompt file, saved by the first use
    assert _speak(client, "alice") == cli_clone  # from the saved prompt
    assert list((stored / "prompts").glob("*.prompt")) == prompts

    restarted = ServerProcess(["--voices-dir", str(voices_dir)], tmp_path / "restart.log", env=server_cache,
                              api_key=server.api_key, inject=True)
    try:
        from openai import OpenAI

        other = OpenAI(base_url=restarted.url + "/v1", api_key=restarted.client_key, max_retries=0,
                       timeout=120)
        assert "alice" in {v["name"] for v in httpx.get(restarted.url + "/v1/audio/voices").json()["voices"]}
        assert _speak(other, "alice") == cli_clone
    finally:
        restarted.stop()

    deleted = client.audio.voices.delete("alice")
    assert deleted.id == "alice" and deleted.deleted
    assert not stored.exists()
    r = httpx.post(server.url + "/v1/audio/speech", json={"input": TEXT, "voice": "alice"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "voice_not_found"


def _upload(server: ServerProcess, name: str, data: bytes, transcript: str = TRANSCRIPT, field: str = "file"):
    return httpx.post(server.url + "/v1/audio/voices", data={"name": name, "transcript": transcript},
                      files={field: ("x.wav", data, "audio/wav")}, timeout=60)


@pytest.mark.parametrize("name", ["../evil", "a/b", "..", ".hidden", "default", "Alloy", "", "x" * 65, "a b"])
def test_bad_voice_names_are_refused(server: ServerProcess, reference: Path, voices_dir: Path,
                                     name: str) -> None:
    r = _upload(server, name, reference.read_bytes())
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "name" and error["type"] == "invalid_request_error"
    assert not (voices_dir.parent / "evil").exists()


def test_bad_uploads_are_refused(server: ServerProcess, reference: Path) -> None:
    cases = {
        "not audio": (_upload(server, "v1", b"this is not audio at all" * 10), 400, "invalid_audio"),
        "empty": (_upload(server, "v2", b""), 400, "invalid_audio"),
        "truncated": (_upload(server, "v3", reference.read_bytes()[:30]), 400, "invalid_audio"),
        "too large": (_upload(server, "v4", b"\0" * (1 << 20) + reference.read_bytes()), 413,
                      "body_too_large"),
        "no file": (httpx.post(server.url + "/v1/audio/voices", data={"name": "v5"},
                               files={"other": ("x", b"1")}), 400, "missing_field"),
        "json body": (httpx.post(server.url + "/v1/audio/voices", json={"name": "v6"}), 415,
                      "unsupported_media_type"),
    }
    for what, (response, status, code) in cases.items():
        assert response.status_code == status, (what, response.text)
        assert response.json()["error"]["code"] == code, what
    voices = {v["name"] for v in httpx.get(server.url + "/v1/audio/voices").json()["voices"]}
    assert not voices & {"v1", "v2", "v3", "v4", "v5", "v6"}


def test_duplicate_and_unknown_voices(server: ServerProcess, reference: Path) -> None:
    assert _upload(server, "bob", reference.read_bytes()).status_code == 201
    again = _upload(server, "bob", reference.read_bytes())
    assert again.status_code == 409 and again.json()["error"]["code"] == "voice_exists"
    assert httpx.delete(server.url + "/v1/audio/voices/bob").status_code == 200
    for name in ("bob", "nobody", "..%2F..%2Fetc"):
        r = httpx.delete(server.url + f"/v1/audio/voices/{name}")
        assert r.status_code in (400, 404), (name, r.text)
        assert "error" in r.json()


def _wav(seconds: float, rate: int = 16000) -> bytes:
    import io

    buffer = io.BytesIO()
    sf.write(buffer, voice_like_signal(3, int(seconds * rate), rate), rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def test_voices_that_can_never_work_are_refused(server: ServerProcess, client, voices_dir: Path) -> None:
    """OmniVoice clones only with the reference's transcript: an upload without one (what OpenAI's own
    voices.create sends) is a 400 saying so; a near-empty file too, and an empty one without showing a
    path of the server. None of them is listed; a listed voice is usable."""
    import io

    import openai

    with pytest.raises(openai.BadRequestError) as info:
        client.audio.voices.create(name="untranscribed", audio_sample=("me.wav", io.BytesIO(_wav(2.0))),
                                   consent="recorded-with-consent")
    error = info.value.body
    assert error["param"] == "transcript" and "OmniVoice" in error["message"], error
    short = _upload(server, "blip", _wav(0.05))
    assert short.status_code == 400 and "too short" in short.json()["error"]["message"], short.text
    empty = _upload(server, "hollow", _wav(0.0))
    message = empty.json()["error"]["message"]
    assert empty.status_code == 400 and "holds no samples" in message, message
    assert str(voices_dir) not in message and "/tmp" not in message and ".upload-" not in message, message
    listed = {v["name"]: v for v in httpx.get(server.url + "/v1/audio/voices").json()["voices"]}
    assert not {"untranscribed", "blip", "hollow"} & set(listed)
    assert all(v["models"] == ["omnivoice-demo"] for v in listed.values()), listed


def test_a_stored_voice_without_a_transcript_is_not_offered(server: ServerProcess, voices_dir: Path,
                                                             reference: Path) -> None:
    """A voice an earlier version stored without a transcript: not listed; using it is a 400 before
    anything runs, naming the field that makes it work (reference_text), which then does."""
    import json

    folder = voices_dir / "legacy"
    (folder / "prompts").mkdir(parents=True)
    (folder / "reference.wav").write_bytes(reference.read_bytes())
    (folder / "voice.json").write_text(json.dumps({"name": "legacy", "transcript": "", "sample_rate": 16000,
                                                   "duration_s": 2.0, "reference": "reference.wav"}))
    try:
        names = {v["name"] for v in httpx.get(server.url + "/v1/audio/voices").json()["voices"]}
        assert "legacy" not in names
        body = {"input": TEXT, "voice": "legacy", "seed": SEED, **FAST}
        r = httpx.post(server.url + "/v1/audio/speech", json=body, timeout=120)
        error = r.json()["error"]
        assert r.status_code == 400 and error["code"] == "voice_unusable" and error["param"] == "voice"
        assert "reference_text" in error["message"] and "--" not in error["message"], error
        body["reference_text"] = TRANSCRIPT
        r = httpx.post(server.url + "/v1/audio/speech", json=body, timeout=120)
        assert r.status_code == 200, r.text
    finally:
        import shutil

        shutil.rmtree(folder)
