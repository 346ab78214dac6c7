"""audiocpp.server: the OpenAI-compatible speech server (`audiocpp serve`), over the public API.

Modules: ``cli`` (start-up: arguments, model loading, uvicorn), ``app`` (routes), ``speech``
(request -> engine request -> synthesis), ``scheduler`` (bounded, cancellable work per model),
``voices`` (the voice store), ``encoding`` (response formats), ``metrics`` (Prometheus text),
``asgi`` (body limit, counting, disconnect-aware streaming), ``errors`` (OpenAI's error shape),
``playground`` (the page at ``/``), ``bench`` (latency and throughput figures). See docs/server.md.
"""
