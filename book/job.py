"""The book job: read, plan, synthesize what is missing, assemble and master each chapter as its chunks
finish, write the outputs. ``Book`` is the Python form; ``audiocpp book`` builds one and calls it."""

from __future__ import annotations

import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audiocpp.engine.errors import AudiocppError, UsageError

from .plan import ChapterPlan, parse_selection, plan_book
from .readers import read_book
from .settings import BookSettings, check_settings
from .text import BookText, Cover, image_type
from .voice import Narration, anchor_text, plan_narration
from .workdir import WorkDir, digest

#: bump when what a chunk's key stands for changes (its audio would differ for the same key)
CHUNK_VERSION = 1
CHAPTER_VERSION = 2  # 2: a chapter's record holds its sentences' timed words


@dataclass
class BookResult:
    outputs: list[Path]
    chapters: int
    chunks: int  # distinct chunks of the selected chapters
    synthesized: int  # made in this run
    reused: int  # found in the work folder
    audio_s: float
    timings: dict[str, float] = field(default_factory=dict)
    narration: str = ""
    work_dir: Path | None = None
    chapter_s: list[float] = field(default_factory=list)  # each chapter's length in the output, in order
    rate: int = 0  # the audiobook's sample rate
    timed_words: int = 0  # words placed on the timeline (families that time words; else 0)

    def summary(self) -> dict[str, Any]:
        out = {
            "chapters": self.chapters,
            "chunks": self.chunks,
            "synthesized": self.synthesized,
            "reused": self.reused,
            "audio_s": f"{self.audio_s:.2f}",
        }
        out.update({key: f"{value:.2f}" for key, value in self.timings.items()})
        synth = self.timings.get("synth_s", 0.0)
        if synth > 0 and self.synthesized:
            post = sum(self.timings.get(k, 0.0) for k in ("assemble_s", "master_s", "encode_s"))
            out["post_share"] = f"{post / synth:.3f}"
        out["chapter_s"] = ",".join(f"{d:.3f}" for d in self.chapter_s)
        out["rate"] = self.rate
        out["timed_words"] = self.timed_words
        out["voice"] = self.narration
        out["work_dir"] = str(self.work_dir)
        out["outputs"] = ",".join(str(p) for p in self.outputs)
        return out


class Book:
    """A book file read and cut into chapters; ``render`` makes its audiobook.

    >>> book = Book.open("novel.epub")                       # chapters, title, author, cover
    >>> [c.title for c in book.text.chapters]
    >>> book.render(out="novel.m4b", model="voxcpm2-q8_0.gguf", voice_ref="me.wav",
    ...             reference_text="What I say in me.wav.", chapters="1-3")
    """

    def __init__(self, text: BookText, path: Path) -> None:
        self.text = text
        self.path = path

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        title: str | None = None,
        author: str | None = None,
        cover: str | Path | None = None,
    ) -> Book:
        from .extra import need_extra

        need_extra()
        path = Path(path)
        text = read_book(path)
        if title:
            text.title = title
        if author:
            text.author = author
        if cover is not None:
            text.cover = read_cover(Path(cover))
        return cls(text, path)

    def plans(self, settings: BookSettings) -> list[ChapterPlan]:
        return plan_book(self.text, titles=settings.chapter_titles, max_chars=settings.max_chunk_chars)

    def render(self, settings: BookSettings | None = None, **options: Any) -> BookResult:
        """Make the audiobook (``settings``, or its fields as keywords: ``out=``, ``model=``...)."""
        if settings is None:
            settings = BookSettings(
                **{k: (Path(v) if k in _PATHS and v is not None else v) for k, v in options.items()}
            )
        return _Job(self, settings).run()


_PATHS = {
    "out",
    "out_dir",
    "read_along",
    "work_dir",
    "cache_dir",
    "codec",
    "voice_ref",
    "voice_prompt",
    "cover",
}


def read_cover(path: Path) -> Cover:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise UsageError(f"cannot read --cover {str(path)!r}: {error.strerror or error}") from None
    kind = image_type(data)
    if kind is None:
        raise UsageError(
            f"--cover {str(path)!r} is not a JPEG or PNG image", hint="convert it to .jpg or .png"
        )
    return Cover(data, kind)


