"""VoxCPM1 maintainer tools (a variant of tools/voxcpm2): 0.5B/1.5-style checkpoints, the
VoxCPM.cpp-layout converter, the parity report and the benchmark."""
