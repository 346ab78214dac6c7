"""Stored voices: uploaded reference audio + transcript, and the voice prompts prepared from them.

Layout under the voices folder (it survives restarts; the folder, its subfolders and files are private
to the server's user: 0700 and 0600)::

    .owner-salt                        the secret salt of the keys' hashes (auth.KeyRing)
    <name>/                            a shared voice (owned by nobody: stored without keys)
    @<owner>/<name>/                   a voice of one API key (<owner>: 32 hex digits, a keyed hash
                                       of the key; the key itself is nowhere on disk)
    .../<name>/voice.json              name, transcript, sample rate, duration, created
    .../<name>/reference.<wav|flac|…>  the uploaded file, byte for byte (checked decodable)
    .../<name>/prompts/<key>.prompt    the engine's voice-prompt file, per model and options

A voice is used as a clone reference. The first request that clones with it on a model whose
family prepares voice prompts saves the prompt (``TaskResult.voice_prompt``) under a key of
the model's weights and the request's options (all but the seed, since a prompt depends on
options such as reference preprocessing); later requests with the same key pass the saved
prompt instead of the audio, and skip re-encoding the reference, also after a restart.

Who sees what (:class:`VoiceView`): a key sees its own voices and the shared ones; another key's voice
does not exist for it (the same answers as a name nobody uses). An admin key sees every voice (another
key's as ``<label>/<name>``) and deletes any. Without keys, requests see the shared voices, as before
keys existed. Names are checked (1-64 letters, digits, ``-``, ``_``), a folder, file or owner folder that
is a symbolic link is never read or written, and nothing a client sends becomes a path but the name.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audiocpp.engine.errors import AudiocppError

from .errors import ApiError, engine_message

if TYPE_CHECKING:
    from .auth import KeyRing, Principal

VOICE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
OWNER_RE = re.compile(r"^[0-9a-f]{32}$")
REFERENCE_RE = re.compile(r"^reference\.(wav|flac|ogg|mp3)$")
SALT_FILE = ".owner-salt"
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
    owner: str | None = None  # the owner id of the key that stored it; None: shared

    def describe(self) -> dict[str, Any]:
        """OpenAI's ``audio.voice`` object (the id is the name) plus what we store."""
        return {"id": self.name, "object": "audio.voice", "name": self.name, "type": "audio_sample",
                "created_at": int(self.created), "stored": True, "transcript": self.transcript,
                "sample_rate": self.sample_rate, "duration_s": round(self.duration_s, 3)}

    def prompt_path(self, model_key: str, options: dict[str, Any]) -> Path:
        blob = json.dumps({k: str(v) for k, v in sorted(options.items()) if k != "seed"})
        digest = hashlib.sha256(blob.encode()).hexdigest()[:12]
        return self.folder / "prompts" / f"{model_key}-{digest}.prompt"


def shown(value: Any, limit: int = 60) -> str:
    """A client's value in a message: quoted, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 4] + "...'"


def check_name(name: str) -> None:
    if not isinstance(name, str) or not VOICE_NAME_RE.match(name):
        raise ApiError(400, f"voice name {shown(name)} is not allowed: use 1-64 letters, digits, '-' or '_' "
                       "starting with a letter or digit", param="name", code="invalid_voice_name")
    if name.lower() in BUILTIN_VOICES:
        raise ApiError(400, f"voice name {shown(name)} is a built-in voice name; choose another",
                       param="name", code="invalid_voice_name")


def _is_real_dir(path: Path) -> bool:
    """A directory that is not a symbolic link."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_real_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _private_dir(path: Path) -> None:
    """``path`` as a directory only this user reaches (made if missing; never through a link)."""
    if path.is_symlink():
        raise ApiError(500, "the voices folder holds a symbolic link where a folder was expected",
                       code="internal_error")
    path.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)


