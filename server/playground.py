"""The playground page served at ``GET /``: one self-contained HTML file (no build step, no CDN).

It reads ``/v1/models`` (option fields come from the model's spec rows) and
``/v1/audio/voices`` (the voice list shows the chosen model's voices: ``default``, its named voices
with their languages, and the stored voices it clones with), sends ``/v1/audio/speech`` and plays the
result in an ``<audio>`` element with a download link. With "stream" on it asks for raw PCM
(``stream_format=audio``), plays the pieces through Web Audio as they arrive, and puts the whole take in
the audio element at the end.

On a server with API keys, the first 401 shows a key field: the key is kept in the tab's session
storage (gone when the tab closes, never in a cookie or the URL) and sent as ``Authorization: Bearer``
with every request; a key the server refuses is forgotten and asked for again.
"""

PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>audiocpp playground</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
  h1 { font-size: 1.4rem; } h1 small { font-weight: normal; color: #777; font-size: .8rem; }
  textarea { width: 100%; min-height: 6rem; font: inherit; box-sizing: border-box; }
  .row { display: flex; flex-wrap: wrap; gap: 1rem; margin: .8rem 0; align-items: end; }
  label { display: flex; flex-direction: column; font-size: .85rem; gap: .2rem; }
  label.inline { flex-direction: row; align-items: center; }
  select, input { font: inherit; }
  fieldset { border: 1px solid #ccc; border-radius: 6px; margin: .8rem 0; }
  fieldset .row { margin: .3rem 0; }
  fieldset input[type=number] { width: 7rem; }
  button { font: inherit; padding: .4rem 1.2rem; }
  #status { color: #555; font-size: .9rem; min-height: 1.2rem; }
  #status.error { color: #b00; }
  audio { width: 100%; margin-top: .5rem; }
  #keybox { border: 1px solid #c90; border-radius: 6px; padding: .5rem .8rem; margin: .8rem 0; }
</style>
</head>
<body>
<h1>audiocpp playground <small id="served"></small></h1>
<form id="keybox" hidden>
  <label class="inline">API key&nbsp;<input id="apikey" type="password" autocomplete="off" size="40"></label>
  <button id="usekey" type="submit">use key</button>
  <small>kept in this tab only (session storage)</small>
</form>
<textarea id="text" placeholder="Type the text to speak">Hello from audiocpp.</textarea>
<div class="row">
  <label>model <select id="model"></select></label>
  <label>voice <select id="voice"></select></label>
  <label>format <select id="format"></select></label>
  <label>seed <input id="seed" type="number" min="0" placeholder="random"></label>
  <label class="inline"><input id="stream" type="checkbox"> stream</label>
  <button id="speak">Speak</button>
</div>
<details><summary>model options</summary><fieldset id="options"></fieldset></details>
<div id="status"></div>
<audio id="player" controls></audio>
<div><a id="download" hidden>download</a></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let models = [];
let voices = [];

function status(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

const KEY = "audiocpp.apiKey";
let keyWaiter = null;

function authHeaders() {
  const key = sessionStorage.getItem(KEY);
  return key ? { Authorization: "Bearer " + key } : {};
}

function askKey(message) {
  $("keybox").hidden = false;
  status(message, true);
  $("apikey").focus();
  return new Promise((resolve) => { keyWaiter = resolve; });
}

$("keybox").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = $("apikey").value.trim();
  if (!key) return;
  sessionStorage.setItem(KEY, key);
  $("apikey").value = "";
  $("keybox").hidden = true;
  status("checking the key...");
  if (keyWaiter) { const resume = keyWaiter; keyWaiter = null; resume(); }
});

// fetch with the tab's API key; a 401 asks for the key (again) and retries
async function api(url, options) {
  options = options || {};
  for (;;) {
    const r = await fetch(url, { ...options, headers: { ...(options.headers || {}), ...authHeaders() } });
    if (r.status !== 401) return r;
    const had = sessionStorage.getItem(KEY) !== null;
    sessionStorage.removeItem(KEY);
    await askKey(had ? "the server refused this API key: enter another" : "this server needs an API key: enter it above");
  }
}

async function getJSON(url) {
  const r = await api(url);
  if (!r.ok) throw new Error(url + ": " + r.status);
  return r.json();
}

function optionField(row) {
  const label = document.createElement("label");
  label.title = row.description || "";
  label.append(row.name);
  let input;
  if (row.values) {
    input = document.createElement("select");
    input.append(new Option("(default)", ""));
    for (const v of row.values) input.append(new Option(v, v));
  } else if (row.type === "bool") {
    input = document.createElement("select");
    input.append(new Option("(default" + (row.default !== undefined ? ": " + row.default : "") + ")", ""));
    input.append(new Option("true", "true"));
    input.append(new Option("false", "false"));
  } else {
    input = document.createElement("input");
    input.type = (row.type === "int" || row.type === "float") ? "number" : "text";
    if (row.type === "float") input.step = "any";
    if (row.min !== undefined) input.min = row.min;
    if (row.max !== undefined) input.max = row.max;
    if (row.default !== undefined) input.placeholder = String(row.default);
  }
  input.dataset.option = row.name;
  input.dataset.type = row.type;
  label.append(input);
  return label;
}

function showOptions() {
  const model = models.find((m) => m.id === $("model").value);
  const box = $("options");
  box.replaceChildren();
  const row = document.createElement("div");
  row.className = "row";
  const skip = new Set(["seed", "voice"]);
  for (const opt of (model ? model.request_options : [])) if (!skip.has(opt.name)) row.append(optionField(opt));
  box.append(row);
  $("stream").disabled = !(model && model.modes.includes("streaming"));
  showVoices(model);
}

function voiceLabel(v) {
  if (v.stored) return v.name + " (stored)";
  if (v.type !== "named") return v.name;
  const about = [v.language_name || v.language, v.gender].filter(Boolean).join(", ");
  return v.name + (about ? " (" + about + ")" : "");
}

function showVoices(model) {
  // the chosen model's voices: default, its named voices, the stored voices it clones with
  const select = $("voice");
  const kept = select.value;
  select.replaceChildren();
  for (const v of voices) {
    if (model && v.models && !v.models.includes(model.id)) continue;
    select.append(new Option(voiceLabel(v), v.name));
  }
  if ([...select.options].some((o) => o.value === kept)) select.value = kept;
}

function optionValues() {
  const out = {};
  for (const el of document.querySelectorAll("[data-option]")) {
    if (el.value === "") continue;
    const t = el.dataset.type;
    out[el.dataset.option] = (t === "int" || t === "float") ? Number(el.value) : (t === "bool" ? el.value === "true" : el.value);
  }
  return out;
}

async function init() {
  try {
    const list = await getJSON("/v1/models");
    models = list.data;
    for (const m of models) $("model").append(new Option(m.id + " (" + m.family + ", " + m.sample_rate + " Hz)", m.id));
    for (const f of list.response_formats) $("format").append(new Option(f, f));
    $("served").textContent = models.length + " model(s)";
    voices = (await getJSON("/v1/audio/voices")).voices;
    showOptions();
    status("ready");
  } catch (e) {
    status("cannot reach the server: " + e.message, true);
  }
}

function wavFromPCM(chunks, rate) {
  const size = chunks.reduce((n, c) => n + c.byteLength, 0);
  const buf = new ArrayBuffer(44 + size);
  const v = new DataView(buf);
  const text = (o, s) => { for (let i = 0; i < s.length; i++) v.setUint8(o + i, s.charCodeAt(i)); };
  text(0, "RIFF"); v.setUint32(4, 36 + size, true); text(8, "WAVE"); text(12, "fmt ");
  v.setUint32(16, 16, true); v.setUint16(20, 1, true); v.setUint16(22, 1, true);
  v.setUint32(24, rate, true); v.setUint32(28, rate * 2, true); v.setUint16(32, 2, true); v.setUint16(34, 16, true);
  text(36, "data"); v.setUint32(40, size, true);
  let o = 44;
  for (const c of chunks) { new Uint8Array(buf, o, c.byteLength).set(new Uint8Array(c)); o += c.byteLength; }
  return new Blob([buf], { type: "audio/wav" });
}

function setResult(blob, ext) {
  const url = URL.createObjectURL(blob);
  const player = $("player");
  if (player.dataset.url) URL.revokeObjectURL(player.dataset.url);
  player.dataset.url = url;
  player.src = url;
  $("download").href = url;
  $("download").download = "speech." + ext;
  $("download").hidden = false;
}

async function streamPCM(response, rate) {
  // Plays 16-bit pieces as they arrive; odd bytes wait for the next piece.
  const ctx = new (window.AudioContext || window.webkitAudioContext)();
  let at = ctx.currentTime + 0.05, carry = new Uint8Array(0);
  const chunks = [];
  const reader = response.body.getReader();
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const bytes = new Uint8Array(carry.length + value.length);
    bytes.set(carry); bytes.set(value, carry.length);
    const even = bytes.length - (bytes.length % 2);
    carry = bytes.slice(even);
    if (even === 0) continue;
    const piece = bytes.slice(0, even).buffer;
    chunks.push(piece);
    received += even;
    const pcm = new Int16Array(piece);
    const audio = ctx.createBuffer(1, pcm.length, rate);
    const ch = audio.getChannelData(0);
    for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
    const src = ctx.createBufferSource();
    src.buffer = audio; src.connect(ctx.destination);
    at = Math.max(at, ctx.currentTime); src.start(at); at += audio.duration;
    status("streaming: " + (received / 2 / rate).toFixed(2) + " s received");
  }
  return chunks;
}

