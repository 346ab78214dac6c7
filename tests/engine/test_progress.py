"""engine.progress: the tqdm bar, drawn only when enabled (default: stderr is a terminal)."""

from __future__ import annotations

import io

from audiocpp.engine.progress import NullProgress, Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_draws_label_and_counts_on_a_terminal_and_clears_on_close() -> None:
    out = Terminal()
    bar = Progress(stream=out)
    assert bar.enabled
    bar.start("omnivoice", 4)
    for _ in range(3):
        bar.advance()
    bar.close()
    text = out.getvalue()
    assert "omnivoice" in text and "0/4" in text
    assert bar.done == 3 and bar.total == 4
    assert text.endswith("\r") and text.rsplit("\r", 2)[-2].strip() == ""  # the line is blanked on close


def test_silent_when_not_a_terminal_or_disabled() -> None:
    plain, term = io.StringIO(), Terminal()
    for bar in (Progress(stream=plain), Progress(enabled=False, stream=term), NullProgress()):
        assert not bar.enabled
        bar.start("x", 5)
        bar.advance(5)
        bar.close()
        assert bar.done == 5
    assert plain.getvalue() == "" and term.getvalue() == ""


def test_forced_on_draws_to_any_stream_and_a_new_stage_replaces_the_bar() -> None:
    out = io.StringIO()
    bar = Progress(enabled=True, stream=out)
    bar.start("stage one", 2)
    bar.advance(2)
    bar.start("stage two", 3)
    assert bar.done == 0 and bar.total == 3 and bar.label == "stage two"
    bar.advance()
    bar.close()
    bar.close()  # closing twice is harmless
    assert "stage one" in out.getvalue() and "stage two" in out.getvalue()


def test_zero_steps_draw_nothing() -> None:
    out = Terminal()
    bar = Progress(stream=out)
    bar.start("empty", 0)
    bar.advance()
    bar.close()
    assert out.getvalue() == ""
