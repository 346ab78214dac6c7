"""Audio8 TTS maintainer tools: tiny/real upstream-layout checkpoints, goldens, parity report, benchmark,
audio.cpp-layout package writer."""
