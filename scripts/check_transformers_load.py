"""Loads a Hugging Face directory written by `cppo convert` (or saved by `cppo train`) with transformers
itself and checks it against testdata/golden: prompt ids, top-20 next-token logits, the 32 greedy tokens
and the teacher-forced completion log-probs. Exits non-zero on any mismatch.

    python scripts/check_transformers_load.py MODEL_DIR GOLDEN_JSON
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main(model_dir, golden_path):
    golden = json.load(open(golden_path))
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    worst_logit = worst_lp = 0.0
    for case in golden["cases"]:
        text = tok.apply_chat_template(case["messages"], tokenize=False, add_generation_prompt=True)
        assert text == case["prompt_text"], f"chat template renders {text!r}, golden {case['prompt_text']!r}"
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == case["prompt_ids"], f"prompt ids differ: {ids} vs {case['prompt_ids']}"
        x = torch.tensor([ids])
        with torch.no_grad():
            logits = model(x).logits[0, -1]
        top = case["last_logits_top20"]
        for i, v in zip(top["ids"], top["values"]):
            worst_logit = max(worst_logit, abs(logits[i].item() - v))
        out = model.generate(x, max_new_tokens=32, do_sample=False)[0, len(ids):].tolist()
        want = case["greedy_32"]
        assert out[: len(want)] == want, f"greedy tokens differ: {out} vs {want}"
        comp = case["completion_ids"]
        full = torch.tensor([ids + comp])
        with torch.no_grad():
            lp = torch.log_softmax(model(full).logits[0].double(), -1)
        for t, (c, v) in enumerate(zip(comp, case["completion_logprobs"])):
            worst_lp = max(worst_lp, abs(lp[len(ids) - 1 + t, c].item() - v))
    print(f"{len(golden['cases'])} cases: prompt ids and greedy tokens exact, "
          f"largest top-20 logit difference {worst_logit:.2e}, largest log-prob difference {worst_lp:.2e}")
    assert worst_logit < 1e-3 and worst_lp < 1e-3


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
