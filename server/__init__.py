"""audiocpp.server: the OpenAI-compatible speech server (`audiocpp serve`), over the public API.

Modules: ``cli`` (start-up: arguments, model loading, uvicorn), ``app`` (routes), ``speech``
(request -> engine request -> synthesis), ``scheduler`` (bounded, cancellable work per model),
``voices`` (the voice store), ``encoding`` (response formats), ``metrics`` (Prometheus text),
``asgi`` (body limit, counting, disconnect-aware streaming), ``errors`` (OpenAI's error shape),
``playground`` (the page at ``/``), ``bench`` (latency and throughput figures), ``request_log`` (the
line per request on the terminal); and who may use it:
``auth`` (API keys, constant-time checks, log redaction), ``gate`` (the middleware in front of every
route: keys, limits, ``/metrics``, the audit line), ``limits`` (per-key rate and audio limits),
``audit`` (the JSON access log). See docs/server.md ("Security"). Past one machine: ``ray_serve`` (the
same app as a Ray Serve application: an ingress, a deployment per model running the model's batcher,
one voice-store actor for the cluster; docs/server.md, "On a Ray cluster").
"""
