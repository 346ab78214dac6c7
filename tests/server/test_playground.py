"""The playground page in Debian's headless chromium driven by playwright: type text, press the
button, and the audio element gets a playable source (offline and streamed); a screenshot is
kept under ``test-artifacts/`` (git-ignored) and its path printed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import REPO

from .conftest import ServerProcess

CHROMIUM = Path("/usr/bin/chromium")
#: Headless flags for a machine without a GPU or a network beyond the package registries.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        message = "Debian's chromium is missing: run tools/setup_system.sh (bin/test does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, headless=True)
        yield browser
        browser.close()


def _audio_state(page) -> dict:
    return page.evaluate("""() => { const a = document.getElementById('player');
        return {src: a.currentSrc, duration: a.duration, ready: a.readyState, """
                         """error: a.error && a.error.code}; }""")


def test_playground_speaks(server: ServerProcess, browser) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server.url + "/")
    page.wait_for_selector("#status:has-text('ready')", timeout=30_000)
    models = page.eval_on_selector_all("#model option", "os => os.map(o => o.value)")
    assert "omnivoice-demo" in models
    # The option fields come from the model's spec.
    assert page.locator("[data-option='num_inference_steps']").count() == 1
    page.click("summary")  # open "model options"
    page.locator("[data-option='num_inference_steps']").fill("4")
    page.fill("#text", "Hello from the playground.")
    page.fill("#seed", "3")
    page.click("#speak")
    page.wait_for_selector("#status:has-text('done')", timeout=120_000)
    page.wait_for_function("document.getElementById('player').readyState >= 1", timeout=30_000)
    state = _audio_state(page)
    assert state["src"].startswith("blob:") and state["duration"] > 0.5 and state["error"] is None, state
    assert page.get_attribute("#download", "download") == "speech.wav"

    page.check("#stream")
    page.fill("#text", "Streaming from the playground.")
    page.click("#speak")
    page.wait_for_selector("#status:has-text('done')", timeout=120_000)
    page.wait_for_function("document.getElementById('player').readyState >= 1", timeout=30_000)
    streamed = _audio_state(page)
    assert streamed["src"] != state["src"] and streamed["duration"] > 0.5 and streamed["error"] is None
    assert not errors, errors

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "playground.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 1000
    print(f"playground screenshot: {shot}")
    page.close()


def test_playground_asks_for_the_key_once(keyed_server: ServerProcess, keys, browser) -> None:
    """On a server with keys the page asks for the key (its fields stay empty until then), keeps it in the
    tab's session storage, sends it with every request, and asks again for a key the server refuses."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(keyed_server.url + "/")
    page.wait_for_selector("#keybox:not([hidden])", timeout=30_000)
    assert page.eval_on_selector_all("#model option", "os => os.length") == 0
    page.fill("#apikey", keys.alice + "-wrong")
    page.click("#usekey")
    page.wait_for_selector("#status:has-text('refused this API key')", timeout=30_000)
    page.fill("#apikey", keys.alice)
    page.click("#usekey")
    page.wait_for_selector("#status:has-text('ready')", timeout=30_000)
    assert page.evaluate("sessionStorage.getItem('audiocpp.apiKey')") == keys.alice
    assert "legacy" in page.eval_on_selector_all("#voice option", "os => os.map(o => o.value)")
    page.click("summary")
    page.locator("[data-option='num_inference_steps']").fill("2")
    page.fill("#text", "With a key.")
    page.click("#speak")
    page.wait_for_selector("#status:has-text('done')", timeout=120_000)
    page.reload()  # the same tab: the key is still there, nothing is asked
    page.wait_for_selector("#status:has-text('ready')", timeout=30_000)
    assert page.is_hidden("#keybox")
    assert not errors, errors
    page.close()
