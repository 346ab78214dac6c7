"""VoxCPM2 maintainer tools: checkpoint builders (tiny for tests, real-size for benchmarks), the
upstream reference runner (``.ref-envs/voxcpm``), the parity report and the benchmark. The
voxcpm1 tools (``tools/voxcpm1``) build on these, as the voxcpm1 family builds on voxcpm2."""