def model_identity(path: Path) -> list[Any]:
    """What tells this model's files apart without reading them: names, sizes, modification times."""
    path = path.resolve()
    if path.is_file():
        stat = path.stat()
        return [str(path), stat.st_size, stat.st_mtime_ns]
    entries = []
    for child in sorted(path.rglob("*"))[:5000]:
        if child.is_file():
            stat = child.stat()
            entries.append([str(child.relative_to(path)), stat.st_size, stat.st_mtime_ns])
    return [str(path), entries]


def _file_digest(path: Path | None) -> str | None:
    from audiocpp.engine.hashing import file_sha256

    return file_sha256(path) if path is not None else None


class _Job:
    def __init__(self, book: Book, settings: BookSettings) -> None:
        self.book = book
        self.s = settings
        self.say = (lambda *a: None) if settings.quiet else (lambda *a: print(*a, file=sys.stderr))

    # -- preparing -------------------------------------------------------------------------------------------
    def run(self) -> BookResult:
        from audiocpp.batch.manifest import times_words
        from audiocpp.engine.loader import ModelRef, plan_load
        from audiocpp.engine.spec.options import resolve_options

        from .media import find_ffmpeg

        s = self.s
        clock = time.perf_counter()
        check_settings(s)
        find_ffmpeg()
        find_ffmpeg("ffprobe")
        if s.on_ray:
            from audiocpp.batch.ray_runner import import_ray

            import_ray()
        if s.cover is not None:
            self.book.text.cover = read_cover(s.cover)
        plans = self.book.plans(s)
        selected = [plans[n - 1] for n in parse_selection(s.chapters, len(plans))]
        selected = [p for p in selected if p.units]
        if not selected:
            raise UsageError("the chapters chosen have nothing to say", hint="check --chapters (see --list)")
        load_options = dict(s.load_options)
        if s.codec is not None:
            load_options["codec"] = str(s.codec)
        if s.device is not None:
            load_options["device"] = s.device
        plan = plan_load(ModelRef(s.model, s.family, s.revision, s.cache_dir, s.progress), load_options)
        spec = plan.spec
        session_options = resolve_options(spec, "session", s.session_options, fill_defaults=False)
        narration = plan_narration(
            spec,
            voice_ref=s.voice_ref is not None,
            voice_prompt=s.voice_prompt is not None,
            instruct=s.instruct,
            continuity=s.voice_continuity,
            voice=s.voice,
        )
        if s.word_captions and not times_words(spec):
            raise UsageError(
                f"{spec.family} does not time its words, so --word-captions has nothing to write",
                hint="drop --word-captions (the captions are per sentence); word timings come from "
                "families with the word_timestamps capability (kokoro)",
            )
        request = self._request_options(spec, narration)
        if plan.note:
            self.say(f"note: {plan.note}")
        for note in self.book.text.notes:
            self.say(f"note: {note}")
        work = WorkDir(s.default_work_dir())
        work.lock()
        try:
            work.remove_temporaries()
            seed = self._seed(work)
            return _Synthesis(
                self, plan, session_options, narration, request, seed, work, plans, selected, clock
            ).run()
        finally:
            work.release()

    def _request_options(self, spec: Any, narration: Narration) -> dict[str, Any]:
        """The request options every chunk shares, checked against the spec (as batch lines are)."""
        from audiocpp.engine.request_rules import ReferenceInputs, check_request
        from audiocpp.engine.spec.options import resolve_options
        from audiocpp.engine.tasks import parse_task

        s = self.s
        first_class = {
            "language": s.language,
            "seed": s.seed,
            "reference_text": s.reference_text,
            "instruct": narration.instruct,
            "voice": narration.voice,
        }
        merged = dict(s.request_options)
        for name, value in first_class.items():
            if value is not None:
                if name in merged and str(merged[name]) != str(value):
                    raise UsageError(
                        f"{name} is given twice with different values ({merged[name]!r} and {value!r})"
                    )
                merged[name] = value
        typed = resolve_options(spec, "request", merged)
        tasks = [
            (narration.task, s.voice_ref is not None, s.voice_prompt is not None, bool(s.reference_text))
        ]
        if narration.anchored:  # the anchor, then every chunk cloning it (with its transcript)
            tasks = [(narration.anchor_task, False, False, False), ("clone", True, False, True)]
        for task, voice, prompt, transcript in tasks:
            given = ReferenceInputs(
                voice=voice,
                voice_prompt=prompt,
                reference_text=transcript,
                reference_options=ReferenceInputs.of(
                    spec, typed, voice=voice, voice_prompt=prompt
                ).reference_options,
            )
            check_request(spec, parse_task(task), given)
        if s.voice_ref is not None:
            from audiocpp.engine.audio.io import audio_duration
            from audiocpp.engine.request_rules import REFERENCE_CAP_OPTION, check_reference_length

            duration = audio_duration(s.voice_ref)
            if duration is not None:
                check_reference_length(
                    duration,
                    typed.get(REFERENCE_CAP_OPTION),
                    transcript=bool(s.reference_text),
                    name=repr(str(s.voice_ref)),
                )
        return {
            k: v for k, v in merged.items() if k not in ("language", "seed", "reference_text", "instruct")
        }

    def _seed(self, work: WorkDir) -> int:
        if self.s.seed is not None:
            return self.s.seed
        seed = work.state.get("seed")
        if not isinstance(seed, int) or isinstance(seed, bool):
            seed = random.SystemRandom().randrange(1, 2**31 - 1)
            work.state["seed"] = seed
            work.save_state()
        return seed


