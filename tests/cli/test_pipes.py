"""Pipes (issue 14): ``--out -`` read and decoded while the real CLI runs, stdin read as it comes,
nothing but audio on stdout, ``--sample-rate``; the pieces in-process (sentence cuts, the
streaming header, the streaming resampler)."""

from __future__ import annotations

import os
import struct
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audiocpp.cli.pipes import read_segments, segments, wav_header
from audiocpp.engine.audio.resample import resample
from audiocpp.engine.audio.streaming import StreamingResampler
from tests.cli.conftest import CHUNKED, WavStreamReader, cli_env, popen_cli
from tests.support import cli_path, run_cli

TEXT = "The first sentence is here. A second one follows it. Then a third. And the fourth ends it."


def test_out_dash_streams_a_wav_that_is_decoded_while_the_process_runs(demo_dir: Path,
                                                                        tmp_path: Path) -> None:
    chunks = tmp_path / "chunks"
    proc = popen_cli("--model", demo_dir, "--text", TEXT, "--mode", "streaming", "--seed", "3", "--out", "-",
                     "--out-dir", chunks, *CHUNKED)
    reader = WavStreamReader(proc)
    reader.start()
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=600)
    reader.join(timeout=60)
    assert proc.returncode == 0, stderr
    # the header announces a stream of unknown length, at the model's rate
    assert reader.header is not None and reader.header["rate"] == 24000
    assert reader.header["data_size"] == reader.header["riff_size"] == 0xFFFFFFFF
    # the first samples were decoded while the process was still generating
    assert reader.running_at_first_samples is True
    # stdout holds the audio events exactly as generated (the chunk files), and nothing else
    events = sorted(chunks.glob("chunk_*.wav"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(events) == 4 and stderr.count("event=audio") == 4
    expected = np.concatenate([sf.read(p, dtype="int16")[0] for p in events])
    got = np.frombuffer(bytes(reader.data[44:]), "<i2")
    assert np.array_equal(got, expected)
    assert "audio_out=-" in stderr and "duration_s=" in stderr  # the summary went to stderr
    # one length for the request: the summary's (the --out file's) is the stream's and the chunks'
    duration = float(stderr.split("duration_s=")[1].split()[0])
    assert duration == pytest.approx(len(expected) / 24000, abs=1e-3)
    # the bytes are a WAV that soundfile reads whole too (sizes unknown: up to the end)
    path = tmp_path / "stream.wav"
    path.write_bytes(bytes(reader.data))
    data, rate = sf.read(path, dtype="int16")
    assert rate == 24000 and np.array_equal(data, expected)


def _feed(proc: subprocess.Popen[bytes], reader: WavStreamReader, lines: list[str]) -> bool:
    """Write the first line, wait for audio while stdin stays open, then the rest slowly;
    returns whether audio came before stdin was closed."""
    assert proc.stdin is not None
    proc.stdin.write(lines[0].encode() + b"\n")
    proc.stdin.flush()
    came = reader.first_samples.wait(timeout=300) and reader.first_samples_at is not None
    for line in lines[1:]:
        time.sleep(0.3)
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()
    proc.stdin.close()
    return came


@pytest.mark.parametrize("by_line", [False, True], ids=["sentences", "lines"])
def test_stdin_is_read_as_it_comes_and_audio_starts_before_it_closes(demo_dir: Path, by_line: bool) -> None:
    lines = ["Hello there, this is the first line.", "Second line here", "and it goes on.", "Last one!"]
    flags = ["--stream-by-line"] if by_line else []
    proc = popen_cli("--model", demo_dir, "--text", "-", "--mode", "streaming", "--seed", "5", "--out", "-",
                     "--format", "pcm16", *flags, stdin=subprocess.PIPE)
    reader = WavStreamReader(proc, raw=True)
    reader.start()
    errors: list[bytes] = []
    drain = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    drain.start()
    came_before_close = _feed(proc, reader, lines)
    proc.wait(timeout=600)
    reader.join(timeout=60)
    drain.join(timeout=60)
    stderr = errors[0].decode()
    assert proc.returncode == 0, stderr
    assert came_before_close, "no audio on stdout before stdin was closed"
    # one request per line; or per sentence, where "Second line here / and it goes on." is one
    assert stderr.count("segment=") == (4 if by_line else 3)
    assert "segment=1 text='Second line here'" in stderr if by_line else \
        "segment=1 text='Second line here and it goes on.'" in stderr
    assert len(reader.data) % 2 == 0 and len(reader.audio()) > 0  # raw pcm16, no header


def test_offline_out_dash_is_the_file_and_nothing_else(demo_dir: Path, demo, tmp_path: Path) -> None:
    """Offline: stdout is exactly the encoded file (sizes known); --sample-rate resamples with the
    engine's resampler; the summary is on stderr."""
    proc = subprocess.run([str(cli_path()), "--model", str(demo_dir), "--text", "Hello there.", "--seed", "9",
                           "--out", "-", "--format", "wav32", "--sample-rate", "16000", "--metrics"],
                          capture_output=True, env=cli_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()
    path = tmp_path / "out.wav"
    path.write_bytes(proc.stdout)
    info = sf.info(path)
    assert (info.samplerate, info.subtype) == (16000, "FLOAT")
    got, _ = sf.read(path, dtype="float32")
    import audiocpp.engine as ac

    native = demo.session("tts").run(ac.TaskRequest(text="Hello there.", seed=9)).audio
    want = resample(native.samples, 24000, 16000)
    assert got.shape == want.shape and float(np.abs(got - want).max()) < 1e-5
    stderr = proc.stderr.decode()
    assert "sample_rate=16000" in stderr and "rtf=" in stderr and "audio_out=-" in stderr


def test_pipe_flag_errors(demo_dir: Path, tmp_path: Path) -> None:
    proc = run_cli("--model", demo_dir, "--text", "Hi.", "--mode", "streaming", "--out", "-",
                   "--format", "flac")
    assert proc.returncode == 2 and "--mode offline" in proc.stderr and proc.stdout == ""
    proc = run_cli("--model", demo_dir, "--text", "Hi.", "--stream-by-line", "--out", tmp_path / "x.wav")
    assert proc.returncode == 2 and "--stream-by-line" in proc.stderr and not (tmp_path / "x.wav").exists()
    proc = run_cli("--model", demo_dir, "--text", "Hi.", "--sample-rate", "44100",
                   "--out", tmp_path / "x.opus")
    assert proc.returncode == 2 and "opus" in proc.stderr and "48000" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- in-process -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "want"), [
    ("One. Two! Three?", ["One.", "Two!", "Three?"]),
    ("Dr. Smith arrived. He sat.", ["Dr. Smith arrived.", "He sat."]),
    ("Pi is 3.14 today. Yes.", ["Pi is 3.14 today.", "Yes."]),
    ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
    ("你好。世界！", ["你好。", "世界！"]),
    ("No end\nacross lines. Next", ["No end across lines.", "Next"]),
    ("Para one\n\nPara two", ["Para one", "Para two"]),
])
def test_sentence_segments(text: str, want: list[str]) -> None:
    assert segments(text, by_line=False, final=True) == (want, "")


def test_segments_wait_for_what_follows() -> None:
    assert segments("Hello there.", by_line=False, final=False) == ([], "Hello there.")  # "." then "5"?
    assert segments("Hello. Wor", by_line=False, final=False) == (["Hello."], " Wor")
    assert segments("a\nb\n\nc", by_line=True, final=False) == (["a", "b"], "c")


def test_read_segments_yields_each_sentence_as_it_arrives() -> None:
    read_fd, write_fd = os.pipe()
    got: list[tuple[str, float]] = []
    start = time.monotonic()

    def consume() -> None:
        for seg in read_segments(read_fd):
            got.append((seg, time.monotonic() - start))

    thread = threading.Thread(target=consume)
    thread.start()
    os.write(write_fd, b"First one. Sec")
    time.sleep(0.5)
    os.write(write_fd, "ond one.\nthird €".encode()[:-1])  # a UTF-8 character split across writes
    time.sleep(0.2)
    os.write(write_fd, "€".encode()[-1:])
    os.close(write_fd)
    thread.join(timeout=10)
    os.close(read_fd)
    assert [s for s, _ in got] == ["First one.", "Second one.", "third €"]
    assert got[0][1] < 0.4  # before the rest was written


def test_streaming_wav_header() -> None:
    head = wav_header(24000, "wav16")
    assert len(head) == 44 and struct.unpack("<I", head[40:44])[0] == 0xFFFFFFFF
    assert struct.unpack("<IHHIIHH", head[16:36]) == (16, 1, 1, 24000, 48000, 2, 16)
    assert struct.unpack("<I", wav_header(8000, "wav32", 10)[40:44])[0] == 40


@pytest.mark.parametrize(("orig", "new"), [(24000, 16000), (24000, 48000), (44100, 48000), (16000, 16000)])
def test_streaming_resampler_equals_the_whole(orig: int, new: int) -> None:
    rng = np.random.default_rng(orig + new)
    x = rng.standard_normal(orig // 2 + 17).astype(np.float32)
    stream = StreamingResampler(orig, new)
    cuts = sorted(rng.integers(0, len(x), 9).tolist())
    pieces = [stream.push(p) for p in np.split(x, cuts)] + [stream.finish()]
    got = np.concatenate(pieces)
    want = resample(x, orig, new)
    assert got.shape == want.shape and float(np.abs(got - want).max()) < 1e-5


def test_out_dash_refuses_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from audiocpp.cli.pipes import stdout_format
    from audiocpp.engine.errors import UsageError

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    with pytest.raises(UsageError, match="terminal"):
        stdout_format(None, streaming=True)
