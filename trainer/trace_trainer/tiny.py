"""Tiny randomly initialised Llama models and word-level tokenizers with a ChatML template, built
offline from a config: what the tests and the GPU check train, so nothing is downloaded."""
from __future__ import annotations

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from .attention import use_grouped_attention

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIALS = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]
CHAT_WORDS = ["system", "user", "assistant", "tool", " ", "\n"]
# Enough characters and words to write `<tool_call>{"name": "add", "arguments": {"n": 1}}</tool_call>`.
TOOL_WORDS = list('{}[]":,<>/_-.0123456789') + ["tool_call", "name", "arguments", "add", "n", "error", "ok", "go", "on", "reach",
                                                 "use", "to", "the", "target", "Tools", "You", "may", "call", "one", "function"]


def build_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    """Every word, space, newline and punctuation mark is one token; decoding concatenates, so text
    made of known pieces round-trips exactly."""
    vocab: dict[str, int] = {}
    for w in SPECIALS + CHAT_WORDS + list(words):
        vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex(r"\w+|[^\w\s]|\s"), behavior="isolated")
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>", eos_token="<|im_end|>",
                                  additional_special_tokens=["<|im_start|>"])
    tok.chat_template = CHATML
    return tok


def build_model(vocab_size: int, *, hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2, intermediate: int = 128,
                seed: int = 0, pad_id: int = 0, eos_id: int = 3, init_std: float = 0.1) -> LlamaForCausalLM:
    """`init_std` 0.1 rather than Llama's 0.02: with d = 64 and an RMS-normalised final state, a
    0.02 output head bounds every logit near zero, so no adapter could make the policy confident."""
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=4096,
                      tie_word_embeddings=False, initializer_range=init_std, pad_token_id=pad_id, eos_token_id=eos_id, bos_token_id=None)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    use_grouped_attention(model)
    model.eval()
    return model


def save_tiny(path: str, words: list[str], **model_kw) -> str:
    """A model directory loadable by `from_pretrained` (and by the trainer's `model: <path>`)."""
    tok = build_tokenizer(words)
    model = build_model(len(tok), pad_id=tok.pad_token_id, eos_id=tok.eos_token_id, **model_kw)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
