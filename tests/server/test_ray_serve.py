"""``audiocpp serve --ray`` / ``--ray-address`` on real Ray: a two-node ``ray.cluster_utils.Cluster`` on this
machine (one CPU each) serving the demo model with two replicas behind the ingress, real clients
(``openai``, ``httpx``, ``websockets``): the same routes and bytes as the single-machine server, both
replicas used (``x-audiocpp-replica``), one voice store for the cluster (across replicas, a replica's
restart and keys), a replica killed under load (no request that had not streamed is lost), the metrics
summed at the ingress, SIGTERM draining;
then a model that does not load, ``--ray`` on a local instance leaving no Ray process behind,
``--print-config`` against Ray Serve's own schema, and the usage errors.

One application is shared by the tests of this module (module fixtures), so they run in file order.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import soundfile as sf

from tests.batch.common import ray_processes
from tests.support import cli_path, run_cli, voice_like_signal

from .conftest import DEMO_FAMILY, FAST, ServerProcess, free_port, new_key
from .test_speech_stream import converse

TEXT = "Hello from the cluster."
SEED = 7
TRANSCRIPT = "This is the reference voice."
#: Long enough that a stream is still running when its replica is killed.
LONG = " ".join(f"Sentence number {i} of a long reading, spoken one after another." for i in range(24))


def _body(**extra) -> dict:
    return {"model": "omnivoice-demo", "input": TEXT, "voice": "alloy", "seed": SEED, **FAST, **extra}


@pytest.fixture(scope="module")
def cluster(server_cache: dict[str, str]):
    """Two Ray nodes of one CPU each on this machine; this process is connected as a driver."""
    import ray
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as env:
        for key, value in server_cache.items():
            env.setenv(key, value)  # the replicas build and load the demo model from the tests' cache
        nodes = Cluster(initialize_head=True, connect=True,
                        head_node_args={"num_cpus": 1, "include_dashboard": False})
        nodes.worker = nodes.add_node(num_cpus=1)  # type: ignore[attr-defined]
        nodes.wait_for_nodes()
        try:
            yield nodes
        finally:
            ray.shutdown()
            nodes.shutdown()


@pytest.fixture(scope="module")
def ray_keys() -> dict[str, str]:
    return {"alice": new_key(), "bob": new_key(), "carol": new_key(), "dave": new_key()}


@pytest.fixture(scope="module")
def ray_voices_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ray-voices")


@pytest.fixture(scope="module")
def ray_server(cluster, ray_keys: dict[str, str], ray_voices_dir: Path, server_cache: dict[str, str],
               tmp_path_factory: pytest.TempPathFactory):
    """``audiocpp serve --ray-address`` on the cluster: 2 replicas of half a CPU, keys alice and bob."""
    root = tmp_path_factory.mktemp("ray-serve")
    log, keys_file = root / "serve.log", root / "keys.txt"
    keys_file.write_text(f"carol:{ray_keys['carol']}\n")
    proc = ServerProcess(["--ray-address", cluster.address, "--replicas", "2", "--num-cpus", "0.5",
                          "--voices-dir", str(ray_voices_dir), "--api-key", f"bob:{ray_keys['bob']}",
                          "--api-keys-file", str(keys_file),
                          "--max-queue", "8", "--max-queue-per-key", "8", "--drain-s", "20"], log,
                         env=server_cache,
                         api_key=ray_keys["alice"], inject=True)
    proc.keys_file = keys_file  # type: ignore[attr-defined]
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def single(server_cache: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    """The single-machine server of the same model with the replicas' one torch thread (Ray sets a
    replica's OMP_NUM_THREADS from its CPUs): float sums over another thread count may differ in the last
    bit, as between any two machines."""
    root = tmp_path_factory.mktemp("single")
    proc = ServerProcess(["--voices-dir", str(root / "voices")], root / "serve.log",
                         env={**server_cache, "OMP_NUM_THREADS": "1"})
    yield proc
    proc.stop()
    proc.assert_quiet()


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _post(server: ServerProcess, body: dict, key: str | None = None) -> httpx.Response:
    headers = _auth(key) if key else {}
    return httpx.post(server.url + "/v1/audio/speech", json=body, headers=headers, timeout=120)


def _sse_audio(text: str) -> tuple[bytes, list[dict]]:
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    return audio, events


def _replica_actor(replica: str):
    """The Ray actor of the Serve replica whose id a response named."""
    import ray

    for actor in ray.util.list_named_actors(all_namespaces=True):
        if actor["namespace"] == "serve" and actor["name"].endswith("#" + replica):
            return ray.get_actor(actor["name"], namespace="serve")
    raise AssertionError(f"no replica actor {replica!r}")


def _metrics(server: ServerProcess) -> dict[str, float]:
    """Every series of the ingress's /metrics, by name and labels."""
    text = httpx.get(server.url + "/metrics", timeout=30).text
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out


