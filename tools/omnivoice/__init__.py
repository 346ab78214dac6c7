"""OmniVoice maintainer tools: tiny checkpoints, the reference runner, parity report, benchmark."""