def write_private(path: Path, data: bytes) -> None:
    """A new file only this user reads (never through a link, never over an existing file)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _read_nofollow(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(1 << 20)


class VoiceStore:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).expanduser()
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.folder, 0o700)
        self.salt = self._salt()
        self.migrated = self.migrate()

    # -- the folder ------------------------------------------------------------------------------
    def _salt(self) -> bytes:
        """The secret salt of the keys' hashes: made once per voices folder (0600), so owner ids
        stay the same across restarts and say nothing about the keys without it."""
        path = self.folder / SALT_FILE
        for _ in range(2):
            try:
                text = _read_nofollow(path).decode("ascii").strip()
                if re.fullmatch(r"[0-9a-f]{64}", text):
                    return bytes.fromhex(text)
                raise OSError(f"{path} is not a salt written by audiocpp")
            except FileNotFoundError:
                try:
                    write_private(path, secrets.token_hex(32).encode() + b"\n")
                except FileExistsError:  # another server made it meanwhile
                    continue
        return bytes.fromhex(_read_nofollow(path).decode("ascii").strip())

    def migrate(self) -> int:
        """Bring a folder an earlier version wrote to this layout, without losing anything: its voices
        stay where they are (the shared voices: usable by every key, deleted by an admin key), every
        folder becomes 0700 and every file 0600 (they were 0755 and 0644). Symbolic links are left
        alone (and never followed). Returns the number of voices found."""
        found = 0
        for entry in self._entries(self.folder):
            if _is_real_dir(entry) and entry.name.startswith("@") and OWNER_RE.match(entry.name[1:]):
                os.chmod(entry, 0o700)
                for voice in self._entries(entry):
                    found += self._private_tree(voice)
            elif VOICE_NAME_RE.match(entry.name):
                found += self._private_tree(entry)
        return found

    @staticmethod
    def _entries(folder: Path) -> list[Path]:
        try:
            return sorted(folder.iterdir())
        except OSError:
            return []

    @staticmethod
    def _private_tree(folder: Path) -> int:
        if not _is_real_dir(folder):
            return 0
        for root, dirs, files in os.walk(folder, followlinks=False):
            os.chmod(root, 0o700)
            for name in files:
                path = Path(root) / name
                if _is_real_file(path):
                    os.chmod(path, 0o600)
            dirs[:] = [d for d in dirs if _is_real_dir(Path(root) / d)]
        return 1 if (folder / "voice.json").exists() else 0

    def _base(self, owner: str | None) -> Path:
        if owner is None:
            return self.folder
        if not OWNER_RE.match(owner):
            raise ValueError("not an owner id")
        return self.folder / f"@{owner}"

    def owners(self) -> list[str]:
        """The owner ids that have a folder of voices."""
        return [e.name[1:] for e in self._entries(self.folder)
                if e.name.startswith("@") and OWNER_RE.match(e.name[1:]) and _is_real_dir(e)]

    # -- one owner's voices -------------------------------------------------------------------------
    def get(self, name: str, owner: str | None = None) -> StoredVoice | None:
        if not isinstance(name, str) or not VOICE_NAME_RE.match(name):
            return None
        base = self._base(owner)
        folder = base / name
        if (owner is not None and not _is_real_dir(base)) or not _is_real_dir(folder):
            return None
        try:
            meta = json.loads(_read_nofollow(folder / "voice.json").decode("utf-8"))
            reference = str(meta["reference"])
            if not REFERENCE_RE.match(reference) or not _is_real_file(folder / reference):
                return None
            return StoredVoice(name=name, folder=folder, transcript=str(meta.get("transcript") or ""),
                               sample_rate=int(meta["sample_rate"]), duration_s=float(meta["duration_s"]),
                               created=float(meta.get("created", 0)), reference=folder / reference,
                               owner=owner)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def list(self, owner: str | None = None) -> list[StoredVoice]:
        voices = []
        for entry in self._entries(self._base(owner)):
            if VOICE_NAME_RE.match(entry.name):
                voice = self.get(entry.name, owner)
                if voice is not None:
                    voices.append(voice)
        return voices

    def add(self, name: str, data: bytes, transcript: str, owner: str | None = None) -> StoredVoice:
        """Check and store an upload atomically (a temporary folder renamed into place)."""
        check_name(name)
        if len(transcript) > MAX_TRANSCRIPT_CHARS:
            raise ApiError(400, f"the transcript is longer than {MAX_TRANSCRIPT_CHARS} characters",
                           param="transcript", code="invalid_value")
        base = self._base(owner)
        if owner is not None:
            _private_dir(base)
        target = base / name
        if os.path.lexists(target):
            raise ApiError(409, f"voice {name!r} already exists; delete it first", param="name",
                           code="voice_exists")
        if not data:
            raise ApiError(400, "the uploaded file is empty", param="file", code="invalid_audio")
        tmp = base / f".upload-{secrets.token_hex(6)}"
        tmp.mkdir(mode=0o700)
        try:
            upload = tmp / "upload"
            write_private(upload, data)
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
            write_private(tmp / "voice.json", json.dumps(meta, indent=2).encode("utf-8"))
            (tmp / "prompts").mkdir(mode=0o700)
            try:
                os.rename(tmp, target)
            except OSError:
                raise ApiError(409, f"voice {name!r} already exists; delete it first", param="name",
                               code="voice_exists") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        voice = self.get(name, owner)
        assert voice is not None
        return voice

    def delete(self, name: str, owner: str | None = None) -> None:
        check_name(name)
        if self.get(name, owner) is None:
            raise ApiError(404, f"voice {name!r} does not exist", param="name", code="voice_not_found")
        base = self._base(owner)
        trash = base / f".deleted-{secrets.token_hex(6)}"
        os.rename(base / name, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def save_prompt(self, voice: StoredVoice, path: Path, prompt: Any) -> None:
        """Save a prepared voice prompt (the family writes it atomically, 0600); keep the newest few."""
        folder = path.parent
        if not _is_real_dir(folder) or not _is_real_dir(voice.folder):  # deleted meanwhile, or a link
            return
        prompt.save(path)
        if _is_real_file(path):
            os.chmod(path, 0o600)
        prompts = sorted(folder.glob("*.prompt"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in prompts[MAX_PROMPTS_PER_VOICE:]:
            old.unlink(missing_ok=True)


def voice_not_found(value: Any) -> ApiError:
    """What a request naming a voice it cannot see gets: the same for a name nobody uses and for
    another key's voice (names must not leak)."""
    return ApiError(404, f"voice {shown(value)} does not exist", param="name", code="voice_not_found")


