"""audiocpp.batch: many utterances locally or on Ray (`audiocpp batch`), over the public API."""
