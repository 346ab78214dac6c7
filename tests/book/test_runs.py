"""`audiocpp book` across runs, as a subprocess on a tiny model: a run stopped half-way (Ctrl-C, then
`kill -9`) and run again synthesizes only the missing chunks; an edited chapter only its changed
chunk and chapter; `--list`; ACX mastering of a loud and a quiet model; the progress bar on a terminal
only; a missing or failing ffmpeg and hostile books as clear errors with no output; `--ray`."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import shutil
import signal
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.support import cli_path, sigint_restored, voice_like_signal

from . import inputs
from .conftest import ENV, FAMILY_FLAGS, ffprobe, needs_ffmpeg, ok, run_book

pytestmark = needs_ffmpeg

#: the family of these runs: its tiny model speaks for seconds a sentence (as ACX mastering needs), and
#: makes a chunk slowly enough to be stopped between chunks
FAMILY = "omnivoice"
#: three chapters of five sentences: 18 chunks with the titles
CHAPTERS = [
    (
        "The Harbour",
        [
            "The ship came in at dawn. Gulls cried over the water.",
            "Nobody on the quay said a word about the storm. The nets lay in piles. A dog barked twice.",
        ],
    ),
    (
        "The Lighthouse",
        [
            "A light burned at the top of the tower. The stairs were steep and narrow.",
            "Its keeper had not slept for three nights. He wrote everything down. The lamp never failed.",
        ],
    ),
    (
        "The Return",
        [
            "At last the wind fell. The town woke to a quiet sea.",
            "Boats went out again. Children ran along the beach. The storm was a story now.",
        ],
    ),
]
EDITED = ("He wrote everything down.", "He kept a careful log of every ship.")


def chunk_files(work: Path) -> list[Path]:
    return sorted(p for p in (work / "chunks").glob("*/*") if p.suffix in (".flac", ".wav"))


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.tmp"))


def start_book(*args: str | Path) -> subprocess.Popen[str]:
    env = {**os.environ, **ENV}
    env.pop("AUDIOCPP_DEBUG", None)
    return subprocess.Popen(
        [str(cli_path()), "book", *[str(a) for a in args]],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=sigint_restored,
    )


def stop_after(proc: subprocess.Popen[str], work: Path, count: int, sig: signal.Signals) -> tuple[int, str]:
    """Send ``sig`` once the work folder holds ``count`` finished chunks; the exit code and stderr."""
    deadline = time.monotonic() + 300
    try:
        while len(chunk_files(work)) < count and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"the run ended (exit {proc.returncode}) before it could be stopped:\n{err}")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        return proc.returncode, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def resumed(tiny_models, tmp_path_factory) -> dict:
    """A book stopped by Ctrl-C, run again and stopped by `kill -9`, then run to the end."""
    root = tmp_path_factory.mktemp("book-resume")
    book = inputs.write_markdown(root / "tides.md", CHAPTERS)
    out, work = root / "tides.m4b", root / "tides.work"
    args = [
        book,
        "--model",
        tiny_models[FAMILY],
        "--out",
        out,
        "--batch-size",
        "1",
        "--seed",
        "9",
        *FAMILY_FLAGS[FAMILY],
    ]
    rc, err = stop_after(start_book(*args), work, 3, signal.SIGINT)
    interrupted = {"rc": rc, "stderr": err, "after": len(chunk_files(work))}
    rc, _ = stop_after(start_book(*args), work, interrupted["after"] + 2, signal.SIGKILL)
    killed = {"rc": rc, "after": len(chunk_files(work))}
    final = run_book(*args)
    return {
        "args": args,
        "book": book,
        "out": out,
        "work": work,
        "root": root,
        "interrupted": interrupted,
        "killed": killed,
        "final": final,
        "summary": ok(final),
        "files": len(chunk_files(work)),
    }


def test_a_stopped_run_synthesizes_only_the_missing_chunks(resumed) -> None:
    first, killed, summary = resumed["interrupted"], resumed["killed"], resumed["summary"]
    # Ctrl-C: exit 130, one line saying how many chunks this run made and kept (all of them on disk)
    line = next(ln for ln in first["stderr"].splitlines() if ln.startswith("interrupted: "))
    assert first["rc"] == 130 and "Traceback" not in first["stderr"]
    assert f"interrupted: {first['after']} chunks synthesized in this run are kept" in line
    assert "rerun the same command" in line and first["after"] >= 3
    # kill -9 after at least two more: those are kept too
    assert killed["rc"] == -signal.SIGKILL and killed["after"] >= first["after"] + 2
    # the last run makes exactly what is missing
    total = int(summary["chunks"])
    print(f"\nstopped with {first['after']} (Ctrl-C) and {killed['after']} (kill -9) of {total} chunks made")
    assert total == 18 and killed["after"] < total
    assert int(summary["reused"]) == killed["after"]
    assert int(summary["synthesized"]) == total - killed["after"]
    assert resumed["files"] == total  # nothing made twice
    assert temporaries(resumed["work"]) == [] and temporaries(resumed["root"]) == []
    info = ffprobe(resumed["out"])
    assert len(info["chapters"]) == 3
    assert "RTF" not in resumed["final"].stderr  # stderr is not a terminal: no progress bar


def test_one_run_at_a_time_in_a_work_folder(tiny_models, tmp_path) -> None:
    book = inputs.write_markdown(tmp_path / "tides.md", CHAPTERS)
    args = [book, "--model", tiny_models[FAMILY], "--out", tmp_path / "tides.m4b", "--batch-size", "1"]
    args += ["--seed", "9", *FAMILY_FLAGS[FAMILY]]
    first = start_book(*args)
    try:
        deadline = time.monotonic() + 120
        while (
            not chunk_files(tmp_path / "tides.work") and first.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.01)
        assert first.poll() is None, "the first run ended before the second started"
        second = run_book(*args)
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        first.kill()
        first.communicate()
    assert second.returncode == 2 and second.stdout == "", second.stderr
    assert "another `audiocpp book` run is using the work folder" in second.stderr
    assert "pass another --work-dir" in second.stderr and not (tmp_path / "tides.m4b").exists()


def test_an_edited_chapter_resynthesizes_only_its_change(resumed, tmp_path) -> None:
    work = tmp_path / "tides.work"
    shutil.copytree(resumed["work"], work)
    book = tmp_path / "tides.md"
    text = resumed["book"].read_text(encoding="utf-8")
    assert text.count(EDITED[0]) == 1
    book.write_text(text.replace(*EDITED), encoding="utf-8")
    chapters_before = {p.name: p.stat().st_mtime_ns for p in (work / "chapters").glob("*.json")}
    out = tmp_path / "tides.m4b"
    args = [str(a) for a in resumed["args"]]
    args[0], args[args.index("--out") + 1] = str(book), str(out)
    summary = ok(run_book(*args, "--work-dir", work))
    total = int(resumed["summary"]["chunks"])
    assert (int(summary["synthesized"]), int(summary["reused"]), int(summary["chunks"])) == (
        1,
        total - 1,
        total,
    )
    chapters_after = {p.name: p.stat().st_mtime_ns for p in (work / "chapters").glob("*.json")}
    new = set(chapters_after) - set(chapters_before)
    assert len(new) == 1 and len(chapters_after) == 4  # chapter 2 assembled again, 1 and 3 as they were
    assert all(chapters_after[name] == mtime for name, mtime in chapters_before.items())
    lengths = summary["chapter_s"].split(",")
    before = resumed["summary"]["chapter_s"].split(",")
    assert lengths[0] == before[0] and lengths[2] == before[2]
    assert [c["tags"]["title"] for c in ffprobe(out)["chapters"]] == [t for t, _ in CHAPTERS]


def test_list_prints_chapters_lengths_and_estimates(resumed, tiny_models) -> None:
    from audiocpp.book import Book, BookSettings

    plans = Book.open(resumed["book"]).plans(BookSettings())
    # before any run of this model: no synthesis estimate; nothing is written
    fresh = run_book(resumed["book"], "--list", "--chapters", "2-3")
    assert fresh.returncode == 0 and fresh.stderr == "", fresh.stderr
    lines = fresh.stdout.splitlines()
    assert lines[0] == f"{inputs.TITLE} by {inputs.AUTHOR} (markdown, 3 chapters, " + (
        f"{sum(len(p) for _, ps in CHAPTERS for p in ps):,} characters)"
    )
    rows = [ln for ln in lines if re.match(r"^[ -]\s*\d+  ", ln)]
    assert [ln[0] for ln in rows] == ["-", " ", " "]  # chapter 1 not chosen
    for row, (title, paragraphs), plan in zip(rows, CHAPTERS, plans):
        fields = row[46:].split()
        chars, words = sum(len(p) for p in paragraphs), sum(len(p.split()) for p in paragraphs)
        assert row[6:46].strip() == title
        assert fields[:3] == [f"{chars:,}", f"{words:,}", str(len(plan.units))] and fields[4] == "?"
        assert re.fullmatch(r"0:00:\d\d", fields[3])
    total = next(ln for ln in lines if "total (chosen chapters)" in ln).split()
    assert total[3:6] == [
        f"{sum(len(p) for _, ps in CHAPTERS[1:] for p in ps):,}",
        str(sum(len(p.split()) for _, ps in CHAPTERS[1:] for p in ps)),
        str(len(plans[1].units) + len(plans[2].units)),
    ]
    assert "synthesis time: '?' until a run of this model measures its speed" in lines[-1]
    # after the run: the speed it measured, kept in its work folder, gives the synthesis estimate
    args = resumed["args"]
    measured = run_book(resumed["book"], "--list", "--model", args[2], "--out", resumed["out"])
    assert measured.returncode == 0
    rows = [ln for ln in measured.stdout.splitlines() if re.match(r"^[ -]\s*\d+  ", ln)]
    assert len(rows) == 3 and all(re.fullmatch(r"\d+:\d\d:\d\d", ln.split()[-1]) for ln in rows)
    assert "at the speed measured by an earlier run of this model" in measured.stdout


# an Opus stream always decodes at 48 kHz (its header keeps the input's 24 kHz); the WAV is at 24 kHz
@pytest.mark.parametrize(("fmt", "codec", "rate"), [("opus", "opus", 48000), ("wav", "pcm_s16le", 24000)])
def test_other_formats_from_the_same_work_folder(resumed, tmp_path, fmt, codec, rate) -> None:
    work = tmp_path / "tides.work"
    shutil.copytree(resumed["work"], work)
    folder = tmp_path / fmt
    args = [str(a) for a in resumed["args"]]
    at = args.index("--out")
    args[at : at + 2] = ["--out-dir", str(folder), "--format", fmt]
    summary = ok(run_book(*args, "--work-dir", work))
    assert int(summary["synthesized"]) == 0 and int(summary["reused"]) == int(resumed["summary"]["chunks"])
    lengths = [float(x) for x in summary["chapter_s"].split(",")]
    files = sorted(folder.glob(f"*.{fmt}"))
    assert [p.name for p in files] == [f"{i:02d} - {t}.{fmt}" for i, (t, _) in enumerate(CHAPTERS, start=1)]
    for path, length in zip(files, lengths):
        info = ffprobe(path)
        stream = info["streams"][0]
        assert stream["codec_name"] == codec and int(stream["sample_rate"]) == rate
        assert abs(float(info["format"]["duration"]) - length) < 0.05
    assert (folder / f"{inputs.TITLE}.m3u").is_file() and temporaries(folder) == []


def test_a_full_disk_is_found_before_writing(resumed, tmp_path) -> None:
    """The output on a 64 KiB tmpfs (a private mount namespace): the free space is checked before ffmpeg
    runs, the error says what is needed, and nothing is left on that disk."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c"]
    probe = subprocess.run([*mount, 'mount -t tmpfs -o size=64k tmpfs "$0"', disk], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.decode(errors='replace').strip()}")
    work = tmp_path / "tides.work"
    shutil.copytree(resumed["work"], work)
    args = [str(a) for a in resumed["args"]]
    args[args.index("--out") + 1] = str(disk / "tides.m4b")
    script = (
        'mount -t tmpfs -o size=64k tmpfs "$0" || exit 99; "$@"; rc=$?; echo "LISTING:"; ls -A "$0"; exit $rc'
    )
    env = {**os.environ, **ENV}
    env.pop("AUDIOCPP_DEBUG", None)
    proc = subprocess.run(
        [*mount, script, disk, str(cli_path()), "book", *args, "--work-dir", str(work)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"not enough disk space for {str(disk / 'tides.m4b')!r}: it needs about" in proc.stderr
    assert f"the synthesized audio is kept in {str(work)!r}" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout.split("LISTING:")[1].split() == []  # nothing written on the full disk
    assert len(chunk_files(work)) == resumed["files"]


# -- ACX mastering of a loud and a quiet model ------------------------------------------------------------
def _scale_chunks(work: Path, gain: float) -> np.ndarray:
    """Every chunk multiplied by ``gain`` (a loud or a quiet model); all of them, concatenated."""
    out = []
    for path in chunk_files(work):
        samples, rate = sf.read(path, dtype="float32")
        path.unlink()
        sf.write(path.with_suffix(".wav"), samples * gain, rate, format="WAV", subtype="FLOAT")
        out.append(samples * gain)
    shutil.rmtree(work / "chapters")
    (work / "chapters").mkdir()
    return np.concatenate(out)


@pytest.mark.parametrize(("gain", "loud"), [(12.0, True), (0.004, False)])
def test_acx_master_brings_a_loud_and_a_quiet_model_inside_the_limits(resumed, tmp_path, gain, loud) -> None:
    from audiocpp.book.loudness import PEAK_MAX, RMS_RANGE, rms_db, true_peak_db

    work = tmp_path / "tides.work"
    shutil.copytree(resumed["work"], work)
    speech = _scale_chunks(work, gain)
    if loud:  # the model's own levels break ACX's rules: peaks over full scale, RMS above the range
        assert true_peak_db(speech) > 0 > PEAK_MAX and rms_db(speech) > RMS_RANGE[1]
    else:
        assert rms_db(speech) < RMS_RANGE[0] - 10
    out = tmp_path / "tides.m4b"
    args = [str(a) for a in resumed["args"]]
    args[args.index("--out") + 1] = str(out)
    summary = ok(run_book(*args, "--work-dir", work))
    assert int(summary["synthesized"]) == 0  # the same chunks, only louder or quieter
    check = run_book("--check", out)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("  ok") == 3 and check.stdout.rstrip().endswith("acx: pass")


# -- the progress bar -----------------------------------------------------------------------------------
def test_progress_bar_draws_on_a_terminal_only() -> None:
    from audiocpp.book.progress import BookProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    def drive(stream: io.StringIO, **options) -> str:
        bar = BookProgress(1000, stream=stream, **options)
        bar.start()
        time.sleep(0.25)  # past tqdm's minimum interval: the update is drawn
        bar.advance(400, 20.0)
        bar.close()
        return stream.getvalue()

    drawn = drive(Terminal())
    # characters done of all, seconds of audio made, the real-time factor so far (0.25 s for 20 s), ETA
    assert re.search(r"\rbook #+ +400/1\.00k chars , 20 s audio, RTF 0\.01 ETA 00:00\r", drawn), drawn
    assert drive(io.StringIO()) == ""  # not a terminal
    assert drive(Terminal(), enabled=False) == ""  # --quiet

    quick = BookProgress(1000, stream=Terminal())  # every chunk ends within tqdm's redraw interval
    quick.start()
    quick.advance(600, 20.0)
    quick.advance(400, 10.0)
    quick.close()
    screen = quick.stream.getvalue()
    assert re.search(r"1\.00k/1\.00k chars , 30 s audio, RTF 0\.\d\d ETA", screen), screen


def run_on_terminal(*args: str | Path) -> tuple[int, str, str]:
    """`audiocpp book ARGS` with stderr on a pseudo-terminal: exit code, stdout, what the terminal got."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a 120-column terminal
    env = {**os.environ, **ENV}
    env.pop("AUDIOCPP_DEBUG", None)
    proc = subprocess.Popen(
        [str(cli_path()), "book", *[str(a) for a in args]],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=terminal,
        env=env,
    )
    os.close(terminal)
    received: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(controller, 4096)
            except OSError:  # EIO: the other side closed
                break
            if not data:
                break
            received.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        stdout, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    os.close(controller)
    return proc.returncode, stdout.decode(), b"".join(received).decode(errors="replace")


def test_progress_bar_on_a_terminal_and_quiet(tiny_models, tmp_path) -> None:
    book = inputs.write_markdown(tmp_path / "short.md", [("One", ["A short book. It has three sentences."])])
    flags = ["--model", tiny_models[FAMILY], "--seed", "3", "--master", "none", *FAMILY_FLAGS[FAMILY]]
    rc, stdout, screen = run_on_terminal(book, "--out", tmp_path / "a.m4b", *flags)
    assert rc == 0, screen
    assert re.search(r"book .*/\S+ chars .*s audio, RTF \d+\.\d\d ETA", screen), screen
    assert "synthesized=" in stdout and "synthesized=" not in screen  # the summary stays on stdout
    rc, stdout, screen = run_on_terminal(book, "--out", tmp_path / "b.m4b", *flags, "--quiet")
    assert rc == 0 and "synthesized=" in stdout
    assert screen == ""  # --quiet: no bar and no notes


# -- clear errors, no output ----------------------------------------------------------------------------
def _nothing_written(folder: Path) -> None:
    assert sorted(p.name for p in folder.iterdir()) == ["book"], "an output or work folder was left"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("bomb", "looks like a zip bomb"),
        ("empty", "has no text to read"),
        ("drm", "is DRM-protected"),
        ("corrupt", "is not a valid EPUB"),
        ("entities", "declares XML entities"),
    ],
)
def test_hostile_books_are_clear_errors_with_no_output(name, words, books, tiny_models, tmp_path) -> None:
    writers = {
        "bomb": inputs.write_zip_bomb,
        "drm": inputs.write_drm_epub,
        "corrupt": inputs.write_corrupt_epub,
        "entities": inputs.write_entity_epub,
    }
    (tmp_path / "book").mkdir()
    path = tmp_path / "book" / f"{name}.epub"
    if name == "empty":
        inputs.write_empty_epub(path)
    else:
        writers[name](path, books["epub3"])
    proc = run_book(
        path,
        "--model",
        tiny_models[FAMILY],
        "--out",
        tmp_path / "out.m4b",
        "--read-along",
        tmp_path / "out-read-along.epub",
    )
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""
    _nothing_written(tmp_path)


def test_missing_ffmpeg_is_a_clear_error_with_no_output(books, tiny_models, tmp_path) -> None:
    import sys

    (tmp_path / "book").mkdir()
    book = shutil.copy(books["markdown"], tmp_path / "book" / "tides.md")
    bare = str(Path(sys.executable).parent)  # the venv's python and audiocpp, no ffmpeg
    assert shutil.which("ffmpeg", path=bare) is None
    proc = run_book(book, "--model", tiny_models[FAMILY], "--out", tmp_path / "out.m4b", env={"PATH": bare})
    assert proc.returncode == 2, proc.stderr
    assert (
        "ffmpeg is not installed (not found on PATH)" in proc.stderr
        and "apt-get install ffmpeg" in proc.stderr
    )
    assert "Traceback" not in proc.stderr
    _nothing_written(tmp_path)


def failing_ffmpeg(folder: Path) -> str:
    """A PATH whose ffmpeg writes half a file and fails (a full disk, a crash), beside the real ffprobe."""
    folder.mkdir()
    script = folder / "ffmpeg"
    script.write_text(
        '#!/bin/sh\nfor last; do :; done\nprintf "partial" > "$last"\n'
        'echo "Error writing trailer: No space left on device" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    (folder / "ffprobe").symlink_to(shutil.which("ffprobe"))
    return f"{folder}:{os.environ['PATH']}"


# -- Ray -------------------------------------------------------------------------------------------------
def test_ray_makes_the_local_chunks_and_a_failure_leaves_no_output(tiny_models, tmp_path) -> None:
    from tests.batch.common import ray_processes

    pytest.importorskip("ray")
    book = inputs.write_markdown(
        tmp_path / "short.md", [("One", ["A short book. It has three sentences. This is the last one."])]
    )
    reference = tmp_path / "narrator.wav"  # a reference: one Ray job (the default narrator would take two)
    sf.write(reference, voice_like_signal(2, 8000, 16000), 16000)
    flags = ["--model", tiny_models[FAMILY], "--seed", "6", "--batch-size", "2", "--voice-ref", reference]
    flags += ["--reference-text", "A calm voice.", *FAMILY_FLAGS[FAMILY]]
    local = ok(run_book(book, "--out", tmp_path / "local.m4b", *flags))
    before = ray_processes()
    # on Ray, with an ffmpeg that fails half-way through writing the .m4b
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "ray.m4b"
    work = tmp_path / "ray.work"
    proc = run_book(
        book,
        "--out",
        out,
        "--work-dir",
        work,
        *flags,
        "--ray",
        "--workers",
        "1",
        "--num-cpus",
        "1",
        env={"PATH": failing_ffmpeg(tmp_path / "bin")},
    )
    assert proc.returncode == 1 and "ffmpeg could not write" in proc.stderr, proc.stderr
    assert "Ray" in proc.stderr and "Traceback" not in proc.stderr
    assert list((tmp_path / "out").iterdir()) == []  # no ray.m4b, no captions, no temporary file
    # the chunks the Ray actor made are kept, and are the local run's, sample for sample
    made = {p.name: sf.read(p, dtype="float32")[0] for p in chunk_files(work)}
    same = {p.name: sf.read(p, dtype="float32")[0] for p in chunk_files(tmp_path / "local.work")}
    assert len(made) == int(local["chunks"]) and made.keys() == same.keys()
    assert all(np.array_equal(made[k], same[k]) for k in made)
    # the same command with a working ffmpeg only writes the files
    again = ok(run_book(book, "--out", out, "--work-dir", work, *flags, "--ray", "--workers", "1"))
    assert (int(again["synthesized"]), int(again["reused"])) == (0, int(local["chunks"]))
    assert len(ffprobe(out)["chapters"]) == 1
    deadline = time.monotonic() + 30
    while ray_processes() - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ray_processes() - before == set(), "the book left Ray processes running"
