"""The rules a request's inputs obey, as pure functions of the family's spec and of what the
request gives (no model loaded, no file read): the command line and batch manifests check them
before loading, ``Session.prepare`` once per request, so each rule and its wording live here only.

Family rules that need more than the spec (VoxCPM2's prompt_audio/prompt_text pairing, Audio8's
multi-reference JSON, a language name) stay in the family's ``Session._validate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import UsageError
from .tasks import Task

if TYPE_CHECKING:
    from .spec.model_spec import ModelSpec

#: The clone capability of a family that needs the transcript of its reference audio.
TRANSCRIPT_CAPABILITY = "reference_transcript"
#: Request option types whose value is reference audio.
REFERENCE_TYPES = ("audio_path", "audio_path_list")


@dataclass(frozen=True)
class ReferenceInputs:
    """What a request gives toward a voice: ``voice`` (reference audio, --voice-ref), ``voice_prompt``
    (a saved voice file), ``reference_text`` (a non-empty transcript), ``reference_options`` (a
    request option that gives reference audio is set: VoxCPM2's prompt_audio, Audio8's
    multi_reference_cond)."""

    voice: bool = False
    voice_prompt: bool = False
    reference_text: bool = False
    reference_options: bool = False

    @classmethod
    def of(cls, spec: ModelSpec, options: Mapping[str, Any], *, voice: bool,
           voice_prompt: bool) -> ReferenceInputs:
        """From request options by name (``reference_text`` among them) and the two inputs."""
        return cls(voice=voice, voice_prompt=voice_prompt,
                   reference_text=bool(str(options.get("reference_text") or "").strip()),
                   reference_options=any(options.get(name) for name in reference_options(spec)))


def reference_options(spec: ModelSpec) -> list[str]:
    """The request options that give reference audio: audio-typed ones, and those the spec marks
    ``"reference": true`` (a JSON list of references is a string)."""
    return [row.name for row in spec.options.request if row.type in REFERENCE_TYPES or row.reference]


def needs_transcript(spec: ModelSpec) -> bool:
    """Whether the family clones from reference audio only with its transcript (it has no speech
    recognizer to make one, or clones by continuing the transcript)."""
    return TRANSCRIPT_CAPABILITY in spec.capabilities.get("clone", ())


def check_text(text: object) -> str:
    """The text to synthesize: a non-empty string that is valid Unicode (no lone surrogates, which
    bytes the locale could not decode become)."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError("the text to synthesize is empty", hint="pass --text, --text-file or text on stdin")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("the text to synthesize is not valid Unicode (it holds undecodable bytes)",
                         hint="pass UTF-8 text, e.g. converted with `iconv -t UTF-8`") from None
    return text


def check_request(spec: ModelSpec, task: Task, given: ReferenceInputs) -> None:
    """Every spec-level rule on a request's reference inputs (see :func:`check_voice_inputs`), then:
    a clone needs a reference; a family that needs a transcript gets one with its audio."""
    check_voice_inputs(task, voice=given.voice, voice_prompt=given.voice_prompt,
                       reference_text=given.reference_text)
    if task is Task.CLONE and not (given.voice or given.voice_prompt or given.reference_options):
        raise UsageError(
            f"task 'clon' needs a reference voice for {spec.family}",
            hint="pass --voice-ref FILE (and --reference-text with its transcript) or --voice-prompt FILE",
        )
    if given.voice and not given.reference_text and needs_transcript(spec):
        raise UsageError(f"cloning with {spec.display_name} needs --reference-text, the transcript of "
                         "--voice-ref",
                         hint="pass --reference-text 'the exact words spoken in the reference' "
                         f"({spec.display_name} has no reference-only cloning, and audiocpp has no speech "
                         "recognizer to write one)")


def check_prompt_transcript(spec: ModelSpec, transcript: str) -> None:
    """A saved voice prompt carries the transcript a family that needs one clones with."""
    if needs_transcript(spec) and not transcript.strip():
        raise UsageError(f"the voice prompt holds no transcript of its reference audio "
                         f"({spec.display_name} needs one)",
                         hint="encode the reference with its transcript: `audiocpp codec encode "
                         "REF.wav --model ... --reference-text '...' --out voice.prompt`")


#: The request option that caps reference audio, declared by every spec with cloning.
REFERENCE_CAP_OPTION = "max_reference_seconds"


def check_voice_inputs(task: Task, *, voice: bool, voice_prompt: bool, reference_text: bool) -> None:
    """The rules on reference inputs that hold in every family (the CLI checks them before loading):
    a reference voice or saved prompt only for cloning, not both, and a transcript only with audio."""
    if voice and voice_prompt:
        raise UsageError("give either --voice-ref or --voice-prompt, not both",
                         hint="a saved voice prompt already holds its reference audio and transcript")
    if task is not Task.CLONE and (voice or voice_prompt):
        what = "reference audio (--voice-ref)" if voice else "voice prompt (--voice-prompt)"
        raise UsageError(f"task {task.cli_name!r} takes no {what}", hint="use --task clon to clone a voice")
    if reference_text and not voice:
        raise UsageError(
            "--reference-text needs --voice-ref (the audio it transcribes)",
            hint="a --voice-prompt carries its own transcript; drop --reference-text"
            if voice_prompt else "pass --voice-ref FILE with --task clon, or drop --reference-text",
        )


def check_reference_length(duration: float, cap: float | None, *, transcript: bool, name: str) -> bool:
    """Whether a reference of ``duration`` seconds must be cut to the cap (``None`` or 0: no cap).

    Upstream OmniVoice cuts references over 20 s at a pause, but only without a transcript:
    a cut reference would no longer match its transcript, so one over the cap with a
    transcript is refused instead.
    """
    if not cap or duration <= cap:
        return False
    if transcript:
        raise UsageError(
            f"the reference audio {name} is {duration:.1f} s long, over the {cap:g} s cap for references "
            "(request option max_reference_seconds); cut with its transcript it would no longer match",
            hint="use a 3-20 s clip of it with that clip's transcript, or raise the cap: "
            f"--request-option {REFERENCE_CAP_OPTION}=N (0: no cap)",
        )
    return True


def check_task_and_mode(spec: ModelSpec, task: Task, mode: Any, *, others: Sequence[str] = ()) -> None:
    """The family offers ``task`` in ``mode``; a task it lacks names ``others``, the installed families
    that do it, where the caller knows them (``registry.families_with_task``)."""
    if task.value not in spec.tasks:
        offered = ", ".join(Task(t).cli_name for t in spec.tasks)
        hint = f"{spec.family} supports: {offered}"
        if "built_in_voices" in (spec.capabilities.get("tts") or ()) and task is Task.CLONE:
            hint += " (it speaks in its named voices: --voice; `audiocpp voices` lists them)"
        if others:
            hint += f"; task {task.cli_name!r} is done by {', '.join(others)} (pass --model or --family)"
        raise UsageError(f"{spec.family} does not support task {task.cli_name!r}", hint=hint)
    if mode.value not in spec.modes:
        raise UsageError(f"{spec.family} does not support mode {mode.value!r}",
                         hint=f"{spec.family} supports: {', '.join(spec.modes)}")
