"""Stored voices: uploaded reference audio + transcript, and the voice prompts prepared from them.

Layout under the voices folder (it survives restarts)::

    <name>/voice.json              name, transcript, sample rate, duration, created
    <name>/reference.<wav|flac|…>  the uploaded file, byte for byte (checked decodable)
    <name>/prompts/<key>.prompt    the engine's voice-prompt file, per model and options

A voice is used as a clone reference. The first request that clones with it on a model whose
family prepares voice prompts saves the prompt (``TaskResult.voice_prompt``) under a key of
the model's weights and the request's options (all but the seed, since a prompt depends on
options such as reference preprocessing); later requests with the same key pass the saved
prompt instead of the audio, and skip re-encoding the reference, also after a restart.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audiocpp.engine.errors import AudiocppError

from .errors import ApiError, engine_message

VOICE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
#: OpenAI's built-in voice names: they mean the family's own voice, so unmodified clients work.
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer",
                 "verse", "marin", "cedar")
BUILTIN_VOICES = ("default", *OPENAI_VOICES)
MAX_TRANSCRIPT_CHARS = 4000
MAX_VOICE_SECONDS = 120.0
#: The shortest reference a voice may have: a near-empty upload is refused instead of stored unusable
#: (OmniVoice's codec cannot encode under 40 ms; the tiny test models clone from 0.15 s).
MIN_VOICE_SECONDS = 0.1
MAX_PROMPTS_PER_VOICE = 8
_EXTENSIONS = {"WAV": "wav", "FLAC": "flac", "OGG": "ogg", "MP3": "mp3"}


@dataclass
class StoredVoice:
    name: str
    folder: Path
    transcript: str
    sample_rate: int
    duration_s: float
    created: float
    reference: Path

    def describe(self) -> dict[str, Any]:
        """OpenAI's ``audio.voice`` object (the id is the name) plus what we store."""
        return {"id": self.name, "object": "audio.voice", "name": self.name, "type": "audio_sample",
                "created_at": int(self.created), "stored": True, "transcript": self.transcript,
                "sample_rate": self.sample_rate, "duration_s": round(self.duration_s, 3)}

    def prompt_path(self, model_key: str, options: dict[str, Any]) -> Path:
        blob = json.dumps({k: str(v) for k, v in sorted(options.items()) if k != "seed"})
        digest = hashlib.sha256(blob.encode()).hexdigest()[:12]
        return self.folder / "prompts" / f"{model_key}-{digest}.prompt"


def check_name(name: str) -> None:
    if not isinstance(name, str) or not VOICE_NAME_RE.match(name):
        raise ApiError(400, f"voice name {name!r} is not allowed: use 1-64 letters, digits, '-' or '_' "
                       "starting with a letter or digit", param="name", code="invalid_voice_name")
    if name.lower() in BUILTIN_VOICES:
        raise ApiError(400, f"voice name {name!r} is a built-in voice name; choose another",
                       param="name", code="invalid_voice_name")


