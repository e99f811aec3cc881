"""Checks cppo's LoRA adapters against PEFT itself (issue 16).

    python check_peft.py BASE_DIR CPPO_ADAPTER_DIR CPPO_LOGPROBS_JSON PEFT_OUT_DIR

BASE_DIR is a Hugging Face model (cppo convert's output), CPPO_ADAPTER_DIR an adapter cppo saved,
CPPO_LOGPROBS_JSON {"tokens": [...], "logprobs": [...]} cppo's log-probs of tokens[1:] given the tokens
before, with that adapter (f32). Checks that PEFT loads cppo's adapter and gives the same log-probs
within 1e-4; then saves a PEFT adapter of its own (random, non-zero B) to PEFT_OUT_DIR with its
log-probs of the same tokens in PEFT_OUT_DIR/peft_logprobs.json, for cppo to load and compare.
Prints "peft loads cppo's adapter" and "peft adapter saved" on success; fails loudly otherwise.
"""

import json
import sys

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM


def logprobs(model, tokens):
    ids = torch.tensor([tokens])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].double()
    lp = torch.log_softmax(logits, dim=-1)
    return [lp[i, tokens[i + 1]].item() for i in range(len(tokens) - 1)]


def main():
    base_dir, cppo_adapter, cppo_json, out_dir = sys.argv[1:5]
    want = json.load(open(cppo_json))
    tokens = want["tokens"]
    base = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    model = PeftModel.from_pretrained(base, cppo_adapter)
    model.eval()
    got = logprobs(model, tokens)
    err = max(abs(a - b) for a, b in zip(got, want["logprobs"]))
    assert len(got) == len(want["logprobs"]), (len(got), len(want["logprobs"]))
    assert err < 1e-4, f"PEFT's log-probs with cppo's adapter differ by {err}"
    print(f"peft loads cppo's adapter: log-probs within {err:.2e}")

    base = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], lora_dropout=0.0)
    peft_model = get_peft_model(base, cfg)
    torch.manual_seed(3)
    for name, p in peft_model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)
    peft_model.eval()
    peft_model.save_pretrained(out_dir)
    json.dump({"tokens": tokens, "logprobs": logprobs(peft_model, tokens)}, open(f"{out_dir}/peft_logprobs.json", "w"))
    print("peft adapter saved")


if __name__ == "__main__":
    main()
