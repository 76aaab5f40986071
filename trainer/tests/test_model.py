import shutil

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import SMOLLM2_GGUF
from trace_trainer import model as model_mod
from trace_trainer.model import load_base, load_tokenizer


def test_gguf_is_dequantized_once_to_the_same_weights_and_tokenizer(tmp_path, monkeypatch):
    gguf = tmp_path / SMOLLM2_GGUF.name
    shutil.copy2(SMOLLM2_GGUF, gguf)
    tok = load_tokenizer(str(gguf))
    model = load_base(str(gguf), torch.device("cpu"), torch.float32)
    cached = tmp_path / (gguf.name + ".hf")
    assert (cached / "source.json").is_file() and (cached / "model.safetensors").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dequantize-")]  # no temporary left

    direct_tok = AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=gguf.name)
    direct = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=gguf.name, dtype=torch.float32)
    msgs = [{"role": "system", "content": "You are the front desk."}, {"role": "user", "content": "Cancel QX7P2, café ☕"}]
    assert tok.apply_chat_template(msgs, add_generation_prompt=True) == direct_tok.apply_chat_template(msgs, add_generation_prompt=True)
    assert (tok.eos_token_id, len(tok), tok.chat_template) == (direct_tok.eos_token_id, len(direct_tok), direct_tok.chat_template)
    ours, theirs = model.state_dict(), direct.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)

    # Loaded again, the GGUF is not parsed: transformers reads the safetensors copy.
    seen = []
    real = model_mod.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(model_mod.AutoModelForCausalLM, "from_pretrained", lambda src, **kw: seen.append(kw) or real(src, **kw))
    load_base(str(gguf), torch.device("cpu"), torch.float32)
    assert seen and all("gguf_file" not in kw for kw in seen)