def _sum(metrics: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in metrics.items() if k.startswith(prefix))


def _running_replicas(server: ServerProcess) -> float:
    return _metrics(server).get('audiocpp_ray_replicas{model="omnivoice-demo",state="RUNNING"}', 0.0)


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout} s: {what}")


# -- the same service ------------------------------------------------------------------------------
def test_routes_and_formats_equal_the_single_machine_server(ray_server: ServerProcess,
                                                            single: ServerProcess) -> None:
    server = single
    health = httpx.get(ray_server.url + "/health", timeout=30).json()
    assert health["status"] == "ok" and "omnivoice-demo" in health["models"]
    assert httpx.get(ray_server.url + "/").text.lstrip().lower().startswith("<!doctype html")
    ours = httpx.get(ray_server.url + "/v1/models").json()
    theirs = httpx.get(server.url + "/v1/models").json()
    assert ours == theirs  # the same description of the same model
    audio_models = httpx.get(ray_server.url + "/v1/audio/models").json()
    assert audio_models == httpx.get(server.url + "/v1/audio/models").json()
    voices = httpx.get(ray_server.url + "/v1/audio/voices").json()
    assert voices["voices"][0]["id"] == "default" and voices["aliases"]["alloy"] == "default"

    for fmt in [f for f in ("wav", "flac", "pcm", "mp3", "opus") if f in theirs["response_formats"]]:
        ray_r = _post(ray_server, _body(response_format=fmt))
        one = _post(server, _body(response_format=fmt))
        assert ray_r.status_code == one.status_code == 200, ray_r.text
        if fmt == "opus":  # an Ogg stream's serial number is random: the decoded audio is compared
            assert (sf.read(io.BytesIO(ray_r.content))[0] == sf.read(io.BytesIO(one.content))[0]).all()
        else:
            assert ray_r.content == one.content, fmt  # byte for byte
        assert ray_r.headers["content-type"] == one.headers["content-type"]
        assert ray_r.headers["x-audiocpp-seed"] == str(SEED)
        assert ray_r.headers["x-audiocpp-replica"]
    streamed = _post(ray_server, _body(response_format="pcm", stream_format="audio"))
    assert streamed.content == _post(server, _body(response_format="pcm", stream_format="audio")).content
    assert streamed.headers["x-audiocpp-replica"]
    audio, events = _sse_audio(_post(ray_server, _body(stream_format="sse")).text)
    single_audio, single_events = _sse_audio(_post(server, _body(stream_format="sse")).text)
    assert audio == single_audio and events[-1]["type"] == "speech.audio.done"
    assert [e["type"] for e in events] == [e["type"] for e in single_events]

    bad = _post(ray_server, _body(response_format="ogg"))
    assert bad.status_code == 400 and bad.json() == _post(server, _body(response_format="ogg")).json()
    bad = _post(ray_server, _body(language="klingon"))
    assert bad.status_code == 400 and bad.json() == _post(server, _body(language="klingon")).json()
    assert httpx.post(ray_server.url + "/v1/audio/speech", json=_body()).status_code == 200  # key injected
    assert httpx.post(ray_server.url + "/v1/audio/speech", json=_body(),
                      headers={"Authorization": "Bearer not-a-key-of-this-server"}).status_code == 401

    config = {"model": "omnivoice-demo", "seed": SEED, **FAST}
    ray_messages, _, _ = asyncio.run(converse(ray_server.url, config, "One sentence. And another one."))
    single_messages, _, _ = asyncio.run(converse(server.url, config, "One sentence. And another one."))
    frames = b"".join(m for m in ray_messages if isinstance(m, bytes))
    assert frames and frames == b"".join(m for m in single_messages if isinstance(m, bytes))
    assert ray_messages[-1] == {"type": "session.done", "total_sentences": 2}