class VoiceView:
    """The voices one principal sees and what it may do with them (the module docstring)."""

    def __init__(self, store: VoiceStore, principal: Principal, keys: KeyRing | None = None,
                 max_per_key: int | None = None) -> None:
        self.store = store
        self.principal = principal
        self.keys = keys
        self.max_per_key = max_per_key

    @property
    def folder(self) -> Path:
        return self.store.folder

    @property
    def _own(self) -> str | None:
        return self.principal.owner if self.principal.keyed else None

    @property
    def _sees_all(self) -> bool:
        return self.principal.keyed and self.principal.admin

    def _owner_token(self, owner: str) -> str:
        label = self.keys.label_of(owner) if self.keys is not None else None
        return label or f"~{owner}"

    def _owner_of_token(self, token: str) -> str | None:
        if token.startswith("~") and OWNER_RE.match(token[1:]):
            return token[1:]
        return self.keys.owner_of(token) if self.keys is not None else None

    def get(self, name: Any) -> StoredVoice | None:
        """The voice ``name`` means for this principal: its own, else a shared one; for an admin key
        also ``<label>/<name>`` (another key's)."""
        if not isinstance(name, str):
            return None
        if "/" in name:
            token, _, plain = name.partition("/")
            owner = self._owner_of_token(token) if self._sees_all else None
            return self.store.get(plain, owner) if owner is not None else None
        own = self._own
        if own is not None:
            voice = self.store.get(name, own)
            if voice is not None:
                return voice
        return self.store.get(name, None)

    def list(self) -> list[StoredVoice]:
        own = self.store.list(self._own) if self._own is not None else []
        names = {v.name for v in own}
        voices = own + [v for v in self.store.list(None) if v.name not in names]
        if self._sees_all:
            for owner in self.store.owners():
                if owner != self._own:
                    voices += self.store.list(owner)
        return voices

    def voice_id(self, voice: StoredVoice) -> str:
        if voice.owner is None or voice.owner == self._own:
            return voice.name
        return f"{self._owner_token(voice.owner)}/{voice.name}"

    def describe(self, voice: StoredVoice) -> dict[str, Any]:
        owner = None
        if voice.owner is not None:
            owner = self.keys.label_of(voice.owner) if self.keys is not None else None
            owner = owner or f"~{voice.owner}"
        return {**voice.describe(), "id": self.voice_id(voice), "owner": owner, "shared": voice.owner is None}

    def add(self, name: str, data: bytes, transcript: str, *, shared: bool = False) -> StoredVoice:
        check_name(name)
        if shared and not self._sees_all:
            raise ApiError(403, "only an admin key stores shared voices (shared=true); leave shared out to "
                           "store the voice for your key", param="shared", code="admin_only")
        owner = None if shared else self._own
        existing = self.store.get(name, owner) or (self.store.get(name, None) if owner is not None else None)
        if existing is not None:
            what = "a shared voice" if existing.owner is None and owner is not None else "a voice"
            raise ApiError(409, f"{what} called {name!r} already exists; "
                           + ("choose another name" if what != "a voice" else "delete it first"),
                           param="name", code="voice_exists")
        if owner is not None and not self.principal.admin and self.max_per_key is not None:
            count = len(self.store.list(owner))
            if count >= self.max_per_key:
                raise ApiError(403, f"key {self.principal.label!r} has {count} voices, the most this server "
                               "keeps per key: delete one first", param="name", code="voice_limit_reached")
        return self.store.add(name, data, transcript, owner)

    def delete(self, name: Any) -> StoredVoice:
        voice = self.get(name)
        if voice is None:
            raise voice_not_found(name)
        if voice.owner is None and self.principal.keyed and not self.principal.admin:
            raise ApiError(403, f"voice {voice.name!r} is shared (stored without a key): only an admin key "
                           "deletes it", param="name", code="admin_only")
        self.store.delete(voice.name, voice.owner)
        return voice

    def save_prompt(self, voice: StoredVoice, path: Path, prompt: Any) -> None:
        self.store.save_prompt(voice, path, prompt)


def check_reference(name: Any) -> None:
    """A voice name in a request path: a name, or (an admin's) ``<owner>/<name>``; else 400."""
    if not isinstance(name, str):
        check_name(name)
        return
    token, sep, plain = name.partition("/")
    if sep and (LABEL_OR_OWNER.match(token) is None or "/" in plain):
        raise ApiError(400, f"voice {shown(name)} is not a voice name: use 1-64 letters, digits, '-' or '_' "
                       "(an admin key: LABEL/NAME)", param="name", code="invalid_voice_name")
    check_name(plain if sep else name)


LABEL_OR_OWNER = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,63}|~[0-9a-f]{32})$")


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
