"""engine.text.markup: pause markers and SSML's basics become speech and silence in order; text
without markup gives no script; bad markup is a clear error."""

from __future__ import annotations

import warnings

import pytest

from audiocpp.engine.errors import AudiocppWarning, UsageError
from audiocpp.engine.text.markup import (
    BREAK_STRENGTH,
    DEFAULT_PAUSE,
    PARAGRAPH_PAUSE,
    Pause,
    Speech,
    parse_markup,
    script_text,
)
from audiocpp.engine.text.stream import SentenceStream


@pytest.mark.parametrize("text", ["Hello there.", "A [bracket] and <b>tags</b>.", "pause 1s", "[paused]"])
def test_text_without_markup_has_no_script(text: str) -> None:
    assert parse_markup(text) is None


@pytest.mark.parametrize(("marker", "seconds"), [
    ("[pause 0.5s]", 0.5), ("[pause 500ms]", 0.5), ("[pause 2]", 2.0), ("[pause:1.5s]", 1.5),
    ("[PAUSE 250 ms]", 0.25), ("[pause]", DEFAULT_PAUSE), ('<break time="750ms"/>', 0.75),
    ("<break time='1s' />", 1.0), ('<break strength="strong"/>', BREAK_STRENGTH["strong"]),
    ("<break/>", BREAK_STRENGTH["medium"]),
])
def test_pause_markers(marker: str, seconds: float) -> None:
    assert parse_markup(f"Hello there. {marker} How are you?") == (
        Speech("Hello there."), Pause(seconds), Speech("How are you?"))


def test_pauses_at_the_ends_and_side_by_side() -> None:
    assert parse_markup("[pause 1s]Hi.[pause 0.5s] [pause 0.25s]") == (Pause(1.0), Speech("Hi."), Pause(0.75))
    assert parse_markup("[pause 0s] Hi.") == (Speech("Hi."),)
    assert parse_markup("[pause 2s]") == (Pause(2.0),)


def test_ssml_structure() -> None:
    ssml = """<speak version="1.0" xmlns="http://www.w3.org/2001/10/synthesis">
      Opening words.
      <p><s>First sentence.</s><s>The <sub alias="World Wide Web">WWW</sub> is big.</s></p>
      <p>Second paragraph<break time="300ms"/>after a break.<mark name="m1"/> The end.</p>
    </speak>"""
    script = parse_markup(ssml)
    assert script == (Speech("Opening words."), Speech("First sentence."),
                      Speech("The World Wide Web is big."), Pause(PARAGRAPH_PAUSE),
                      Speech("Second paragraph"), Pause(0.3),
                      Speech("after a break. The end."))
    assert script_text(script).startswith("Opening words. First sentence.")


def test_ssml_tags_read_as_text_warn_once() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        script = parse_markup('<speak><emphasis level="strong">Very</emphasis> <prosody rate="slow">slow'
                              '</prosody> and <emphasis>more</emphasis>.</speak>')
    assert script == (Speech("Very slow and more."),)
    messages = [str(w.message) for w in caught if issubclass(w.category, AudiocppWarning)]
    assert messages == ["SSML <emphasis> is not honoured: its text is read as written",
                        "SSML <prosody> is not honoured: its text is read as written"]


@pytest.mark.parametrize(("text", "message"), [
    ("<speak>Hello <break time='1s'>", "not well-formed"),
    ("<speak>Fish & chips</speak>", "not well-formed"),
    ('<speak><audio src="x.wav"/></speak>', "<audio> is not supported"),
    ("<speak><sub>WWW</sub></speak>", "has no alias"),
    ("<speak>   </speak>", "holds nothing to say"),
    ("Hi [pause soon] there", "no valid length"),
    ("Hi [pause 45s] there", "over the 30 s"),
    ('Hi <break strength="huge"/> there', "unknown strength"),
])
def test_bad_markup_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        parse_markup(text)
    assert caught.value.hint


def test_a_streamed_ssml_document_stays_whole() -> None:
    stream = SentenceStream()
    assert stream.feed("<speak><s>One. Two.</s> Three. ") == []
    assert stream.feed("Four.</speak> Then plain. And more") == [
        "<speak><s>One. Two.</s> Three. Four.</speak>", "Then plain."]
    assert stream.finish() == ["And more"]