def test_both_replicas_serve_and_give_the_same_audio(ray_server: ServerProcess) -> None:
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda _: _post(ray_server, _body()), range(8)))
    assert all(r.status_code == 200 for r in responses)
    assert len({r.headers["x-audiocpp-replica"] for r in responses}) == 2
    assert len({r.content for r in responses}) == 1


#: How long the service may take to have both replicas again after a node is removed (docs/server.md).
NODE_LOSS_S = 90


def test_a_node_removed(ray_server: ServerProcess, cluster) -> None:
    """The second node goes away: its replica moves to the head node; the service answers meanwhile."""
    worker = cluster.worker.node_id
    head = cluster.head_node.node_id
    _wait_for(lambda: {r["node"] for r in _reports(ray_server)} == {head, worker}, 60,
              "a replica on each node")
    expected = _post(ray_server, _body()).content
    started = time.monotonic()
    cluster.remove_node(cluster.worker)
    answers: list[int] = []
    while time.monotonic() - started < NODE_LOSS_S:
        r = _post(ray_server, _body())
        answers.append(r.status_code)
        assert r.status_code in (200, 503), r.text  # the head's replica answers, or a clean 503
        if r.status_code == 200:
            assert r.content == expected
        reports = _reports(ray_server)
        if len(reports) == 2 and {x["node"] for x in reports} == {head}:
            break
    back = time.monotonic() - started
    print(f"both replicas running on the head node {back:.1f} s after the node was removed; {answers}")
    assert back < NODE_LOSS_S and _running_replicas(ray_server) == 2
    assert answers.count(200) >= len(answers) - 2
    with ThreadPoolExecutor(4) as pool:
        assert [r.content for r in pool.map(lambda _: _post(ray_server, _body()), range(4))] == [expected] * 4


# -- one voice store -------------------------------------------------------------------------------
def _reference() -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, voice_like_signal(7, 2 * 16000, 16000), 16000, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def _upload(server: ServerProcess, name: str, key: str | None = None) -> httpx.Response:
    return httpx.post(server.url + "/v1/audio/voices", headers=_auth(key) if key else {},
                      data={"name": name, "transcript": TRANSCRIPT},
                      files={"file": ("me.wav", _reference(), "audio/wav")}, timeout=60)


def _clone_until(server: ServerProcess, enough, rounds: int = 8) -> dict[str, bytes]:
    """Clone requests (4 at a time) until ``enough(replica -> audio)``; the audio each replica gave."""
    seen: dict[str, bytes] = {}
    for _ in range(rounds):
        with ThreadPoolExecutor(4) as pool:
            for r in pool.map(lambda _: _post(server, _body(voice="rayvoice")), range(4)):
                assert r.status_code == 200, r.text
                assert seen.setdefault(r.headers["x-audiocpp-replica"], r.content) == r.content
        if enough(seen):
            break
    return seen


def test_a_voice_is_one_for_the_whole_cluster(ray_server: ServerProcess, single: ServerProcess,
                                              ray_keys: dict[str, str], ray_voices_dir: Path) -> None:
    assert _upload(ray_server, "rayvoice").status_code == 201  # alice's (the injected key)
    stored = ray_server.voice_folder(ray_voices_dir, "rayvoice")  # in the head node's --voices-dir
    assert (stored / "reference.wav").read_bytes() == _reference()
    assert _upload(single, "rayvoice").status_code == 201
    expected = _post(single, _body(voice="rayvoice")).content
    seen = _clone_until(ray_server, lambda seen: len(seen) == 2)  # both replicas cloned it
    assert len(seen) == 2 and set(seen.values()) == {expected}

    # per key across replicas: bob does not see alice's voice, and may have his own of that name
    bob = ray_keys["bob"]
    assert httpx.get(ray_server.url + "/v1/audio/voices/rayvoice", headers=_auth(bob)).status_code == 404
    for _ in range(4):
        refused = _post(ray_server, _body(voice="rayvoice"), bob)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "voice_not_found"
    assert _upload(ray_server, "rayvoice", bob).status_code == 201
    listed = httpx.get(ray_server.url + "/v1/audio/voices", headers=_auth(bob)).json()["voices"]
    assert [v["owner"] for v in listed if v["id"] == "rayvoice"] == ["bob"]
    assert httpx.delete(ray_server.url + "/v1/audio/voices/rayvoice", headers=_auth(bob)).status_code == 200

    # a replica restarted (killed: Ray Serve starts another) clones the voice the same
    import ray

    victim = next(iter(seen))
    ray.kill(_replica_actor(victim), no_restart=True)
    _wait_for(lambda: len(live := {r["replica"] for r in _reports(ray_server)}) == 2 and victim not in live,
              120, "a new replica")
    new = {r["replica"] for r in _reports(ray_server)} - set(seen)
    assert new, "the killed replica was not replaced"
    fresh = _clone_until(ray_server, lambda fresh: new <= set(fresh), rounds=10)
    assert new <= set(fresh) and set(fresh.values()) == {expected}


