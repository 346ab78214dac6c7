"""``audiocpp book``: its flags, then :class:`~audiocpp.book.job.Book` (``--list``, ``--check`` and the job).

The flags that mean what they mean for ``audiocpp`` keep its names (cli/options.py). The summary of a
run is printed on stdout as ``key=value`` lines (chapters, chunks, synthesized, reused, audio_s, the
timings, outputs).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from . import options as opt

SHORT_HELP = "Turn an EPUB, Markdown or text file into a chaptered audiobook."
HELP = ("Turn an EPUB, Markdown, HTML or text file into a chaptered audiobook: an .m4b with chapter "
    "marks (or one file per chapter), sentence captions, a read-along EPUB (word by word where the model "
    "times its words), ACX-ready loudness. Without --model: the default model (Kokoro). See docs/book.md.")


def book(
    input: Annotated[
        Path,
        typer.Argument(
            help="The book: .epub (EPUB 2 or 3), .md, .html or .txt; with --check, the audio file to check."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="The audiobook: an .m4b (AAC with chapter marks, tags and cover)."),
    ] = None,
    out_dir: Annotated[Path | None, opt.out_dir(
        "Instead of --out: one file per chapter in this folder, and an .m3u playlist.")] = None,
    fmt: Annotated[str | None, opt.fmt(
        "With --out-dir: mp3 (default; 192 kbps CBR), opus, flac or wav.")] = None,
    model: Annotated[str | None, opt.model()] = None,
    family: Annotated[str | None, opt.family()] = None,
    revision: Annotated[str | None, opt.revision()] = None,
    cache_dir: Annotated[Path | None, opt.cache_dir()] = None,
    codec: Annotated[Path | None, opt.codec()] = None,
    device: Annotated[str | None, opt.device()] = None,
    voice_ref: Annotated[Path | None, opt.voice_ref(
        "The narrator: reference audio every chunk clones.")] = None,
    reference_text: Annotated[str | None, opt.reference_text()] = None,
    voice_prompt: Annotated[Path | None, opt.voice_prompt(
        "The narrator: a saved voice prompt (--voice-prompt-out, `codec encode`).")] = None,
    instruct: Annotated[str | None, opt.instruct(
        "Design the narrator from a description (families with voice design).")] = None,
    voice: Annotated[str | None, opt.voice(
        "The narrator: a named voice of the model (`audiocpp voices`), or a mix 'jf_alpha(2)+jm_kumo(1)' "
        "(families with named voices: Kokoro; default: the model's default voice).")] = None,
    language: Annotated[str | None, opt.language()] = None,
    seed: Annotated[int | None, opt.seed(
        "Seed of every chunk (default: one drawn once and kept in the work folder).")] = None,
    voice_continuity: Annotated[
        str,
        typer.Option(
            "--voice-continuity",
            help="auto: without --voice-ref/--voice-prompt the first chunk's voice is cloned by every other; "
            "none: every chunk is its own request.",
        ),
    ] = "auto",
    request_option: Annotated[list[str] | None, opt.request_option("Request option key=value of every chunk "
            "(repeatable).")] = None,
    session_option: Annotated[list[str] | None, opt.session_option()] = None,
    load_option: Annotated[list[str] | None, opt.load_option()] = None,
    chapters: Annotated[
        str | None,
        typer.Option("--chapters", help="Chapters to make, e.g. 3-5,8 (numbers as --list shows them)."),
    ] = None,
    list_: Annotated[
        bool,
        typer.Option(
            "--list", help="Print the chapters, their lengths and estimated durations; synthesize nothing."
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Report INPUT's loudness, peaks and noise floor per chapter against ACX's rules."
        ),
    ] = False,
    batch_size: Annotated[int | None, opt.batch_size(
        "Chunks synthesized together as rows of one batch (default: the family's on its device: 8; "
        "OmniVoice on the CPU 1, docs/batching.md).")] = None,
    threads: Annotated[int | None, opt.threads("Torch threads (Ray: per actor).")] = None,
    timeout: Annotated[float | None, opt.timeout(
        "Seconds each chunk may take from when it is queued; one that takes longer fails the run (the chunks "
        "done are kept for the next).")] = None,
    ray: Annotated[bool, opt.ray("Synthesize on a local Ray instance.")] = False,
    ray_address: Annotated[str | None, opt.ray_address(
        "Synthesize on the Ray cluster at this address.")] = None,
    workers: Annotated[int, opt.workers("Ray actors, each loading the model once.")] = 1,
    num_cpus: Annotated[float, opt.num_cpus()] = 1.0,
    num_gpus: Annotated[float, opt.num_gpus()] = 0.0,
    work_dir: Annotated[
        Path | None,
        typer.Option(
            "--work-dir",
            help="Where finished chunks are kept for resuming (default: beside the output, BOOK.work "
            "for --out BOOK.m4b, DIR.work for --out-dir DIR).",
        ),
    ] = None,
    pause_sentence: Annotated[
        float, typer.Option("--pause-sentence", help="Seconds between sentences.")
    ] = 0.35,
    pause_paragraph: Annotated[
        float, typer.Option("--pause-paragraph", help="Seconds between paragraphs.")
    ] = 0.8,
    pause_chapter: Annotated[
        float,
        typer.Option(
            "--pause-chapter", help="Seconds at the end of each chapter (ACX: held to 1-5 s of room tone)."
        ),
    ] = 2.0,
    chapter_titles: Annotated[
        bool, typer.Option("--chapter-titles/--no-chapter-titles", help="Speak each chapter's title first.")
    ] = True,
    max_chunk_chars: Annotated[
        int,
        typer.Option(
            "--max-chunk-chars", help="Longer sentences are cut at clauses into chunks of at most this."
        ),
    ] = 250,
    master: Annotated[
        str | None,
        typer.Option(
            "--master",
            help="acx (default, every output): ACX's loudness, peaks and room tone; none: the model's "
            "levels.",
        ),
    ] = None,
    narrator: Annotated[str, typer.Option("--narrator", help="The narrator's name, for the tags.")] = "",
    title: Annotated[
        str | None, typer.Option("--title", help="The book's title (default: from the book).")
    ] = None,
    author: Annotated[
        str | None, typer.Option("--author", help="The author (default: from the book).")
    ] = None,
    cover: Annotated[Path | None, typer.Option("--cover", help="Cover image (JPEG or PNG).")] = None,
    sample_rate: Annotated[
        int | None,
        typer.Option("--sample-rate", help="Output rate (default: the model's, where the format takes it)."),
    ] = None,
    bitrate: Annotated[
        str | None,
        typer.Option(
            "--bitrate", help="Lossy formats' bit rate, e.g. 64k (m4b default), 192k (mp3 default)."
        ),
    ] = None,
    captions: Annotated[
        bool,
        typer.Option(
            "--captions/--no-captions", help="Write .srt and .vtt sentence captions beside the audio."
        ),
    ] = True,
    word_captions: Annotated[
        bool,
        typer.Option(
            "--word-captions",
            help="A caption cue per word instead of per sentence (families that time their words: Kokoro).",
        ),
    ] = False,
    read_along: Annotated[
        Path | None,
        typer.Option(
            "--read-along",
            help="Also write an EPUB 3 with Media Overlays: the text highlighted as it is read.",
        ),
    ] = None,
    quiet: Annotated[bool, opt.quiet("No progress bar and no notes on stderr.")] = False,
) -> None:
    from audiocpp.book.job import Book
    from audiocpp.book.listing import list_chapters
    from audiocpp.book.settings import BookSettings, check_settings
    from audiocpp.engine.spec.options import parse_key_values

    if check:
        from audiocpp.book.check import run_check

        run_check(input)
        return
    settings = BookSettings(
        out=out,
        out_dir=out_dir,
        fmt=fmt,
        read_along=read_along,
        captions=captions,
        word_captions=word_captions,
        work_dir=work_dir,
        model=model,
        family=family,
        revision=revision,
        cache_dir=cache_dir,
        codec=codec,
        device=device,
        voice_ref=voice_ref,
        reference_text=reference_text,
        voice_prompt=voice_prompt,
        instruct=instruct,
        voice=voice,
        language=language,
        seed=seed,
        voice_continuity=voice_continuity,
        request_options=parse_key_values(request_option or [], flag="--request-option"),
        session_options=parse_key_values(session_option or [], flag="--session-option"),
        load_options=parse_key_values(load_option or [], flag="--load-option"),
        chapters=chapters,
        chapter_titles=chapter_titles,
        max_chunk_chars=max_chunk_chars,
        title=title,
        author=author,
        narrator=narrator,
        cover=cover,
        pause_sentence=pause_sentence,
        pause_paragraph=pause_paragraph,
        pause_chapter=pause_chapter,
        master=master,
        sample_rate=sample_rate,
        bitrate=bitrate,
        batch_size=batch_size,
        threads=threads,
        timeout=timeout,
        ray=ray,
        ray_address=ray_address,
        workers=workers,
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        quiet=quiet,
    )
    if list_:
        check_settings(settings, listing=True)
        list_chapters(Book.open(input, title=title, author=author), settings)
        return
    check_settings(settings)
    result = Book.open(input, title=title, author=author).render(settings)
    for key, value in result.summary().items():
        print(f"{key}={value}")
    sys.stdout.flush()
