"""Network layers and numerics building blocks: norms, RoPE, attention, MLPs, decoder stacks, DAC
convs, Mamba2, KV caches, samplers. They compute through ``engine.nn.linear`` and
``engine.nn.kernels``, never the other way round."""
