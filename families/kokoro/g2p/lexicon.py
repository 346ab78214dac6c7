"""Word tables the normaliser reads: abbreviations, units, currencies, symbols, initialisms.

English has the full set; Spanish, French, Italian, Portuguese and German have currency, symbol and
web words; other languages fall back to English for the web words and read the rest with espeak-ng.
"""

from __future__ import annotations

from dataclasses import dataclass


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True)
class Abbreviation:
    words: str
    needs_period: bool = False  # only an abbreviation when written with its period ("No.", "Fig.")
    needs_number: bool = False  # only before a number ("No. 5")
    may_end: bool = False  # its period may also end a sentence ("... and so on, etc. Then")


ENGLISH_ABBREVIATIONS: dict[str, Abbreviation] = {
    "mr": Abbreviation("mister"),
    "mrs": Abbreviation("missus"),
    "ms": Abbreviation("miz"),
    "dr": Abbreviation("doctor"),
    "prof": Abbreviation("professor", needs_period=True),
    "mt": Abbreviation("mount", needs_period=True),
    "jr": Abbreviation("junior", may_end=True),
    "sr": Abbreviation("senior", may_end=True),
    "vs": Abbreviation("versus"),
    "etc": Abbreviation("et cetera", may_end=True),
    "e.g": Abbreviation("for example"),
    "i.e": Abbreviation("that is"),
    "approx": Abbreviation("approximately", may_end=True),
    "no": Abbreviation("number", needs_period=True, needs_number=True),
    "nos": Abbreviation("numbers", needs_period=True, needs_number=True),
    "fig": Abbreviation("figure", needs_period=True),
    "inc": Abbreviation("incorporated", needs_period=True, may_end=True),
    "ltd": Abbreviation("limited", needs_period=True, may_end=True),
    "corp": Abbreviation("corporation", needs_period=True, may_end=True),
    "dept": Abbreviation("department", needs_period=True, may_end=True),
    "govt": Abbreviation("government", may_end=True),
    "ave": Abbreviation("avenue", needs_period=True),
    "blvd": Abbreviation("boulevard"),
    "rd": Abbreviation("road", needs_period=True),
    "vol": Abbreviation("volume", needs_period=True),
    "ch": Abbreviation("chapter", needs_period=True, needs_number=True),
    "p": Abbreviation("page", needs_period=True, needs_number=True),
    "pp": Abbreviation("pages", needs_period=True, needs_number=True),
    "ph.d": Abbreviation("P H D"),
    "a.m": Abbreviation("A M"),
    "p.m": Abbreviation("P M"),
    "jan": Abbreviation("January", needs_period=True),
    "feb": Abbreviation("February", needs_period=True),
    "mar": Abbreviation("March", needs_period=True),
    "apr": Abbreviation("April", needs_period=True),
    "jun": Abbreviation("June", needs_period=True),
    "jul": Abbreviation("July", needs_period=True),
    "aug": Abbreviation("August", needs_period=True),
    "sep": Abbreviation("September", needs_period=True),
    "sept": Abbreviation("September", needs_period=True),
    "oct": Abbreviation("October", needs_period=True),
    "nov": Abbreviation("November", needs_period=True),
    "dec": Abbreviation("December", needs_period=True),
}

