"""Offline tokenizers for the model families of chat.py: SmolLM2's real BPE vocabulary (from the
bundled GGUF) plus the family's special tokens, carrying the family's real chat template
(fixtures/chat_templates, sources in SOURCES.md). Nothing is downloaded."""
import copy
from functools import lru_cache
from pathlib import Path

from transformers import AutoTokenizer

from conftest import SMOLLM2_GGUF

TEMPLATES = Path(__file__).resolve().parent / "fixtures" / "chat_templates"

# family file -> (special tokens the template writes, bos, eos) as in the real tokenizers.
SPECIALS = {
    "qwen3": (["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<think>", "</think>",
               "<tool_response>", "</tool_response>"], None, "<|im_end|>"),
    "qwen2.5": (["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>"], None, "<|im_end|>"),
    "llama3.1": (["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"],
                 "<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": (["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"],
                 "<|begin_of_text|>", "<|eot_id|>"),
    "mistral-nemo": (["<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
                      "[/TOOL_RESULTS]"], "<s>", "</s>"),
    "mistral-small3.2": (["<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
                          "[/TOOL_RESULTS]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[CALL_ID]", "[ARGS]", "[TOOL_CONTENT]"], "<s>", "</s>"),
    "gemma2": (["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"], "<bos>", "<eos>"),
    "gemma3": (["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"], "<bos>", "<eos>"),
    "phi4-mini": (["<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|tool|>", "<|/tool|>", "<|tool_call|>", "<|/tool_call|>",
                   "<|endoftext|>"], None, "<|endoftext|>"),
}


@lru_cache(maxsize=1)
def _smollm2():
    assert SMOLLM2_GGUF.is_file(), f"{SMOLLM2_GGUF} is missing: run scripts/setup.sh"
    hf = Path(str(SMOLLM2_GGUF) + ".hf")
    if not hf.is_dir():  # the dequantized copy is written on first load
        from trace_trainer.model import load_tokenizer
        load_tokenizer(str(SMOLLM2_GGUF))
    return AutoTokenizer.from_pretrained(str(hf))


def family_tokenizer(name: str):
    """A fresh tokenizer for family file `name` (see SPECIALS)."""
    tok = copy.deepcopy(_smollm2())
    specials, bos, eos = SPECIALS[name]
    tok.add_special_tokens({"additional_special_tokens": specials})
    tok.bos_token, tok.eos_token = bos, eos
    tok.pad_token = eos
    tok.chat_template = (TEMPLATES / f"{name}.jinja").read_text()
    tok.name_or_path = f"test/{name}"
    return tok
