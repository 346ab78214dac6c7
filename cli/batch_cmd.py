"""``audiocpp batch``: its flags (the job is audiocpp.batch.run). The flags that mean what they mean for
``audiocpp`` keep its names (cli/options.py) and become every item's defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import options as opt

SHORT_HELP = "Synthesize every line of a JSONL manifest, locally or on Ray."
HELP = ("Synthesize every line of a JSONL manifest into --out-dir, on local worker processes or on Ray. "
        "Lines: "
        "{\"id\", \"text\", and optionally task, voice_ref, reference_text, voice_prompt, voice, speed, "
        "phonemes, "
        "instruct, language, seed, options, out}; flags give the defaults. Without --model: the default "
        "model "
        "(Kokoro). See docs/batch.md.")


def batch(
    manifest: Annotated[Path, typer.Argument(help="JSONL manifest, one utterance a line.")],
    out_dir: Annotated[Path | None, opt.out_dir(
        "Folder for <id>.<ext> files and manifest.jsonl (created if missing).", short=True)] = None,
    family: Annotated[str | None, opt.family()] = None,
    model: Annotated[str | None, opt.model()] = None,
    revision: Annotated[str | None, opt.revision()] = None,
    cache_dir: Annotated[Path | None, opt.cache_dir()] = None,
    codec: Annotated[Path | None, opt.codec()] = None,
    device: Annotated[str | None, opt.device()] = None,
    task: Annotated[str, opt.task("Default task: tts, clon or design.")] = "tts",
    voice_ref: Annotated[Path | None, opt.voice_ref("Default reference audio (field voice_ref).")] = None,
    reference_text: Annotated[str | None, opt.reference_text("Default transcript of the reference.")] = None,
    voice_prompt: Annotated[Path | None, opt.voice_prompt(
        "Default saved voice prompt (field voice_prompt).")] = None,
    voice: Annotated[str | None, opt.voice(
        "Default named voice of the model, or a mix 'jf_alpha(2)+jm_kumo(1)' (field voice; Kokoro: "
        "`audiocpp voices`).")] = None,
    speed: Annotated[float | None, opt.speed(
        "Default speaking rate, >1 faster (field speed; families with the option).")] = None,
    instruct: Annotated[str | None, opt.instruct("Default voice design description.")] = None,
    language: Annotated[str | None, opt.language("Default language name or code.")] = None,
    seed: Annotated[int | None, opt.seed(
        "Default seed (unset: a random seed per item, recorded in its row).")] = None,
    fmt: Annotated[str | None, opt.fmt("wav16 (default), wav24, wav32, flac or ogg.")] = None,
    request_option: Annotated[list[str] | None, opt.request_option(
        "Default request option key=value (repeatable).")] = None,
    session_option: Annotated[list[str] | None, opt.session_option()] = None,
    load_option: Annotated[list[str] | None, opt.load_option()] = None,
    workers: Annotated[int, opt.workers("Worker processes (Ray: actors), each loading the model once.")] = 1,
    threads: Annotated[int | None, opt.threads(
        "Torch threads per worker (default: cores / workers; Ray: --num-cpus).")] = None,
    overwrite: Annotated[bool, opt.overwrite("Redo items an earlier run finished.")] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Only check the manifest (every line) and exit.")] = False,
    progress: Annotated[bool | None, opt.progress()] = None,
    ray: Annotated[bool, opt.ray("Run on a local Ray instance (pip install 'audiocpp[ray]').")] = False,
    ray_address: Annotated[str | None, opt.ray_address()] = None,
    num_cpus: Annotated[float, opt.num_cpus()] = 1.0,
    num_gpus: Annotated[float, opt.num_gpus()] = 0.0,
    batch_size: Annotated[int | None, opt.batch_size(
        "Items each worker synthesizes together, as rows of one batch (Ray: items per actor call); 1: one at "
        "a time; default: what batching gains for the family on its device (8; OmniVoice on the CPU 1, "
        "docs/batching.md).")] = None,
    timeout: Annotated[float | None, opt.timeout(
        "Seconds each item may take from when its worker queues it; one that takes longer is cancelled and "
        "recorded as failed (the others go on).")] = None,
) -> None:
    from audiocpp.batch.manifest import Defaults
    from audiocpp.batch.run import BatchArgs, run_batch

    defaults = Defaults(task=task, voice_ref=voice_ref, reference_text=reference_text,
                        voice_prompt=voice_prompt, voice=voice, speed=speed, instruct=instruct,
                        language=language, seed=seed, fmt=fmt)
    run_batch(BatchArgs(
        manifest=manifest, out_dir=out_dir, family=family, model=model, revision=revision,
        cache_dir=cache_dir, codec=codec, device=device, defaults=defaults,
        request_options=request_option or [], session_options=session_option or [],
        load_options=load_option or [], workers=workers, threads=threads, overwrite=overwrite, check=check,
        progress=progress, ray=ray, ray_address=ray_address, num_cpus=num_cpus, num_gpus=num_gpus,
        batch_size=batch_size, timeout=timeout,
    ))