#: Other languages' abbreviations (their period is part of them unless it ends the text).
ABBREVIATIONS: dict[str, dict[str, Abbreviation]] = {
    "fr": {
        "m": Abbreviation("monsieur", needs_period=True), "mm": Abbreviation("messieurs", needs_period=True),
        "mme": Abbreviation("madame"), "mmes": Abbreviation("mesdames"), "mlle": Abbreviation("mademoiselle"),
        "dr": Abbreviation("docteur"), "pr": Abbreviation("professeur", needs_period=True),
        "etc": Abbreviation("et cetera", may_end=True), "cf": Abbreviation("confer", needs_period=True),
        "n°": Abbreviation("numéro"), "av": Abbreviation("avenue", needs_period=True),
        "bd": Abbreviation("boulevard", needs_period=True), "st": Abbreviation("saint", needs_period=True),
        "ste": Abbreviation("sainte", needs_period=True),
    },
    "es": {
        "sr": Abbreviation("señor"), "sra": Abbreviation("señora"), "srta": Abbreviation("señorita"),
        "dr": Abbreviation("doctor"), "dra": Abbreviation("doctora"), "ud": Abbreviation("usted"),
        "uds": Abbreviation("ustedes"), "etc": Abbreviation("etcétera", may_end=True),
        "pág": Abbreviation("página", needs_period=True), "núm": Abbreviation("número", needs_period=True),
        "avda": Abbreviation("avenida", needs_period=True),
    },
    "it": {
        "sig": Abbreviation("signor", needs_period=True), "sigg": Abbreviation("signori", needs_period=True),
        "dott": Abbreviation("dottor", needs_period=True),
        "prof": Abbreviation("professor", needs_period=True), "ecc": Abbreviation("eccetera", may_end=True),
        "pag": Abbreviation("pagina", needs_period=True),
    },
    "pt": {
        "sr": Abbreviation("senhor"), "sra": Abbreviation("senhora"), "dr": Abbreviation("doutor"),
        "dra": Abbreviation("doutora"), "etc": Abbreviation("et cetera", may_end=True),
        "pág": Abbreviation("página", needs_period=True), "av": Abbreviation("avenida", needs_period=True),
    },
    "de": {
        "hr": Abbreviation("Herr", needs_period=True), "fr": Abbreviation("Frau", needs_period=True),
        "dr": Abbreviation("Doktor"), "prof": Abbreviation("Professor", needs_period=True),
        "z.b": Abbreviation("zum Beispiel"), "usw": Abbreviation("und so weiter", may_end=True),
        "bzw": Abbreviation("beziehungsweise", needs_period=True), "d.h": Abbreviation("das heißt"),
        "ca": Abbreviation("circa", needs_period=True), "nr": Abbreviation("Nummer", needs_period=True),
    },
}
#: Month names for dates written with digits, per language (English: :data:`MONTHS`).
MONTH_NAMES: dict[str, tuple[str, ...]] = {
    "fr": ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
           "novembre", "décembre"),
    "es": ("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
           "noviembre", "diciembre"),
    "it": ("gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre",
           "ottobre", "novembre", "dicembre"),
    "pt": ("janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro",
           "outubro", "novembro", "dezembro"),
    "de": ("Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober",
           "November", "Dezember"),
}
#: How a date is said: the day's words then the month (and the joiners), per language.
DATE_JOINERS: dict[str, tuple[str, str]] = {"fr": ("", ""), "es": ("de", "de"), "it": ("", ""),
                                            "pt": ("de", "de"), "de": ("", "")}

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
#: Written month names (and their short forms) after or before which a day number is an ordinal.
MONTH_WORDS = frozenset([m for m in MONTHS] + [m[:3] for m in MONTHS] + ["Sept"])

#: unit -> (singular, plural), English; matched case-sensitively right after a number.
ENGLISH_UNITS: dict[str, tuple[str, str]] = {
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"), "mph": ("mile per hour", "miles per hour"),
    "m/s": ("meter per second", "meters per second"), "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"), "mm": ("millimeter", "millimeters"),
    "µm": ("micrometer", "micrometers"), "nm": ("nanometer", "nanometers"), "m": ("meter", "meters"),
    "mi": ("mile", "miles"), "ft": ("foot", "feet"), "yd": ("yard", "yards"), "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"), "g": ("gram", "grams"), "lbs": ("pound", "pounds"),
    "lb": ("pound", "pounds"), "oz": ("ounce", "ounces"), "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"), "l": ("liter", "liters"), "L": ("liter", "liters"),
    "gal": ("gallon", "gallons"), "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"), "℃": ("degree Celsius", "degrees Celsius"),
    "℉": ("degree Fahrenheit", "degrees Fahrenheit"), "°": ("degree", "degrees"), "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"), "GHz": ("gigahertz", "gigahertz"),
    "KB": ("kilobyte", "kilobytes"), "kB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"), "TB": ("terabyte", "terabytes"),
    "Mbps": ("megabit per second", "megabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"), "ms": ("millisecond", "milliseconds"),
    "sec": ("second", "seconds"), "secs": ("second", "seconds"), "min": ("minute", "minutes"),
    "mins": ("minute", "minutes"), "hr": ("hour", "hours"), "hrs": ("hour", "hours"), "h": ("hour", "hours"),
    "kWh": ("kilowatt hour", "kilowatt hours"), "kW": ("kilowatt", "kilowatts"), "W": ("watt", "watts"),
    "V": ("volt", "volts"), "mAh": ("milliamp hour", "milliamp hours"), "dB": ("decibel", "decibels"),
    "px": ("pixel", "pixels"), "fps": ("frame per second", "frames per second"),
    "rpm": ("revolution per minute", "revolutions per minute"), "x": ("times", "times"),
}
#: Longest first, so that "km/h" wins over "km" and "kWh" over "kW".
ENGLISH_UNIT_ORDER = tuple(sorted(ENGLISH_UNITS, key=len, reverse=True))
_BRITISH = (("meter", "metre"), ("liter", "litre"))


