"""One narrator for the whole book.

- ``--voice-ref`` (with ``--reference-text`` where the family needs it) or ``--voice-prompt``: every
  chunk clones that voice;
- otherwise (``--voice-continuity auto``, the default) a first chunk is synthesized on its own, without
  a reference (with ``--instruct``: designed from the description), and every other chunk clones it:
  its audio and its text are the reference (``--voice-ref`` / ``--reference-text`` of every later
  request). None of the installed families has a fixed voice (each draws a new speaker per request
  when given no reference), so this is what keeps an OmniVoice, VoxCPM or Audio8 book on one speaker.
  The narrator is kept in the work folder and reused by later runs (edits, other ``--chapters``);
- ``--voice-continuity none``: every chunk is its own request as given (a family with a fixed voice,
  or a deliberate change of speaker);
- a family with named voices (Kokoro: a voice is a fixed speaker, and it cannot clone) reads every chunk
  with one of them: ``--voice NAME`` (or a mix, ``'jf_alpha(2)+jm_kumo(1)'``), else the model's default
  voice for the text's language. A cloning option given to such a family is refused, naming ``--voice``;
  ``--voice`` given to a family without named voices is refused.

The narrator's text is the first sentence of the book between 40 and 200 characters (a reference of
about 3 to 13 seconds), else the longest of its first sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

from audiocpp.engine.errors import UsageError
from audiocpp.engine.spec.model_spec import ModelSpec
from audiocpp.engine.text.chunking import chunk_text

from .plan import ChapterPlan

CONTINUITY = ("auto", "none")
ANCHOR_CHARS = (40, 200)


@dataclass
class Narration:
    """How the book's chunks get their voice."""

    mode: str  # "reference", "prompt", "anchor" (first chunk cloned), "designed" (designed, cloned),
    # "as-given", "named" (a named voice of the model, or its default voice)
    task: str  # the task of every chunk but the anchor
    anchor_task: str | None = None  # tts or design: the anchor's own request
    instruct: str | None = None  # for the anchor (designed), or every chunk (as-given)
    voice: str | None = None  # "named": the voice (or mix) every chunk speaks; None: the model's default

    @property
    def anchored(self) -> bool:
        return self.anchor_task is not None

    def describe(self, family: str) -> str:
        if self.mode == "named":
            if self.voice is None:
                return f"every chunk speaks the {family} model's default voice (--voice NAME picks one)"
            return f"every chunk speaks the named voice {self.voice!r}"
        return {
            "reference": "every chunk clones --voice-ref",
            "prompt": "every chunk clones --voice-prompt",
            "anchor": f"the first chunk's voice (its own {family} tts request) is cloned by every "
            "other chunk",
            "designed": "the first chunk is designed from --instruct, and cloned by every other chunk",
            "as-given": "every chunk is its own request (--voice-continuity none)",
        }[self.mode]


def has_named_voices(spec: ModelSpec) -> bool:
    """Whether the family's models have named voices (a request option ``voice``: Kokoro)."""
    return spec.option("request", "voice") is not None


def plan_narration(
    spec: ModelSpec,
    *,
    voice_ref: bool,
    voice_prompt: bool,
    instruct: str | None,
    continuity: str = "auto",
    voice: str | None = None,
) -> Narration:
    if continuity not in CONTINUITY:
        raise UsageError(f"--voice-continuity {continuity!r} is not one of {', '.join(CONTINUITY)}")
    tasks = set(spec.tasks)
    named = has_named_voices(spec)
    takes_instruct = any(row.name == "instruct" for row in spec.options.request)
    if voice is not None:
        if not named:
            raise UsageError(
                f"{spec.family} has no named voices, so --voice has nothing to choose",
                hint="its narrator is --voice-ref FILE (a clone), --voice-prompt FILE"
                + (", --instruct TEXT" if takes_instruct else "")
                + " or, by default, the first chunk's voice; `audiocpp voices` lists the named voices of "
                "the models that have them (kokoro)",
            )
        if voice_ref or voice_prompt or instruct is not None:
            raise UsageError(
                "give either --voice or --voice-ref / --voice-prompt / --instruct, not both",
                hint="--voice names the narrator already",
            )
    if instruct is not None and not takes_instruct:
        raise UsageError(
            f"{spec.family} takes no --instruct (it has no voice design)",
            hint="drop --instruct; pick the narrator with --voice NAME (`audiocpp voices` lists them)"
            if named
            else "drop --instruct, or clone a voice with --voice-ref",
        )
    if voice_ref or voice_prompt:
        if instruct is not None:
            raise UsageError(
                "give either a voice (--voice-ref / --voice-prompt) or --instruct, not both",
                hint="a cloned voice is already the narrator",
            )
        if "clone" not in tasks:
            flag = "--voice-ref" if voice_ref else "--voice-prompt"
            if named:
                raise UsageError(
                    f"{spec.family} cannot clone a voice ({flag}); its narrator is one of the model's named "
                    "voices: pass --voice NAME, or a mix such as 'jf_alpha(2)+jm_kumo(1)'",
                    hint=f"drop {flag}; `audiocpp voices` lists the voices (without --voice: the model's "
                    "default voice)",
                )
            raise UsageError(f"{spec.family} cannot clone a voice", hint="drop --voice-ref / --voice-prompt")
        return Narration("reference" if voice_ref else "prompt", "clone")
    if named and instruct is None:  # a named voice is a fixed speaker: nothing to clone
        return Narration("named", "tts", voice=voice)
    design_task = "design" if "design" in tasks else "tts"
    if continuity == "none" or "clone" not in tasks:
        return Narration("as-given", design_task if instruct is not None else "tts", instruct=instruct)
    if instruct is not None:
        return Narration("designed", "clone", anchor_task=design_task, instruct=instruct)
    return Narration("anchor", "clone", anchor_task="tts")


def anchor_text(plans: list[ChapterPlan]) -> str:
    """The narrator's text: the book's first sentence of 40-200 characters (titles left out), else the
    longest of its first 50 chunks."""
    low, high = ANCHOR_CHARS
    body = [
        plan.units[index].text
        for plan in plans
        for sentence in plan.sentences
        if sentence.paragraph >= 0
        for index in sentence.units
    ]
    for text in body:
        if low <= len(text) <= high:
            return text
    pool = body[:50] or [unit.text for plan in plans for unit in plan.units][:50]
    if not pool:
        raise UsageError("the book has nothing to say", hint="check that it holds text")
    fitting = [t for t in pool if len(t) <= high]
    if fitting:
        return max(fitting, key=len)
    return chunk_text(pool[0], high)[0]  # every chunk is longer: the first clause or words of the first