def _reports(server: ServerProcess) -> list[dict[str, str]]:
    """The live replicas, from the ingress's per-replica series."""
    found = []
    for series in _metrics(server):
        if series.startswith("audiocpp_replica_queue_depth{"):
            labels = dict(part.split("=", 1) for part in series[series.index("{") + 1:-1].split(","))
            found.append({k: v.strip('"') for k, v in labels.items()})
    return found


# -- faults ----------------------------------------------------------------------------------------
def _sse(server: ServerProcess, body: dict) -> dict[str, object]:
    """An SSE request read to its end: status, replica, event types, audio, or how its connection closed."""
    out: dict[str, object] = {}
    try:
        with httpx.stream("POST", server.url + "/v1/audio/speech", json=body, timeout=120) as stream:
            out["status"] = stream.status_code
            out["replica"] = stream.headers.get("x-audiocpp-replica")
            text = "".join(stream.iter_text())
            if stream.status_code != 200:
                out["body"] = text
                return out
            audio, events = _sse_audio(text)
            out["events"], out["audio"], out["last"] = [e["type"] for e in events], audio, events[-1]
    except httpx.HTTPError as error:  # a connection closed mid-stream is an end with an error too
        out["closed"] = type(error).__name__
    return out


def _victim_queue(server: ServerProcess, victim: str) -> float:
    return sum(v for k, v in _metrics(server).items()
               if k.startswith("audiocpp_replica_queue_depth{") and f'replica="{victim}"' in k)


def _long_streams_on_both_replicas(server: ServerProcess,
                                   stack: ExitStack) -> dict[str, tuple[httpx.Response, Iterator[str]]]:
    """A long SSE stream running on each replica, its first audio piece read: both replicas busy, so Ray
    Serve's router (the replica with fewer requests in flight) spreads what comes next over both, and the
    victim surely holds some admitted behind its stream (one replica idle would take them all while it
    keeps up). A stream that landed on a replica already busy is closed and another opened."""
    running: dict[str, tuple[httpx.Response, Iterator[str]]] = {}
    for _ in range(8):
        stream = stack.enter_context(httpx.stream("POST", server.url + "/v1/audio/speech", timeout=120,
                                                  json=_body(input=LONG, stream_format="sse")))
        replica = stream.headers["x-audiocpp-replica"]
        lines = stream.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        assert json.loads(first[6:])["type"] == "speech.audio.delta"
        if replica in running:
            stream.close()
            continue
        running[replica] = stream, lines
        if len(running) == 2:
            return running
    raise AssertionError(f"long streams landed on {sorted(running)} only")


