"""The VoxCPM1 loaded model and session: the VoxCPM2 ones with VoxCPM1's request mapping.

Everything numeric (prompt building, the AR loop, decoding, streaming) is the shared VoxCPM code
configured by ``config.variant`` (V1_VARIANT for architecture ``voxcpm``). What differs here is
what a request may ask for (upstream ``VoxCPM.generate`` arguments in brackets):

- ``tts``: text only [``text=T``].
- ``clon``: ``--voice-ref R --reference-text RT``, prompt continuation
  [``prompt_wav_path=R, prompt_text=RT``]. VoxCPM1 has no isolated reference prompt: a voice
  without its transcript is refused, as upstream refuses ``reference_wav_path`` for v1 models.
- no voice design and no ``(description)`` convention: a leading parenthesis is plain text.

Long text (``text_chunk_size``) is split at punctuation; chunks are generated in order with the
same prompt and one random stream, and concatenated.
"""

from __future__ import annotations

from typing import Any

from audiocpp.engine.errors import UsageError
from audiocpp.engine.session import PreparedRequest, Session
from audiocpp.engine.tasks import Mode, Task
from audiocpp.families.voxcpm2.prompt_layout import normalize_text
from audiocpp.families.voxcpm2.session import VoxCPM2LoadedModel, VoxCPM2Session


class VoxCPM1LoadedModel(VoxCPM2LoadedModel):
    """The VoxCPM2 loaded model (lazy per-dtype generators) over :class:`VoxCPM1Parts`."""

    def _create_session(self, task: Task, mode: Mode, options: dict[str, Any]) -> Session:
        return VoxCPM1Session(self, task, mode, options)


class VoxCPM1Session(VoxCPM2Session):
    model: VoxCPM1LoadedModel

    def _prompt_parts(self, request: PreparedRequest) -> dict[str, Any]:
        prompt = request.voice_prompt
        if prompt is not None:  # what --voice-ref with --reference-text would have encoded
            if "prompt_latents" not in prompt.tensors:
                raise UsageError("VoxCPM1 clones by prompt continuation: "
                                 "the voice prompt needs its transcript",
                                 hint="encode the reference with it: "
                                 "`audiocpp codec encode REF.wav --model ... "
                                 "--reference-text '...' --out voice.prompt`")
            return {"prompt_feats": prompt.tensors["prompt_latents"], "prompt_text": prompt.ref_text}
        if request.voice is None:
            return {}
        return {"prompt_feats": self._encode(request.voice, "left"),
                "prompt_text": str(request.options["reference_text"])}

    def _chunks(self, request: PreparedRequest) -> list[str]:
        text = normalize_text(request.text)
        size = int(request.options.get("text_chunk_size") or 0)
        if size <= 0:
            return [text]
        from audiocpp.engine.text.chunking import chunk_text

        pieces = [normalize_text(c) for c in chunk_text(text, size) if c.strip()]
        return pieces or [text]