def british(words: str) -> str:
    for us, gb in _BRITISH:
        words = words.replace(us, gb)
    return words


@dataclass(frozen=True)
class Currency:
    one: str
    many: str
    sub_one: str | None  # the hundredth (cent, penny); None when not spoken (yen)
    sub_many: str | None


CURRENCIES: dict[str, dict[str, Currency]] = {
    "en": {"$": Currency("dollar", "dollars", "cent", "cents"),
           "€": Currency("euro", "euros", "cent", "cents"),
           "£": Currency("pound", "pounds", "penny", "pence"), "¥": Currency("yen", "yen", None, None),
           "₹": Currency("rupee", "rupees", "paisa", "paise")},
    "es": {"$": Currency("dólar", "dólares", "centavo", "centavos"),
           "€": Currency("euro", "euros", "céntimo", "céntimos"),
           "£": Currency("libra", "libras", "penique", "peniques"),
           "¥": Currency("yen", "yenes", None, None)},
    "fr": {"$": Currency("dollar", "dollars", "cent", "cents"),
           "€": Currency("euro", "euros", "centime", "centimes"),
           "£": Currency("livre", "livres", "penny", "pence"), "¥": Currency("yen", "yens", None, None)},
    "it": {"$": Currency("dollaro", "dollari", "centesimo", "centesimi"),
           "€": Currency("euro", "euro", "centesimo", "centesimi"),
           "£": Currency("sterlina", "sterline", "penny", "pence"), "¥": Currency("yen", "yen", None, None)},
    "pt": {"$": Currency("dólar", "dólares", "centavo", "centavos"),
           "€": Currency("euro", "euros", "cêntimo", "cêntimos"),
           "£": Currency("libra", "libras", "pêni", "pence"), "¥": Currency("iene", "ienes", None, None),
           "R$": Currency("real", "reais", "centavo", "centavos")},
    "de": {"$": Currency("Dollar", "Dollar", "Cent", "Cent"), "€": Currency("Euro", "Euro", "Cent", "Cent"),
           "£": Currency("Pfund", "Pfund", "Penny", "Pence"), "¥": Currency("Yen", "Yen", None, None)},
}
CURRENCY_SCALES = {"k": "thousand", "K": "thousand", "m": "million", "M": "million", "bn": "billion",
                   "b": "billion", "B": "billion", "thousand": "thousand", "million": "million",
                   "billion": "billion", "trillion": "trillion"}


@dataclass(frozen=True)
class WebWords:
    dot: str
    at: str
    slash: str
    dash: str
    underscore: str
    plus: str


WEB_WORDS: dict[str, WebWords] = {
    "en": WebWords("dot", "at", "slash", "dash", "underscore", "plus"),
    "es": WebWords("punto", "arroba", "barra", "guion", "guion bajo", "más"),
    "fr": WebWords("point", "arobase", "slash", "tiret", "tiret bas", "plus"),
    "it": WebWords("punto", "chiocciola", "slash", "trattino", "trattino basso", "più"),
    "pt": WebWords("ponto", "arroba", "barra", "hífen", "sublinhado", "mais"),
    "de": WebWords("Punkt", "at", "Schrägstrich", "Bindestrich", "Unterstrich", "plus"),
}