def test_a_replica_killed_loses_no_request_that_had_not_streamed(ray_server: ServerProcess) -> None:
    """Whole and streamed requests on both replicas; one replica killed while it streams one request and
    holds others admitted behind it (the demo batches one row on a CPU). Every request that had not
    started streaming is answered, by the live replica, with the audio it would have had; the stream
    under way ends cleanly (its error event, or its connection closed), never a 500 or a hang."""
    import ray

    whole = [_body(seed=seed) for seed in range(4)]
    streams = [_body(seed=seed, stream_format="sse") for seed in range(4, 7)]
    expected = [_post(ray_server, body).content for body in whole]
    expected += [_sse(ray_server, body)["audio"] for body in streams]
    before = _sum(_metrics(ray_server), "audiocpp_ray_resubmitted_total")
    with ExitStack() as stack:
        running = _long_streams_on_both_replicas(ray_server, stack)
        victim, kept = list(running)
        with ThreadPoolExecutor(len(whole) + len(streams)) as pool:
            answers = [pool.submit(_post, ray_server, body) for body in whole]
            answers += [pool.submit(_sse, ray_server, body) for body in streams]
            _wait_for(lambda: _victim_queue(ray_server, victim) >= 1, 60, "a request behind the stream")
            started = time.monotonic()
            ray.kill(_replica_actor(victim), no_restart=True)
            running[kept][0].close()  # the live replica's long stream leaves: what waited behind it goes on
            try:
                rest = [json.loads(line[6:]) for line in running[victim][1] if line.startswith("data: ")]
                cut: dict[str, object] = {"last": rest[-1] if rest else None}
            except httpx.HTTPError as error:
                cut = {"closed": type(error).__name__}
            results = [f.result() for f in answers]
            ended = time.monotonic() - started
    assert ended < 90, "a request of the killed replica hung"
    if "closed" not in cut:  # the stream under way: its error event, a clean 503
        assert cut["last"] is not None and cut["last"]["type"] == "speech.audio.error", cut
        assert cut["last"]["error"]["code"] == "replica_unavailable"
    for r, audio in zip(results[:len(whole)], expected):
        assert r.status_code == 200, r.text  # never a 503: it had not streamed, so it was sent again
        assert r.content == audio
    for out, audio in zip(results[len(whole):], expected[len(whole):]):
        assert out.get("status") == 200, out
        if out["replica"] == victim:  # its headers came before the kill: it had started streaming
            assert "closed" in out or out["last"]["type"] in ("speech.audio.done", "speech.audio.error"), out
            continue
        assert out["last"]["type"] == "speech.audio.done" and out["audio"] == audio, out
    resubmitted = _sum(_metrics(ray_server), "audiocpp_ray_resubmitted_total") - before
    assert resubmitted >= 1  # some request was on the victim, admitted and waiting, when it died
    _wait_for(lambda: len(live := {r["replica"] for r in _reports(ray_server)}) == 2 and victim not in live
              and _running_replicas(ray_server) == 2, 120, "the killed replica replaced")
    again = [_post(ray_server, body) for body in whole]
    assert [r.content for r in again] == expected[:len(whole)]


# -- metrics ---------------------------------------------------------------------------------------
def test_metrics_sum_the_replicas(ray_server: ServerProcess) -> None:
    before = _metrics(ray_server)
    with ThreadPoolExecutor(6) as pool:
        done = list(pool.map(lambda s: _post(ray_server, _body(seed=s)), range(6)))
    assert [r.status_code for r in done] == [200] * 6, [r.text for r in done if r.status_code != 200]
    after = _metrics(ray_server)

    def delta(name: str) -> float:
        return _sum(after, name) - _sum(before, name)

    assert delta("audiocpp_replica_syntheses_total") == 6  # counted on the replicas, summed here
    assert delta('audiocpp_requests_total{endpoint="/v1/audio/speech",model="omnivoice-demo",'
                 'status="200"}') == 6
    # observed on the replicas, summed here: each request was a row of each of its MaskGIT steps' calls
    assert delta('audiocpp_batch_size_sum{model="omnivoice-demo"}') == 6 * FAST["num_inference_steps"]
    assert delta('audiocpp_audio_seconds_total{model="omnivoice-demo"}') > 0
    assert after['audiocpp_ray_replicas{model="omnivoice-demo",state="RUNNING"}'] == 2
    assert 'audiocpp_ray_queue_length{model="omnivoice-demo"}' in after
    replicas = {k for k in after if k.startswith("audiocpp_replica_queue_depth{")}
    assert len(replicas) == 2
    # a replica gone keeps its counts: the sums never go down
    assert _sum(after, "audiocpp_replica_syntheses_total") >= _sum(before, "audiocpp_replica_syntheses_total")