async function speak() {
  const button = $("speak");
  button.disabled = true;
  const model = models.find((m) => m.id === $("model").value);
  const stream = $("stream").checked && !$("stream").disabled;
  const body = { model: $("model").value, input: $("text").value, voice: $("voice").value,
                 response_format: stream ? "pcm" : $("format").value, ...optionValues() };
  if ($("seed").value !== "") body.seed = Number($("seed").value);
  if (stream) body.stream_format = "audio";
  status("synthesizing...");
  const t0 = performance.now();
  try {
    const r = await api("/v1/audio/speech", { method: "POST", headers: { "Content-Type": "application/json" },
                                               body: JSON.stringify(body) });
    if (!r.ok) {
      let message = r.status + " " + r.statusText;
      try { message = (await r.json()).error.message; } catch (e) { /* not JSON */ }
      throw new Error(message);
    }
    if (stream) {
      const rate = Number(r.headers.get("X-AudioCPP-Sample-Rate")) || model.sample_rate;
      const chunks = await streamPCM(r, rate);
      setResult(wavFromPCM(chunks, rate), "wav");
    } else {
      setResult(await r.blob(), body.response_format);
    }
    const wall = ((performance.now() - t0) / 1000).toFixed(2);
    const rtf = r.headers.get("X-AudioCPP-RTF");
    status("done in " + wall + " s" + (rtf ? ", RTF " + rtf : "") + (r.headers.get("X-AudioCPP-Seed") ? ", seed " + r.headers.get("X-AudioCPP-Seed") : ""));
  } catch (e) {
    status("error: " + e.message, true);
  } finally {
    button.disabled = false;
  }
}

$("model").addEventListener("change", showOptions);
$("speak").addEventListener("click", speak);
init();
</script>
</body>
</html>
"""  # noqa: E501 - HTML and JS of the page, whose text must not change
