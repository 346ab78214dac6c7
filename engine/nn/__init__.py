"""Shared torch building blocks. Families reuse these instead of copying them.

Each block reproduces the upstream arithmetic order (fp32 statistics, cast points) so
that float32 results match the reference implementations exactly.
"""