def test_sighup_reloads_the_keys_file_on_the_ingress(ray_server: ServerProcess,
                                                      ray_keys: dict[str, str]) -> None:
    carol, dave = ray_keys["carol"], ray_keys["dave"]
    assert _post(ray_server, _body(), carol).status_code == 200
    assert _post(ray_server, _body(), dave).status_code == 401
    ray_server.keys_file.write_text(f"dave:{dave}\n")  # type: ignore[attr-defined]
    ray_server.proc.send_signal(signal.SIGHUP)
    _wait_for(lambda: _post(ray_server, _body(), dave).status_code == 200, 30, "the keys file reloaded")
    assert _post(ray_server, _body(), carol).status_code == 401


def test_sigterm_drains_and_removes_the_app(ray_server: ServerProcess, single: ServerProcess,
                                            cluster) -> None:
    from ray import serve

    body = _body(input=LONG, response_format="pcm", stream_format="audio")
    with httpx.stream("POST", ray_server.url + "/v1/audio/speech", json=body, timeout=120) as stream:
        pieces = stream.iter_bytes()
        received = [next(pieces)]  # in progress: its first audio has come
        ray_server.proc.send_signal(signal.SIGTERM)
        received += list(pieces)  # the rest comes during the drain
        assert stream.status_code == 200
    expected = _post(single, body).content
    assert b"".join(received) == expected  # the whole audio, unchanged
    assert ray_server.proc.wait(timeout=90) == 0, ray_server.log()
    assert "waiting up to 20 s for requests in progress" in ray_server.log()
    assert "audiocpp" not in serve.status().applications
    ray_server.assert_quiet()


