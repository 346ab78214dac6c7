"""The flags several subcommands share, declared once: each flag's names and short form, and its help where
it means the same everywhere (a command whose flag means "the default of every item" or "the narrator"
passes its own words). ``audiocpp``, ``batch``, ``book`` and ``serve`` declare theirs from here, so one
flag never gets two spellings or two short forms.
"""

from __future__ import annotations

from typing import Any

import typer

MODEL_HELP = ("Model path or name, as for `audiocpp`; omit for the default model (Kokoro), or with --family "
              "for that family's demo model.")


def _family_names(incomplete: str) -> list[str]:
    """Shell completion of --family: the installed families."""
    from audiocpp.engine.registry import families

    return [name for name in sorted(families()) if name.startswith(incomplete)]


def family(help: str = "Model family (auto-detected from --model when omitted).") -> Any:
    return typer.Option("--family", "-f", autocompletion=_family_names, help=help)


def model(help: str = MODEL_HELP) -> Any:
    return typer.Option("--model", "-m", help=help)


def revision(help: str = "Branch, tag or commit of a --model name.") -> Any:
    return typer.Option("--revision", help=help)


def cache_dir(
        help: str = "Hugging Face cache for --model names (default: HF_HUB_CACHE or HF_HOME/hub).") -> Any:
    return typer.Option("--cache-dir", help=help)


def codec() -> Any:
    return typer.Option("--codec", help="Separate codec GGUF where a family uses one (load option 'codec').")


def device() -> Any:
    return typer.Option("--device", help="cpu (the default, or $AUDIOCPP_DEVICE), cuda, cuda:N, mps or auto "
                        "(the best this machine has). Load option 'device'.")


def voice_ref(
        help: str = "Reference audio for cloning (wav/flac/ogg/mp3; any rate, stereo is mixed down).") -> Any:
    return typer.Option("--voice-ref", help=help)


def reference_text(help: str = "Transcript of --voice-ref.") -> Any:
    return typer.Option("--reference-text", help=help)


def voice_prompt(help: str = "Reuse a prepared voice prompt saved with --voice-prompt-out.") -> Any:
    return typer.Option("--voice-prompt", help=help)


def voice(help: str = "A named voice of the model (`audiocpp voices`), or a mix: 'jf_alpha(2)+jm_kumo(1)' "
          "(request option 'voice'; Kokoro).") -> Any:
    return typer.Option("--voice", help=help)


def instruct(help: str = "Voice design description.") -> Any:
    return typer.Option("--instruct", help=help)


def language(help: str = "Language name or code.") -> Any:
    return typer.Option("--language", help=help)


def speed(help: str = "Speaking rate, >1 faster (request option 'speed').") -> Any:
    return typer.Option("--speed", help=help)


def seed(help: str = "Random seed (request option 'seed').") -> Any:
    return typer.Option("--seed", help=help)


def task(help: str = "tts, clon (voice cloning) or design (voice design).") -> Any:
    return typer.Option("--task", help=help)


def fmt(help: str) -> Any:
    return typer.Option("--format", help=help)


def request_option(help: str = "Request option key=value (repeatable).") -> Any:
    return typer.Option("--request-option", "-r", help=help)


def session_option(help: str = "Session option family.key=value (repeatable).") -> Any:
    return typer.Option("--session-option", "-s", help=help)


def load_option(help: str = "Load option key=value (repeatable).") -> Any:
    return typer.Option("--load-option", "-l", help=help)


def progress(help: str = "Progress bar on stderr (default: when stderr is a terminal).") -> Any:
    return typer.Option("--progress/--no-progress", help=help)


def quiet(help: str) -> Any:
    return typer.Option("--quiet", "-q", help=help)


def json_output() -> Any:
    return typer.Option("--json", help="Machine-readable output.")


def overwrite(help: str) -> Any:
    return typer.Option("--overwrite", help=help)


def threads(help: str) -> Any:
    return typer.Option("--threads", help=help)


def workers(help: str) -> Any:
    return typer.Option("--workers", "-w", help=help)


def batch_size(help: str) -> Any:
    return typer.Option("--batch-size", help=help)


def ray(help: str) -> Any:
    return typer.Option("--ray", help=help)


def ray_address(help: str = "Run on the Ray cluster at this address (HEAD:6379).") -> Any:
    return typer.Option("--ray-address", help=help)


def num_cpus(help: str = "Ray: CPUs reserved per actor.") -> Any:
    return typer.Option("--num-cpus", help=help)


def num_gpus(help: str = "Ray: GPUs reserved per actor.") -> Any:
    return typer.Option("--num-gpus", help=help)


def out_dir(help: str, *, short: bool = False) -> Any:
    """``short``: ``-o`` too (``batch``, which has no --out)."""
    return typer.Option("--out-dir", *(["-o"] if short else []), help=help)


def timeout(help: str, *, minimum: float | None = None) -> Any:
    return typer.Option("--timeout", min=minimum, metavar="SECONDS", help=help)
