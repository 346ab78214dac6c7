"""audiocpp.server: the OpenAI-compatible speech server (`audiocpp serve`), over the public API."""
