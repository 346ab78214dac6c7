"""The canonical option names: the one list of option names that mean the same in every family.

A request option is named either canonically (a name of :data:`CANONICAL_REQUEST_OPTIONS`, with its
registered type) or ``<family>.<name>``; session and load options are always local names, and the
few the engine or the CLI reads (:data:`ENGINE_SESSION_OPTIONS`, :data:`ENGINE_LOAD_OPTIONS`) must
have their registered type. ``engine.spec.validate`` enforces both rules, as audio.cpp's
``shared_option_contracts()`` does; ``docs/spec-format.md`` prints this list
(``tests/engine/test_plugin_spec_rules.py`` checks that the two agree).

A family declares the canonical options it honours and no others: the engine and the CLI act on a
name only when the family's spec declares it (``--seed`` needs ``seed``, ``--language`` needs
``language``, ``--voice-ref`` caps need ``max_reference_seconds``...).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CanonicalOption:
    """A registered option name: the types a spec may give it and what it means."""

    types: tuple[str, ...]
    meaning: str
    group: str


def _rows(group: str, rows: dict[str, tuple[str | tuple[str, ...], str]]) -> dict[str, CanonicalOption]:
    return {name: CanonicalOption((kind,) if isinstance(kind, str) else kind, meaning, group)
            for name, (kind, meaning) in rows.items()}


#: Request option names any family may declare without its ``<family>.`` prefix, by group.
CANONICAL_REQUEST_OPTIONS: dict[str, CanonicalOption] = {
    **_rows("engine", {
        "seed": ("int", "random seed; the engine draws one when unset, reports it and seeds "
                        "request.generator() (--seed)"),
        "language": (("string", "enum"), "language name or code (--language)"),
        "instruct": ("string", "voice design description (--instruct)"),
        "reference_text": ("string", "transcript of the reference audio (--reference-text)"),
        "max_reference_seconds": ("float", "cap on reference audio in seconds, 0: no cap; the engine cuts "
                                           "or refuses longer references (--voice-ref)"),
        "voice": ("string", "a named voice of the model, or a mix of them ('a(2)+b(1)') (--voice)"),
        "phonemes": ("bool", "the text is a phoneme string: no text-to-phoneme step (--phonemes)"),
    }),
    **_rows("sampling", {
        "temperature": ("float", "sampling temperature"),
        "top_p": ("float", "nucleus sampling threshold"),
        "top_k": ("int", "top-k sampling limit"),
        "do_sample": ("bool", "sample (true) or decode greedily (false)"),
        "repetition_penalty": ("float", "penalty on repeated tokens"),
        "guidance_scale": ("float", "classifier-free guidance scale"),
        "num_inference_steps": ("int", "decoding / diffusion steps"),
        "max_tokens": ("int", "most tokens or patches generated"),
        "min_tokens": ("int", "fewest tokens or patches before generation may stop"),
        "max_new_tokens": ("int", "most new tokens (frames) per text chunk"),
    }),
    **_rows("maskgit", {
        "t_shift": ("float", "time-step shift of the unmasking schedule"),
        "layer_penalty_factor": ("float", "score penalty per codebook layer"),
        "position_temperature": ("float", "Gumbel temperature of the position choice"),
        "class_temperature": ("float", "Gumbel temperature of the token choice"),
    }),
    **_rows("text and duration", {
        "text_chunk_size": ("int", "longest text chunk in characters (0: no chunking)"),
        "text_chunk_mode": ("enum", "how long text is split"),
        "speed": ("float", "speaking-rate factor (>1 faster)"),
        "duration": ("float", "fixed output duration in seconds"),
    }),
    **_rows("references", {
        "prompt_audio": ("audio_path", "prompt audio the generation continues"),
        "prompt_text": ("string", "transcript of prompt_audio"),
        "multi_reference_cond": ("string", "several references: a JSON list of {audio, text}"),
        "denoise": ("bool", "mark a reference voice as to be denoised"),
        "preprocess_prompt": ("bool", "trim and normalise the reference before use"),
    }),
    **_rows("output", {
        "postprocess_output": ("bool", "remove long silences from the output"),
        "pad_duration": ("float", "silence added at each end, in seconds"),
        "fade_duration": ("float", "fade-in/out length, in seconds"),
        "audio_chunk_duration": ("float", "long-form chunk length in seconds (0: no chunking)"),
        "audio_chunk_threshold": ("float", "chunk only above this estimated duration, in seconds"),
        "streaming_chunk_frames": ("int", "codec frames decoded per streamed piece"),
        "streaming_first_chunk_frames": ("int", "codec frames of the first streamed piece"),
    }),
    **_rows("retries", {
        "retry_badcase": ("bool", "regenerate outputs whose length looks broken"),
        "retry_badcase_max_times": ("int", "attempts in all when retrying"),
        "retry_badcase_ratio_threshold": ("float", "length ratio that makes a bad case"),
    }),
}

#: Session options the engine reads itself (by these local names, with these types).
ENGINE_SESSION_OPTIONS: dict[str, CanonicalOption] = _rows("engine", {
    "threads": ("int", "torch intra-op threads, set by the base Session (0: torch's default)"),
    "compute_dtype": ("enum", "torch dtype of the session's network (preset compute_dtype)"),
})

#: Load options the CLI fills from a flag of its own.
ENGINE_LOAD_OPTIONS: dict[str, CanonicalOption] = _rows("engine", {
    "codec": ("path", "a separate codec file (--codec)"),
    "device": ("string", "where the model runs: cpu, cuda, cuda:N, mps or auto (--device)"),
})


def option_name_problems(family: str, scope: str, name: str, kind: str) -> list[tuple[str, str]]:
    """``(field, message)`` for each way an option row breaks the naming rule (empty when it keeps it)."""
    if scope == "request":
        if "." in name:
            if not name.startswith(f"{family}."):
                return [("name", f"namespaced request option {name!r} must start with '{family}.'")]
            return []
        row = CANONICAL_REQUEST_OPTIONS.get(name)
        if row is None:
            return [("name", f"{name!r} is not a canonical request option name; name it '{family}.{name}' "
                             "(the canonical names: docs/spec-format.md)")]
    else:
        row = (ENGINE_SESSION_OPTIONS if scope == "session" else ENGINE_LOAD_OPTIONS).get(name)
        if row is None:
            return []
    if kind not in row.types:
        return [("type", f"canonical {scope} option {name!r} has type {' or '.join(row.types)}, not {kind}")]
    return []