#: Symbols read as words (when not part of a number, URL or e-mail address).
SYMBOL_WORDS: dict[str, dict[str, str]] = {
    "en": {"&": "and", "+": "plus", "@": "at", "=": "equals", "%": "percent", "°": "degrees",
           "×": "times", "±": "plus or minus", "#": "number", "$": "dollars", "€": "euros", "£": "pounds"},
    "es": {"&": "y", "+": "más", "@": "arroba", "=": "igual a", "%": "por ciento", "×": "por"},
    "fr": {"&": "et", "+": "plus", "@": "arobase", "=": "égale", "%": "pour cent", "×": "fois"},
    "it": {"&": "e", "+": "più", "@": "chiocciola", "=": "uguale", "%": "per cento", "×": "per"},
    "pt": {"&": "e", "+": "mais", "@": "arroba", "=": "igual a", "%": "por cento", "×": "vezes"},
    "de": {"&": "und", "+": "plus", "@": "at", "=": "gleich", "%": "Prozent", "×": "mal"},
}

#: All-capital words of four letters or more spelled even though they have vowels (shorter ones and
#: ones without vowels are spelled anyway, unless listed in :data:`WORD_ACRONYMS`).
INITIALISMS = _words(
    "HTTP HTTPS HDMI IEEE UEFI USAF NYPD LAPD"
)
#: Initialisms still spelled in text written all in capitals (where other capital words are words).
COMMON_INITIALISMS = _words(
    "AI API CPU GPU TPU TTS ASR LLM NLP CLI SDK IDE URL USB HTTP HTTPS HTML XML CSS SQL PDF CSV "
    "FAQ CEO CTO CFO BBC CNN FBI CIA NSA NBA NFL DNA RNA USA UK EU UN TV PC SSD HDD TCP UDP DNS "
    "VPN SSH FTP AWS IBM AMD UFO ATM DIY RSVP FYI BTW OMG MP3 MP4 UTF"
)
#: All-capital words of three letters or fewer read as words (not spelled).
WORD_ACRONYMS = _words(
    "ARM DOS NAT RAM ROM PIN LAN WAN SIM GIF LOL WAV OK ZIP JAR GUI"
)
#: Interjections without vowels, which espeak-ng would spell, as phonemes (American and British alike).
INTERJECTIONS: dict[str, str] = {
    "hmm": "hˈəm", "hm": "hˈəm", "hmmm": "hˈəm", "mm": "ˈəm", "mmm": "ˈəm", "mhm": "əmhˈəm",
    "shh": "ʃ", "sh": "ʃ", "ssh": "ʃ", "psst": "pst", "pst": "pst", "brr": "bɹ", "grr": "ɡɹ",
    "pfft": "pft", "tsk": "tsk", "nth": "ˈɛnθ", "zzz": "z",
}
#: Words after which a Roman numeral is a cardinal ("World War II", "Chapter IV").
ROMAN_CARDINAL_AFTER = _words(
    "Chapter Part Volume Vol Act Scene Book War Phase Level Section Article Type Class Stage Episode "
    "Season Round Title Appendix Grade Tier Mark Apollo Gemini Vatican Super Bowl Rocky Fantasy"
)
#: Names after which a Roman numeral is a regnal ordinal ("Henry VIII": Henry the eighth).
ROMAN_ORDINAL_AFTER = _words(
    "Henry Edward George William Elizabeth Louis Charles Richard James John Paul Pius Benedict Leo "
    "Gregory Peter Frederick Philip Alexander Nicholas Catherine Mary Ferdinand Francis Innocent "
    "Clement Urban Boniface Alfonso Carl Gustav Ramesses Ptolemy Constantine Otto Wilhelm Napoleon "
    "Ivan Harald Olaf Christian Frederik Sancho Pedro Juan Felipe Carlos Victor Umberto Rama"
)
#: Letter-heavy endings of technical names spelled after the word before them ("audiocpp" ->
#: "audio C P P", "nodejs" -> "node J S").
TECH_SUFFIXES = ("cpp", "js", "db", "sql", "xml", "css", "html", "tts", "llm", "nlp", "sdk", "gpu", "cpu")
