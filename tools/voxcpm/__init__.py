"""VoxCPM maintainer tools: checkpoint builders (tiny for tests, real-size for benchmarks) and
the scripts that run the upstream reference in ``.ref-envs/voxcpm``."""
