from pathlib import Path

import trace_trainer  # noqa: F401 — first: it sets the OpenMP wait policy before torch loads
import pytest
import torch

from trace_trainer.env_server import ServedEnv
from trace_trainer.tiny import TOOL_WORDS, build_model, build_tokenizer, save_tiny
from trace_trainer.toy_env import CounterEnv, SayWordEnv

torch.set_num_threads(2)
SAY_WORDS = ["say", "reply", "with", "the", "word", "bye", "red", "blue", "green", "yellow"]


@pytest.fixture(scope="session")
def tool_tok():
    return build_tokenizer(TOOL_WORDS)


@pytest.fixture()
def tool_model(tool_tok):
    return build_model(len(tool_tok), pad_id=tool_tok.pad_token_id, eos_id=tool_tok.eos_token_id)


@pytest.fixture(scope="session")
def say_model_dir(tmp_path_factory):
    return save_tiny(str(tmp_path_factory.mktemp("say-model")), SAY_WORDS)


@pytest.fixture(scope="session")
def tool_model_dir(tmp_path_factory):
    return save_tiny(str(tmp_path_factory.mktemp("tool-model")), TOOL_WORDS)


@pytest.fixture()
def counter_env():
    served = ServedEnv(CounterEnv(turns=2))
    yield served
    served.close()


@pytest.fixture()
def say_env():
    served = ServedEnv(SayWordEnv(partial=0.3))
    yield served
    served.close()


SMOLLM2_GGUF = Path(__file__).resolve().parents[2] / ".cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def smol_tok():
    """SmolLM2's real tokenizer and chat template (from the bundled GGUF that scripts/setup.sh places)."""
    from trace_trainer.model import load_tokenizer

    assert SMOLLM2_GGUF.is_file(), f"{SMOLLM2_GGUF} is missing: run scripts/setup.sh"
    return load_tokenizer(str(SMOLLM2_GGUF))


@pytest.fixture()
def smol_vocab_model(smol_tok):
    """A random tiny Llama over SmolLM2's vocabulary: real tokens, the grammar's real masks, fast."""
    return build_model(len(smol_tok), pad_id=smol_tok.pad_token_id, eos_id=smol_tok.eos_token_id)
