"""What the synthesis command checks before it loads a model (seconds to minutes of work):
every output can be written where asked, and no input the user gave would be ignored."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from audiocpp.engine.errors import UsageError
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.tasks import Mode, Task

#: --out's extension -> the format it implies; --format must agree with it.
EXT_FORMAT = {".wav": "wav16", ".flac": "flac", ".ogg": "ogg", ".mp3": "mp3", ".opus": "opus",
              ".pcm": "pcm16", ".raw": "pcm16"}
_CONTAINER = {"wav16": ".wav", "wav24": ".wav", "wav32": ".wav", "flac": ".flac", "ogg": ".ogg",
              "mp3": ".mp3", "opus": ".opus", "pcm16": ".pcm"}

USAGE = """\
usage: audiocpp [--family F] [--task tts|clon|design] [--model PATH] [--voice NAME]
                (--text TEXT | --text-file FILE | --phonemes IPA | stdin) --out FILE [options]
       audiocpp families | voices | options --family F | inspect PATH | package ... | codec encode|decode
       audiocpp serve [--model PATH ...]     an OpenAI-compatible speech server (also Wyoming)
       audiocpp batch MANIFEST.jsonl --out-dir DIR     a JSONL manifest, locally or on Ray
       audiocpp book BOOK.epub --model PATH --out BOOK.m4b    an audiobook (EPUB, Markdown, text)
       audiocpp download NAME | kernels      fetch a model; build the C++ kernels

try:   audiocpp --text "Hello." --out hello.wav   (the default model: Kokoro-82M, real speech;
       --family omnivoice: that family's demo model, random weights); audiocpp --help: every flag
       audiocpp --family F --help  the family's options too"""


def output_format(out: Path, fmt: str | None) -> str:
    """The format to write ``out`` in: ``--format``, or the one its extension implies."""
    implied = EXT_FORMAT.get(out.suffix.lower())
    if fmt is None and implied is None:
        raise UsageError(
            f"cannot tell the audio format of {str(out)!r} from its extension",
            hint="use .wav, .flac, .ogg, .mp3 or .opus, or pass --format",
        )
    from audiocpp.engine.audio.io import check_write_format

    if fmt is None:
        assert implied is not None
        check_write_format(implied, f"--out {str(out)!r}")
        return implied
    check_write_format(fmt)
    if implied is not None and _CONTAINER[fmt] != _CONTAINER[implied]:
        raise UsageError(
            f"--format {fmt} does not match the extension of --out {str(out)!r}",
            hint=f"name the file {out.with_suffix(_CONTAINER[fmt]).name}, or drop --format "
            "(the extension picks the format)",
        )
    return fmt


def _probe_writable(folder: Path, flag: str, path: Path) -> None:
    """Create and remove a file in ``folder``: the only check that holds for read-only mounts,
    /proc, permissions and root alike."""
    probe = folder / f".audiocpp-probe-{secrets.token_hex(6)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        raise UsageError(f"cannot write {flag} {str(path)!r}: {error.strerror or error} in {str(folder)!r}",
                         hint="choose a folder you can write to") from None
    os.close(fd)
    os.unlink(probe)


def check_out_file(path: Path, flag: str) -> None:
    """``path`` names a file (not a folder) whose folder exists and is writable."""
    if path.is_dir():
        raise UsageError(f"{flag} {str(path)!r} is a folder",
                         hint=f"pass a file name, e.g. {path / 'out.wav'}"
                         if flag == "--out" else f"pass a file name, e.g. {path / 'voice.pt'}")
    folder = path.parent
    if not folder.exists():
        raise UsageError(f"the folder of {flag} {str(path)!r} does not exist",
                         hint=f"create it first (mkdir -p {folder}) or choose another path")
    if not folder.is_dir():
        raise UsageError(f"the folder of {flag} {str(path)!r} is a file", hint="choose another path")
    _probe_writable(folder, flag, path)


def check_out_dir(path: Path) -> None:
    """``--out-dir`` is a folder, or can be created (it is created when the first chunk is written)."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out-dir {str(path)!r} is a file, not a folder",
                         hint="pass a folder for the chunk files (it is created if missing)")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"--out-dir {str(path)!r} cannot be created: {str(existing)!r} is a file",
                         hint="choose another folder")
    _probe_writable(existing, "--out-dir", path)


def check_input_file(path: Path, flag: str) -> None:
    if not path.exists():
        raise UsageError(f"{flag} {str(path)!r} does not exist", hint="check the path")
    if path.is_dir():
        raise UsageError(f"{flag} {str(path)!r} is a folder, not a file", hint="pass the path of a file")


def check_session_prefixes(session_options: dict[str, str], family: str) -> None:
    """The CLI takes session options as ``family.name=value`` only, as its help says (the
    Python API takes plain keyword names)."""
    for key, value in session_options.items():
        if "." not in key:
            raise UsageError(f"--session-option {key}={value} lacks its family prefix",
                             hint=f"write it as --session-option {family}.{key}={value}")


def check_supported(spec: ModelSpec, task: Task, mode: Mode) -> None:
    """The family offers ``task`` in ``mode`` (as ``create_session`` checks, before loading)."""
    from audiocpp.engine.registry import families_with_task
    from audiocpp.engine.request_rules import check_task_and_mode

    check_task_and_mode(spec, task, mode, others=families_with_task(task))
