"""A structural check of a read-along EPUB 3 (Media Overlays), as a reading system walks it."""

from __future__ import annotations

import posixpath
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from lxml import etree

OPF = "{http://www.idpf.org/2007/opf}"
SMIL = "{http://www.w3.org/ns/SMIL}"
EPUB = "{http://www.idpf.org/2007/ops}"


def _clip(value: str) -> float:
    match = re.fullmatch(r"([0-9.]+)s", value)
    assert match, f"clip value {value!r} is not N.NNNs"
    return float(match.group(1))


def _clock(value: str) -> float:
    h, m, s = value.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def audio_seconds(data: bytes, tmp: Path) -> float:
    tmp.write_bytes(data)
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(tmp)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(out.strip())


def check_read_along(path: Path, tmp: Path) -> dict[str, Any]:
    """Every rule a reading system relies on; returns what it found (chapters, clips, durations)."""
    with zipfile.ZipFile(path) as archive:
        first = archive.infolist()[0]
        assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
        assert archive.read("mimetype") == b"application/epub+zip"
        container = etree.fromstring(archive.read("META-INF/container.xml"))
        opf_path = container.find(".//{urn:oasis:names:tc:opendocument:xmlns:container}rootfile").get(
            "full-path"
        )
        opf = etree.fromstring(archive.read(opf_path))
        assert opf.get("version") == "3.0"
        base = posixpath.dirname(opf_path)
        names = set(archive.namelist())
        items = {i.get("id"): i for i in opf.iter(f"{OPF}item")}
        for item in items.values():  # every manifest item is in the archive
            assert posixpath.join(base, item.get("href")) in names, item.get("href")
        meta = {
            (m.get("property"), m.get("refines")): m.text for m in opf.iter(f"{OPF}meta") if m.get("property")
        }
        assert meta[("media:active-class", None)]
        found: dict[str, Any] = {"chapters": [], "clips": 0, "total": _clock(meta[("media:duration", None)])}
        durations = 0.0
        for ref in opf.iter(f"{OPF}itemref"):
            item = items[ref.get("idref")]
            assert item.get("media-type") == "application/xhtml+xml"
            overlay = items[item.get("media-overlay")]
            assert overlay.get("media-type") == "application/smil+xml"
            text_path = posixpath.join(base, item.get("href"))
            xhtml = etree.fromstring(archive.read(text_path))
            ids = {el.get("id") for el in xhtml.iter() if el.get("id")}
            smil_path = posixpath.join(base, overlay.get("href"))
            smil = etree.fromstring(archive.read(smil_path))
            duration = _clock(meta[("media:duration", f"#{overlay.get('id')}")])
            durations += duration
            audio_cache: dict[str, float] = {}
            last_end = 0.0
            spans = []
            for par in smil.iter(f"{SMIL}par"):
                text_src = par.find(f"{SMIL}text").get("src")
                target, _, fragment = text_src.partition("#")
                assert posixpath.normpath(posixpath.join(posixpath.dirname(smil_path), target)) == text_path
                assert fragment in ids, f"{text_src} names no element of {text_path}"
                audio = par.find(f"{SMIL}audio")
                audio_path = posixpath.normpath(
                    posixpath.join(posixpath.dirname(smil_path), audio.get("src"))
                )
                assert audio_path in names
                if audio_path not in audio_cache:
                    audio_cache[audio_path] = audio_seconds(archive.read(audio_path), tmp / "clip.m4a")
                begin, end = _clip(audio.get("clipBegin")), _clip(audio.get("clipEnd"))
                assert last_end <= begin < end <= audio_cache[audio_path] + 0.05, (begin, end, audio_cache)
                last_end = end
                spans.append((fragment, begin, end))
                found["clips"] += 1
            assert abs(sum(audio_cache.values()) - duration) < 0.1, (audio_cache, duration)
            found["chapters"].append({"text": text_path, "spans": spans, "duration": duration})
        assert abs(durations - found["total"]) < 0.01
    return found