class VoiceStore:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).expanduser()
        self.folder.mkdir(parents=True, exist_ok=True)

    def _dir(self, name: str) -> Path:
        check_name(name)
        return self.folder / name

    def get(self, name: str) -> StoredVoice | None:
        if not isinstance(name, str) or not VOICE_NAME_RE.match(name):
            return None
        folder = self.folder / name
        try:
            meta = json.loads((folder / "voice.json").read_text(encoding="utf-8"))
            return StoredVoice(name=name, folder=folder, transcript=str(meta.get("transcript") or ""),
                               sample_rate=int(meta["sample_rate"]), duration_s=float(meta["duration_s"]),
                               created=float(meta.get("created", 0)),
                               reference=folder / str(meta["reference"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def list(self) -> list[StoredVoice]:
        voices = []
        for entry in sorted(self.folder.iterdir()) if self.folder.is_dir() else []:
            if entry.is_dir() and not entry.name.startswith("."):
                voice = self.get(entry.name)
                if voice is not None:
                    voices.append(voice)
        return voices

    def add(self, name: str, data: bytes, transcript: str) -> StoredVoice:
        """Check and store an upload atomically (a temporary folder renamed into place)."""
        target = self._dir(name)
        if len(transcript) > MAX_TRANSCRIPT_CHARS:
            raise ApiError(400, f"the transcript is longer than {MAX_TRANSCRIPT_CHARS} characters",
                           param="transcript", code="invalid_value")
        if target.exists():
            raise ApiError(409, f"voice {name!r} already exists; delete it first", param="name",
                           code="voice_exists")
        if not data:
            raise ApiError(400, "the uploaded file is empty", param="file", code="invalid_audio")
        tmp = self.folder / f".upload-{secrets.token_hex(6)}"
        tmp.mkdir()
        try:
            upload = tmp / "upload"
            upload.write_bytes(data)
            audio_format = _format_of(upload)
            reference = tmp / f"reference.{audio_format}"
            upload.rename(reference)
            from audiocpp.engine.audio.io import read_audio

            try:
                audio = read_audio(reference)
            except AudiocppError as error:
                raise ApiError(400, "the uploaded file is not decodable audio: "
                               f"{_without_path(error, reference, 'the upload')}",
                               param="file", code="invalid_audio") from None
            check_duration(audio.duration, "the uploaded audio", "file")
            meta = {"name": name, "transcript": transcript, "sample_rate": audio.sample_rate,
                    "duration_s": audio.duration, "created": time.time(), "reference": reference.name}
            (tmp / "voice.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
            (tmp / "prompts").mkdir()
            try:
                os.rename(tmp, target)
            except OSError:
                raise ApiError(409, f"voice {name!r} already exists; delete it first", param="name",
                               code="voice_exists") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        voice = self.get(name)
        assert voice is not None
        return voice

    def delete(self, name: str) -> None:
        target = self._dir(name)
        if self.get(name) is None:
            raise ApiError(404, f"voice {name!r} does not exist", param="name", code="voice_not_found")
        trash = self.folder / f".deleted-{secrets.token_hex(6)}"
        os.rename(target, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def save_prompt(self, voice: StoredVoice, path: Path, prompt: Any) -> None:
        """Save a prepared voice prompt (the family writes it atomically); keep the newest few."""
        folder = path.parent
        if not folder.is_dir():  # the voice was deleted meanwhile
            return
        prompt.save(path)
        prompts = sorted(folder.glob("*.prompt"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in prompts[MAX_PROMPTS_PER_VOICE:]:
            old.unlink(missing_ok=True)


#: The largest inline reference (``ref_audio`` in a speech body), decoded bytes.
MAX_INLINE_BYTES = 10 << 20
_DATA_URL = re.compile(r"^data:audio/[A-Za-z0-9.+-]+(;[A-Za-z0-9=.+-]+)*;base64,")


def decode_reference(value: str, transcript: str) -> Any:
    """An inline reference (``ref_audio``: base64 bytes or a ``data:audio/...;base64,`` URL) as an
    ``AudioBuffer``, checked as an upload is: decodable WAV/FLAC/OGG/MP3 at most
    ``MAX_VOICE_SECONDS`` long, a transcript of at most ``MAX_TRANSCRIPT_CHARS``. Never a path or a
    URL the server would fetch."""
    import base64
    import binascii
    import tempfile

    text = value.strip()
    if re.match(r"^[a-z][a-z0-9+.-]*://", text, re.IGNORECASE) or text.startswith(("/", "~", ".")):
        raise ApiError(400, "ref_audio takes the audio itself (base64, or a data:audio/...;base64, URL), "
                       "not a path or a URL the server would fetch", param="ref_audio", code="invalid_audio")
    if text.startswith("data:"):
        match = _DATA_URL.match(text)
        if match is None:
            raise ApiError(400, "ref_audio is a data URL but not data:audio/<type>;base64,<data>",
                           param="ref_audio", code="invalid_audio")
        text = text[match.end():]
    if len(text) > MAX_INLINE_BYTES * 4 // 3 + 4:
        raise ApiError(413, f"ref_audio is larger than {MAX_INLINE_BYTES >> 20} MiB", param="ref_audio",
                       code="payload_too_large")
    try:
        data = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, "ref_audio is not valid base64", param="ref_audio",
                       code="invalid_audio") from None
    if not data:
        raise ApiError(400, "ref_audio is empty", param="ref_audio", code="invalid_audio")
    if len(transcript) > MAX_TRANSCRIPT_CHARS:
        raise ApiError(400, f"ref_text is longer than {MAX_TRANSCRIPT_CHARS} characters", param="ref_text",
                       code="invalid_value")
    from audiocpp.engine.audio.io import read_audio

    with tempfile.TemporaryDirectory(prefix="audiocpp-ref-") as tmp:
        path = Path(tmp) / "ref"
        path.write_bytes(data)
        try:
            fmt = _format_of(path)
        except ApiError as error:
            raise ApiError(400, error.message.replace("uploaded file", "ref_audio").replace("uploaded audio",
                                                                                          "ref_audio"),
                           param="ref_audio", code="invalid_audio") from None
        named = path.rename(path.with_suffix(f".{fmt}"))
        try:
            audio = read_audio(named)
        except AudiocppError as error:
            raise ApiError(400, f"ref_audio is not decodable audio: "
                           f"{_without_path(error, named, 'ref_audio')}",
                           param="ref_audio", code="invalid_audio") from None
    check_duration(audio.duration, "ref_audio", "ref_audio")
    return audio


def check_duration(seconds: float, what: str, param: str) -> None:
    """A reference between MIN_VOICE_SECONDS and MAX_VOICE_SECONDS long."""
    if seconds > MAX_VOICE_SECONDS:
        raise ApiError(400, f"{what} is {seconds:.1f} s long; voices take at most {MAX_VOICE_SECONDS:g} s "
                       "(a 3-20 s clip is best)", param=param, code="invalid_audio")
    if seconds < MIN_VOICE_SECONDS:
        raise ApiError(400, f"{what} is {seconds:.3f} s long: too short to copy a voice from; voices take at "
                       f"least {MIN_VOICE_SECONDS:g} s (a 3-20 s clip is best)", param=param,
                       code="invalid_audio")


def _without_path(error: AudiocppError, path: Path, name: str) -> str:
    """The engine's message about a temporary file, naming it as the client does (never the path)."""
    for quoted in (f"audio file {str(path)!r}", repr(str(path)), str(path)):
        error.message = error.message.replace(quoted, name)
    return engine_message(error)


def _format_of(path: Path) -> str:
    """The container of an upload (from its content, never from the client's file name)."""
    import soundfile as sf

    try:
        info = sf.info(str(path))
    except Exception:  # libsndfile raises several types for non-audio
        raise ApiError(400, "the uploaded file is not decodable audio (use WAV, FLAC, OGG or MP3)",
                       param="file", code="invalid_audio") from None
    ext = _EXTENSIONS.get(info.format)
    if ext is None:
        raise ApiError(400, f"uploaded audio in {info.format} is not accepted; use WAV, FLAC, OGG or MP3",
                       param="file", code="invalid_audio")
    return ext