class _Synthesis:
    """One run over the work folder: keys, what is missing, synthesis, chapters, outputs."""

    def __init__(
        self,
        job: _Job,
        plan: Any,
        session_options: dict[str, Any],
        narration: Narration,
        request: dict[str, Any],
        seed: int,
        work: WorkDir,
        plans: list[ChapterPlan],
        selected: list[ChapterPlan],
        clock: float,
    ) -> None:
        self.job, self.s, self.say = job, job.s, job.say
        self.plan, self.session_options, self.narration = plan, session_options, narration
        self.request, self.seed, self.work = request, seed, work
        self.plans, self.selected, self.clock = plans, selected, clock
        self.timings = {"assemble_s": 0.0, "master_s": 0.0, "encode_s": 0.0, "synth_s": 0.0, "load_s": 0.0}
        self.synthesized = 0
        self.failures: list[tuple[str, str]] = []
        self.chapter_files: dict[int, Any] = {}
        self.rate: int | None = None  # the model's
        self.out_rate = 0  # the audiobook's

    # -- keys ------------------------------------------------------------------------------------------------
    def base(self) -> dict[str, Any]:
        s = self.s
        return {
            "v": CHUNK_VERSION,
            "family": self.plan.family,
            "model": model_identity(self.plan.path),
            "load": self.plan.load_options,
            "session": self.session_options,
            "options": self.request,
            "language": s.language,
            "seed": self.seed,
        }

    def keys(self) -> None:
        s, base = self.s, self.base()
        self.anchor: tuple[str, str] | None = None  # (key, text)
        if self.narration.anchored:
            anchor_base = {**base, "task": self.narration.anchor_task, "instruct": self.narration.instruct}
            known = self.work.state.setdefault("narrators", {})
            slot = digest(anchor_base)
            text = known.get(slot) or anchor_text(self.plans)
            if known.get(slot) != text:
                known[slot] = text
                self.work.save_state()
            self.anchor = (digest({**anchor_base, "text": text}), text)
            body = {**base, "task": "clone", "voice": {"narrator": self.anchor[0]}}
        else:
            voice = {
                "ref": _file_digest(s.voice_ref),
                "reference_text": s.reference_text,
                "prompt": _file_digest(s.voice_prompt),
                "instruct": self.narration.instruct,
            }
            body = {**base, "task": self.narration.task, "voice": voice}
        for chapter in self.plans:
            for unit in chapter.units:
                if self.anchor is not None and unit.text == self.anchor[1]:
                    unit.key = self.anchor[0]  # the narrator's own sentence: its audio is the reference
                else:
                    unit.key = digest({**body, "text": unit.text})

    def chapter_key(self, chapter: ChapterPlan) -> str:
        s = self.s
        return digest(
            {
                "v": CHAPTER_VERSION,
                "units": chapter.keys,
                "title": chapter.title,
                "sentences": [(x.text, x.paragraph, x.units, x.pause_before) for x in chapter.sentences],
                "pauses": [s.pause_sentence, s.pause_paragraph, s.pause_chapter],
                "master": s.mastering,
            }
        )

    # -- items -----------------------------------------------------------------------------------------------
    def item(self, key: str, text: str, index: int, *, anchor: bool = False) -> Any:
        from audiocpp.batch.manifest import Item

        s, n = self.s, self.narration
        common = {
            "id": f"c{key[:24]}",
            "line": 0,
            "index": index,
            "text": text,
            "out": f"{key}.wav",
            "fmt": "wav32",
            "language": s.language,
            "seed": self.seed,
            "options": dict(self.request),
        }
        if anchor:
            return Item(task=n.anchor_task, instruct=n.instruct, **common)
        if self.anchor is not None:
            return Item(
                task="clone",
                voice_ref=str(self.work.voice(self.anchor[0]).resolve()),
                reference_text=self.anchor[1],
                **common,
            )
        return Item(
            task=n.task,
            voice_ref=str(s.voice_ref.resolve()) if s.voice_ref else None,
            reference_text=s.reference_text,
            voice_prompt=str(s.voice_prompt.resolve()) if s.voice_prompt else None,
            instruct=n.instruct,
            **common,
        )

    def todo(self) -> list[Any]:
        """Every missing chunk of the selected chapters: chapter by chapter, longest first in each (the
        batch stays full, and chapters finish, and are assembled, one after another)."""
        items, seen = [], set()
        for chapter in self.selected:
            if self.work.chapter_file(self.chapter_key(chapter)).is_file():
                continue
            units = sorted(chapter.units, key=lambda u: -len(u.text))
            for unit in units:
                if unit.key in seen or self.work.has_chunk(unit.key):
                    continue
                if self.anchor is not None and unit.key == self.anchor[0]:
                    continue  # made first, on its own
                seen.add(unit.key)
                items.append(self.item(unit.key, unit.text, len(items)))
        return items

    # -- the run ---------------------------------------------------------------------------------------------
    def run(self) -> BookResult:
        from audiocpp.batch.synth import JobSpec
        from audiocpp.engine.device import DEVICE_OPTION, resolve_device
        from audiocpp.engine.registry import get_family

        from .progress import BookProgress

        s = self.s
        self.keys()
        items = self.todo()
        need_anchor = self.anchor is not None and not self.work.voice(self.anchor[0]).is_file()
        if need_anchor and self.work.has_chunk(self.anchor[0]):  # its chunk survived, its WAV did not
            self._write_voice(*self.work.read_chunk(self.anchor[0]))
            need_anchor = False
        distinct = {u.key for c in self.selected for u in c.units}
        batch_size = s.batch_size
        if batch_size is None:
            device = resolve_device(self.plan.load_options.get(DEVICE_OPTION)).type
            batch_size = get_family(self.plan.family).default_max_batch(device)
        threads = s.threads or (max(1, int(s.num_cpus)) if s.on_ray else None)
        job = JobSpec(
            family=self.plan.family,
            model_path=str(self.plan.path.resolve()),
            load_options=self.plan.load_options,
            session_options=self.s.session_options,
            threads=threads,
            batch_size=batch_size,
            timeout_s=s.timeout,
        )
        count = len(items) + int(need_anchor)
        self.say(
            f"book: {self.job.book.text.title!r}, {len(self.selected)} chapter"
            f"{'s' if len(self.selected) != 1 else ''}, {len(distinct)} chunks, {count} to synthesize "
            f"({'Ray' if s.on_ray else 'local'}, batches of up to {batch_size}); voice: "
            f"{self.narration.describe(self.plan.family)}"
        )
        progress = BookProgress(
            sum(len(i.text) for i in items) + (len(self.anchor[1]) if need_anchor else 0),
            enabled=False if s.quiet else s.progress,
        )
        runner: Any = None
        started: list[float] = []
        try:
            self._assemble_ready()
            if count:
                if s.on_ray:
                    from .runner import RayRunner

                    runner = RayRunner(
                        job,
                        address=s.ray_address,
                        workers=s.workers,
                        num_cpus=s.num_cpus,
                        num_gpus=s.num_gpus,
                    )
                else:
                    from .runner import LocalRunner

                    runner = LocalRunner(job)

                def ready() -> None:
                    if not started:
                        started.append(time.perf_counter())
                    progress.start()

                def record(item: Any, done: Any) -> None:
                    self._record(item, done, progress)

                t0 = time.perf_counter()
                if need_anchor:
                    assert self.anchor is not None
                    anchor = self.item(self.anchor[0], self.anchor[1], 0, anchor=True)
                    runner.run([anchor], record, ready)
                    if self.failures:
                        raise self._failed(1)
                    self._write_voice(*self.work.read_chunk(self.anchor[0]))
                    self._assemble_ready()
                if items:
                    runner.run(items, record, ready)
                progress.close()
                end = time.perf_counter()
                self.timings["load_s"] = (started[0] - t0) if started else 0.0
                self.timings["synth_s"] = end - (started[0] if started else t0)
                if self.failures:
                    raise self._failed(count)
        except (KeyboardInterrupt, SystemExit) as stop:  # Ctrl-C, or SIGTERM (cli/main.py's Terminated)
            if isinstance(stop, SystemExit) and type(stop).__name__ != "Terminated":
                raise
            progress.close()
            word, status = (("interrupted", 130) if isinstance(stop, KeyboardInterrupt)
                            else ("terminated", stop.code))
            self.say(
                f"{word}: {self.synthesized} chunks synthesized in this run are kept in "
                f"{str(self.work.path)!r}; rerun the same command to go on from there"
            )
            raise SystemExit(status) from None
        finally:
            progress.close()
            if runner is not None:
                runner.close()
        self._record_speed(progress)
        self._assemble_ready(final=True)
        outputs = self._write_outputs()
        self.timings["total_s"] = time.perf_counter() - self.clock
        audio = sum(self.chapter_files[c.number].duration for c in self.selected)
        return BookResult(
            outputs,
            len(self.selected),
            len(distinct),
            self.synthesized,
            len(distinct) - self.synthesized,
            audio,
            self.timings,
            self.narration.describe(self.plan.family),
            self.work.path,
            [self.chapter_files[c.number].duration for c in self.selected],
            self.out_rate,
            sum(len(ws) for c in self.selected for ws in self.chapter_files[c.number].words),
        )

    def _write_voice(self, samples: Any, rate: int) -> None:
        import soundfile as sf

        assert self.anchor is not None
        dest = self.work.voice(self.anchor[0])
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        sf.write(tmp, samples, rate, format="WAV", subtype="FLOAT")
        os.replace(tmp, dest)

    def _record(self, item: Any, done: Any, progress: Any) -> None:
        key = item.out[:-4]
        for message in done.warnings:
            self.say(f"warning: chunk {item.text[:40]!r}: {message}")
        if done.row.get("status") != "ok" or done.audio is None:
            self.failures.append((item.text, str(done.row.get("error") or "no audio")))
            return
        if done.words:  # before the audio: a chunk that is there has its words
            self.work.write_words(key, [[w.text, w.start, w.end, w.phonemes] for w in done.words])
        self.work.write_chunk(key, done.audio.samples, done.audio.sample_rate)
        self.synthesized += 1
        progress.advance(len(item.text), done.audio.duration)
        self._assemble_ready()

    def _failed(self, total: int) -> AudiocppError:
        text, error = self.failures[0]
        if len(self.failures) > 1 and len({e for _, e in self.failures}) == 1:
            message = f"{len(self.failures)} of {total} chunks failed, all with: {error}"
        else:
            message = f"{len(self.failures)} of {total} chunks failed, e.g. {text[:60]!r}: {error}"
        return AudiocppError(
            message,
            hint=f"the {self.synthesized} chunks made are kept in {str(self.work.path)!r}; fix the "
            "cause and rerun the same command to make only the missing ones"
            if self.synthesized
            else "fix the cause and rerun the same command",
        )

    def _record_speed(self, progress: Any) -> None:
        synth, chars = self.timings["synth_s"], progress.total
        if synth > 0 and chars and self.synthesized:
            label = f"{self.s.family or ''}|{self.s.model or ''}"
            self.work.state.setdefault("speed", {})[label] = {
                "s_per_char": synth / chars,
                "audio_s_per_char": progress.audio_s / chars,
            }
            self.work.save_state()

    # -- chapters --------------------------------------------------------------------------------------------
    def _assemble_ready(self, final: bool = False) -> None:
        """Assemble (and master) every selected chapter whose chunks are all there."""
        for chapter in self.selected:
            if chapter.number in self.chapter_files:
                continue
            key = self.chapter_key(chapter)
            cached = self.work.read_chapter(key)
            if cached is not None:
                meta = cached[2]
                self._keep(chapter, key, cached[0].size, cached[1], meta["sentences"], meta.get("words"))
                continue
            if not all(self.work.has_chunk(k) for k in chapter.keys):
                if final:
                    raise AudiocppError(
                        f"chapter {chapter.number} is missing chunks after synthesis",
                        hint="rerun the same command",
                    )
                continue
            self._assemble(chapter, key)

    def _assemble(self, chapter: ChapterPlan, key: str) -> None:
        from .assemble import Pauses, assemble

        s = self.s
        start = time.perf_counter()
        cache: dict[str, Any] = {}
        rate = 0

        def audio(k: str) -> Any:
            nonlocal rate
            if k not in cache:
                stored = self.work.read_chunk(k)
                if stored is None:
                    raise AudiocppError(f"the work folder lost chunk {k[:12]}", hint="rerun the same command")
                cache[k] = stored[0]
                rate = stored[1]
            return cache[k]

        audio(chapter.units[0].key)
        built = assemble(
            chapter,
            audio,
            rate,
            Pauses(s.pause_sentence, s.pause_paragraph, s.pause_chapter),
            mastering=s.mastering,
            words=self.work.read_words,
        )
        sentences = [
            (chapter.sentences[i].text, chapter.sentences[i].paragraph, c.start, c.end)
            for i, c in enumerate(built.cues)
        ]
        words = [[list(w) for w in c.words] for c in built.cues]
        self.work.write_chapter(
            key, built.samples, built.rate, {"sentences": sentences, "title": chapter.title, "words": words}
        )
        self.timings["master_s"] += built.master_s
        self.timings["assemble_s"] += time.perf_counter() - start - built.master_s
        self._keep(chapter, key, built.samples.size, built.rate, sentences, words)

    def _keep(
        self,
        chapter: ChapterPlan,
        key: str,
        samples: int,
        rate: int,
        sentences: list[Any],
        words: list[Any] | None = None,
    ) -> None:
        from .outputs import ChapterOut

        self.rate = self.rate or rate
        self.chapter_files[chapter.number] = ChapterOut(
            chapter.number,
            chapter.title,
            self.work.chapter_file(key),
            rate,
            samples,
            [tuple(x) for x in sentences],
            [[tuple(w) for w in ws] for ws in words] if words else [[] for _ in sentences],
        )

    # -- outputs ---------------------------------------------------------------------------------------------
    def _write_outputs(self) -> list[Path]:
        import shutil
        import tempfile

        from .outputs import (
            BookMeta,
            Staged,
            check_space,
            estimate_bytes,
            rate_for,
            remove_stale,
            write_book,
            write_read_along_book,
            write_tracks,
        )

        s, text = self.s, self.job.book.text
        start = time.perf_counter()
        chapters = [self.chapter_files[c.number] for c in self.selected]
        assert self.rate is not None
        fmt = s.track_format
        rate = rate_for(fmt, self.rate, s.sample_rate, s.mastering == "acx")
        self.out_rate = rate
        meta = BookMeta(
            text.title,
            text.author,
            text.language,
            s.narrator,
            text.cover,
            digest([text.title, text.author, [c.keys for c in self.selected]]),
        )
        folder = s.out.parent if s.out is not None else s.out_dir
        assert folder is not None
        if s.out_dir is not None:
            s.out_dir.mkdir(parents=True, exist_ok=True)
        check_space(
            folder,
            estimate_bytes(chapters, fmt, rate, s.bitrate),
            repr(str(s.out or s.out_dir)),
            self.work.path,
        )
        staged = Staged()
        scratch = Path(tempfile.mkdtemp(prefix=".out-", dir=self.work.path))
        try:
            if s.out is not None:
                remove_stale(s.out)
                written = write_book(
                    s.out,
                    chapters,
                    meta,
                    rate=rate,
                    bitrate=s.bitrate,
                    captions=s.captions,
                    word_captions=s.word_captions,
                    scratch=scratch,
                    staged=staged,
                    acx=s.mastering == "acx",
                )
            else:
                written = write_tracks(
                    s.out_dir,
                    chapters,
                    meta,
                    fmt_name=fmt,
                    rate=rate,
                    bitrate=s.bitrate,
                    captions=s.captions,
                    word_captions=s.word_captions,
                    scratch=scratch,
                    staged=staged,
                )
            if s.read_along is not None:
                remove_stale(s.read_along)
                written.append(
                    write_read_along_book(
                        s.read_along,
                        chapters,
                        meta,
                        rate=rate_for("m4a", self.rate, s.sample_rate, False),
                        scratch=scratch,
                        staged=staged,
                    )
                )
            staged.commit()
        finally:
            staged.discard()
            shutil.rmtree(scratch, ignore_errors=True)
        self.timings["encode_s"] = time.perf_counter() - start
        return written
