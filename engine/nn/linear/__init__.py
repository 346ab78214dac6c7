"""The linear backends (Q8_0/Q4_0 blocks, bf16-held weights, oneDNN-packed, torch's int4/int8) and
:func:`engine.nn.linear.choice.linear_for`, the one place that picks among them. They import the
kernels (``engine.nn.kernels``) and no layer."""
