"""TRACE stages 3-4: per-capability LoRA adapters trained with multi-turn GRPO, a token-level
mixture-of-experts gate over the frozen adapters, and an OpenAI-compatible server for all variants."""
