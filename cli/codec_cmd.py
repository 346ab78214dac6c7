"""``audiocpp codec encode / decode``: a family's codec on its own.

``encode IN.wav --out voice.prompt`` prepares reference audio (and its transcript) exactly as a
clone with ``--voice-ref`` / ``--reference-text`` does, and saves it in the engine's voice-prompt
file (:mod:`engine.voice_prompt`: codes or latents, transcript, rates), ready for
``--voice-prompt``. ``decode voice.prompt --out OUT.wav`` turns the prompt's codes or latents
back into audio with the family's own decoder. Without ``--model`` both use a demo model: the
``--family``'s, the prompt's family's (decode), or the only installed family that has one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from audiocpp.engine.errors import UsageError

if TYPE_CHECKING:
    from audiocpp.engine.loaded_model import LoadedModel
    from audiocpp.engine.plugin import FamilyPlugin

codec_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="A family's codec on its own: reference audio -> voice prompt (codes or latents, transcript, "
    "rates) for --voice-prompt, and back to audio.",
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

_ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", help="Model path or name (default: a demo model).")]
_FamilyOpt = Annotated[str | None, typer.Option(
    "--family", "-f", help="Family (detected from --model when omitted).")]
_CodecOpt = Annotated[Path | None, typer.Option(
    "--codec", help="Separate codec GGUF where a family uses one.")]
_LoadOpt = Annotated[list[str] | None, typer.Option(
    "--load-option", "-l", help="Load option key=value (repeatable).")]
_RevisionOpt = Annotated[str | None, typer.Option(
    "--revision", help="Branch, tag or commit of a --model name.")]
_CacheOpt = Annotated[Path | None, typer.Option("--cache-dir", help="Hugging Face cache for --model names.")]


def _load(model: str | None, family: str | None, *, codec: Path | None, load_options: list[str],
          revision: str | None, cache_dir: Path | None, prompt_family: str | None = None) -> LoadedModel:
    from audiocpp.engine.loader import ModelRef, load_planned, plan_load
    from audiocpp.engine.spec.options import parse_key_values

    options = parse_key_values(load_options, flag="--load-option")
    if codec is not None:
        options["codec"] = str(codec)

    def need(plugin: FamilyPlugin) -> str | None:
        if prompt_family is not None and prompt_family != plugin.name:
            return (f"the voice prompt was made by {prompt_family}, and the model is {plugin.name}; "
                    f"decode it with a {prompt_family} model (--model), or drop --model/--family")
        if "clone" not in plugin.spec.tasks:
            return (f"{plugin.name} does not clone voices, so it has no voice prompts to encode or decode "
                    "(`audiocpp families` shows which families clone)")
        return None

    # a prompt's own family decodes it when neither --model nor --family is given
    plan = plan_load(ModelRef(model, family or (prompt_family if model is None else None), revision,
                              cache_dir, default_demo=True), options, need=need)
    if plan.note:
        print(f"note: {plan.note}", file=sys.stderr)
    loaded = load_planned(plan)
    if not loaded.supports_codec_prompts:
        raise UsageError(f"{plan.family} has no codec tool yet (encoding references into voice prompts)",
                         hint="docs/cli.md lists the families `audiocpp codec` supports")
    return loaded


def _print_facts(facts: dict[str, Any], stream: Any = None) -> None:
    for key, value in facts.items():
        print(f"{key}={value}", file=stream or sys.stdout)


@codec_app.command("encode")
def encode_cmd(
    audio: Annotated[Path, typer.Argument(
        help="Reference audio (wav/flac/ogg/mp3; any rate, stereo mixed down).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The voice-prompt file to write.")],
    reference_text: Annotated[str | None, typer.Option(
        "--reference-text",
        help="Transcript of the audio (kept in the prompt; most families need it to clone).")] = None,
    model: _ModelOpt = None,
    family: _FamilyOpt = None,
    codec: _CodecOpt = None,
    request_option: Annotated[list[str] | None, typer.Option(
        "--request-option", "-r",
        help="Request option key=value that shapes the reference (e.g. preprocess_prompt=false, "
        "max_reference_seconds=30).")] = None,
    load_option: _LoadOpt = None,
    revision: _RevisionOpt = None,
    cache_dir: _CacheOpt = None,
) -> None:
    """Encode reference audio into a voice prompt (what --voice-ref prepares), for --voice-prompt."""
    from audiocpp.engine.audio.io import read_audio
    from audiocpp.engine.request_rules import REFERENCE_CAP_OPTION, check_reference_length
    from audiocpp.engine.session import cap_reference
    from audiocpp.engine.spec.options import parse_key_values, resolve_options
    from audiocpp.engine.voice_prompt import describe_prompt

    from .checks import check_input_file, check_out_file
    from .run import _warnings_on_stderr

    check_input_file(audio, "the reference audio")
    if str(out) == "-":
        raise UsageError("a voice prompt is written to a file, not stdout", hint="pass --out voice.prompt")
    check_out_file(out, "--out")
    raw = parse_key_values(request_option or [], flag="--request-option")
    text = (reference_text or "").strip()
    with _warnings_on_stderr():
        loaded = _load(model, family, codec=codec, load_options=load_option or [], revision=revision,
                       cache_dir=cache_dir)
        options = resolve_options(loaded.spec, "request",
                                  {**raw, **({"reference_text": text} if text else {})})
        reference = read_audio(audio)
        name = repr(str(audio))
        if check_reference_length(reference.duration, options.get(REFERENCE_CAP_OPTION),
                                  transcript=bool(text), name=name):
            reference = cap_reference(reference, float(options[REFERENCE_CAP_OPTION]), name)
        prompt = loaded.encode_voice_prompt(reference, text or None, options)
    prompt.save(out)
    if not text:
        print(f"note: the prompt has no transcript; {loaded.family} may need one to clone (--reference-text)",
              file=sys.stderr)
    _print_facts({"prompt_out": out, **describe_prompt(prompt), "audio_s": f"{reference.duration:.3f}"})


@codec_app.command("decode")
def decode_cmd(
    prompt: Annotated[Path, typer.Argument(
        help="A voice-prompt file (audiocpp codec encode, --voice-prompt-out).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output audio file ('-': stdout).")],
    fmt: Annotated[str | None, typer.Option(
        "--format", help="Output format (default from --out's extension; stdout: wav16).")] = None,
    sample_rate: Annotated[int | None, typer.Option(
        "--sample-rate", help="Resample the output to this rate (Hz).")] = None,
    model: _ModelOpt = None,
    family: _FamilyOpt = None,
    codec: _CodecOpt = None,
    load_option: _LoadOpt = None,
    revision: _RevisionOpt = None,
    cache_dir: _CacheOpt = None,
) -> None:
    """Decode a voice prompt's codes or latents to audio with the family's own decoder."""
    from audiocpp.engine.voice_prompt import describe_prompt, prompt_family

    from .checks import check_input_file, check_out_file, output_format
    from .pipes import AudioOutput, check_sample_rate, is_stdout, stdout_format

    check_input_file(prompt, "the voice prompt")
    if is_stdout(out):
        fmt = stdout_format(fmt, streaming=False)
    else:
        fmt = output_format(out, fmt)
        check_out_file(out, "--out")
    check_sample_rate(sample_rate, fmt)
    made_by = prompt_family(prompt)
    output = AudioOutput(out, fmt, streaming=False, target_rate=sample_rate)
    loaded = _load(model, family, codec=codec, load_options=load_option or [], revision=revision,
                   cache_dir=cache_dir, prompt_family=made_by if family is None and model is None else None)
    voice = loaded.load_voice_prompt(prompt)
    audio = loaded.decode_voice_prompt(voice)
    rate, seconds = output.close(audio)
    facts = describe_prompt(voice)
    facts["prompt_sample_rate"] = facts.pop("sample_rate", "?")
    _print_facts({"audio_out": out, **facts, "sample_rate": rate, "duration_s": f"{seconds:.3f}"},
                 output.info)