def test_a_model_that_does_not_load_fails_once(cluster, tmp_path: Path, server_cache: dict[str, str]) -> None:
    """The tiny Audio8 checkpoint without one tensor: planned fine, refused by the family at load."""
    from safetensors.torch import load_file, save_file

    from .conftest import AUDIO8_TINY

    broken = tmp_path / "broken"
    broken.mkdir()
    for item in AUDIO8_TINY.iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    tensors = load_file(str(AUDIO8_TINY / "model.safetensors"))
    dropped = sorted(tensors)[0]
    del tensors[dropped]
    save_file(tensors, str(broken / "model.safetensors"))
    started = time.monotonic()
    proc = run_cli("serve", "--ray-address", cluster.address, "--model", f"bad={broken}", "--port",
                   str(free_port()), env=server_cache, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("did not load on its Ray Serve replica") == 1, proc.stderr
    assert dropped in proc.stderr and "Traceback" not in proc.stderr
    assert time.monotonic() - started < 240


def test_print_config_runs_with_serve_run(cluster, tmp_path: Path, server_cache: dict[str, str]) -> None:
    """The config file of ``--print-config``, deployed by Ray's own ``serve run`` on the cluster."""
    import sys

    import ray
    from ray import serve

    port = free_port()
    printed = run_cli("serve", "--ray", "--print-config", *DEMO_FAMILY, "--port", str(port), "--num-cpus",
                      "0.5", "--voices-dir", str(tmp_path / "voices"), env=server_cache)
    assert printed.returncode == 0, printed.stderr
    config = tmp_path / "audiocpp.yaml"
    config.write_text(printed.stdout)
    command = [str(Path(sys.executable).parent / "serve"), "run", str(config), "--address", cluster.address,
               "--non-blocking"]
    deployed = subprocess.run(command, capture_output=True, text=True, timeout=300,
                              env={**os.environ, **server_cache})
    try:
        assert deployed.returncode == 0, deployed.stderr[-3000:]
        _wait_for(lambda: _health(port), 120, "the application of the config file answering")
        r = httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech", json=_body(), timeout=120)
        assert r.status_code == 200 and r.headers["x-audiocpp-replica"]
        assert (tmp_path / "voices" / ".owner-salt").exists()  # the store's folder: the head node's
    finally:
        serve.delete("audiocpp")
        try:
            ray.kill(ray.get_actor("audiocpp-voices", namespace="audiocpp"))
        except ValueError:
            pass
        serve.shutdown()


def _health(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_ray_leaves_no_ray_process(tmp_path: Path, server_cache: dict[str, str]) -> None:
    """``--ray``: a local Ray instance for the run; after SIGTERM nothing of it is left."""
    before = ray_processes()
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([str(cli_path()), "serve", "--ray", *DEMO_FAMILY, "--port", str(port),
                             "--num-cpus", "1"],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **server_cache})
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        _wait_for(lambda: "listening on" in (tmp_path / "serve.log").read_text(), 60, "serving")
        r = httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech", json=_body(), timeout=120)
        assert r.status_code == 200 and r.headers["x-audiocpp-replica"]
        assert ray_processes() - before, "no Ray process was started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    deadline = time.monotonic() + 30
    while ray_processes() - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ray_processes() - before == set(), "audiocpp serve --ray left Ray processes running"
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


# -- configuration and usage -----------------------------------------------------------------------
def test_print_config_is_a_ray_serve_config(tmp_path: Path) -> None:
    import yaml
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve.schema import ServeDeploySchema

    from audiocpp.server.ray_serve import INGRESS, app_builder

    (tmp_path / "keys.txt").write_text(f"carol:{new_key()}\n")
    proc = run_cli("serve", "--ray", "--print-config", *DEMO_FAMILY, "--replicas", "3", "--num-cpus", "2",
                   "--num-gpus", "0.5", "--max-batch", "4", "--voices-dir", str(tmp_path / "v"),
                   "--host", "0.0.0.0", "--api-keys-file", str(tmp_path / "keys.txt"))
    assert proc.returncode == 0, proc.stderr
    config = yaml.safe_load(proc.stdout)
    schema = ServeDeploySchema.model_validate(config)  # Ray Serve's own schema of `serve deploy` files
    app = schema.applications[0]
    assert app.import_path == "audiocpp.server.ray_serve:app_builder" and app.route_prefix == "/"
    deployments = {d.name: d for d in app.deployments}
    model = deployments["model-omnivoice-demo"]
    assert model.num_replicas == 3 and model.ray_actor_options.num_cpus == 2
    assert model.ray_actor_options.num_gpus == 0.5 and model.max_ongoing_requests == 4 + 8
    assert INGRESS in deployments
    assert app.args["voices_dir"] == str(tmp_path / "v") and "api_keys" not in app.args
    # the builder the file names builds the application from those args, as `serve run` does
    built = call_user_app_builder_with_args_if_necessary(app_builder, app.args)
    assert type(built).__name__ == "Application"

    autoscaled = run_cli("serve", "--ray", "--print-config", *DEMO_FAMILY, "--autoscale", "1:4",
                         "--max-batch", "4")
    scaling = yaml.safe_load(autoscaled.stdout)["applications"][0]["deployments"][1]["autoscaling_config"]
    assert scaling == {"min_replicas": 1, "max_replicas": 4, "initial_replicas": 1,
                       "target_ongoing_requests": 4}
    ServeDeploySchema.model_validate(yaml.safe_load(autoscaled.stdout))
    keyed = run_cli("serve", "--ray", "--print-config", "--api-key", new_key())
    assert keyed.returncode == 2 and "writes no keys" in keyed.stderr


@pytest.mark.parametrize(("flags", "message"), [
    (["--replicas", "2"], "--replicas is for a server on Ray Serve"),
    (["--print-config"], "--print-config is for a server on Ray Serve"),
    (["--ray", "--replicas", "0"], "--replicas 0 must be at least 1"),
    (["--ray", "--replicas", "2", "--autoscale", "1:2"], "give one"),
    (["--ray", "--autoscale", "3:2"], "MIN must be at least 1 and MAX at least MIN"),
    (["--ray", "--autoscale", "two"], "is not MIN:MAX"),
    (["--ray", "--num-gpus", "-1"], "--num-gpus -1 must be 0 or more"),
    (["--ray", "--wyoming-port", "10200"], "not served on Ray Serve"),
])
def test_bad_ray_flags(flags: list[str], message: str) -> None:
    proc = run_cli("serve", *flags)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_ray_without_ray_serve_names_the_extra(tmp_path: Path) -> None:
    """A Ray without Ray Serve (a package ``ray`` that has no ``serve``) shadows the installed one."""
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text("")
    env = {"PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = run_cli("serve", "--ray", env=env)
    assert proc.returncode == 2, proc.stderr
    assert "need Ray Serve, which is not installed" in proc.stderr
    assert "pip install 'audiocpp[ray]'" in proc.stderr and "Traceback" not in proc.stderr
