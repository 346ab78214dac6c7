"""Shared torch building blocks. Families reuse these instead of copying them.

Each block reproduces the upstream arithmetic order (fp32 statistics, cast points) so
that float32 results match the reference implementations exactly.

Split by what the modules hold, importing downward only (``layers`` -> ``linear`` -> ``kernels``):
``layers/`` (network layers and numerics blocks), ``linear/`` (the linear backends and the one
choice among them), ``kernels/`` (the C++ kernels, their build and the Python of those that are not
layers); ``build.py`` builds a family's network over them.
"""
