"""TRACE stages 3-4: per-capability LoRA adapters trained with multi-turn GRPO, a token-level
mixture-of-experts gate over the frozen adapters, and an OpenAI-compatible server for all variants."""

import os

# OpenMP threads that spin while waiting make a CPU trainer 10-20x slower whenever another process
# (the LLM server, a worker, a second trainer) shares the cores: sleeping waits cost ~nothing when
# the cores are free. Read once when torch loads its OpenMP runtime, so it is set before any import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
