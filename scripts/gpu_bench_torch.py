"""PyTorch + transformers baselines for issue 15's targets, on a random model with Qwen2.5-1.5B-Instruct's
shapes (configs/models/qwen2.5-1.5b-instruct.json; random weights: speed only). NEVER RUN ON A GPU YET:
written and syntax-checked (python3 -m py_compile) on a CPU-only machine; its first run is a GPU
session's scripts/gpu-check.sh.

    python3 scripts/gpu_bench_torch.py [--config PATH] [--budget-s 300] [--json OUT.json]

Measures, each within the time budget (a section that does not fit is reported as skipped, never
guessed):
- update tokens/s: forward + backward + gradient clipping + torch's fused AdamW, f32 master
  weights under bf16 autocast, SDPA attention, on batches of random token ids (the loss is the mean token cross-entropy);
- generate tokens/s at batch 1, 64 and 256: transformers `generate` on a bf16 copy, sampling at
  temperature 1, every row forced to the same number of new tokens (64-token prompts, 128 new tokens:
  the shapes of cppo's side, `cppo_conformance::selftest::GEN_SHAPES`);
- the achieved share of the GPU's dense bf16 matrix rate for the update (6 x parameters x tokens
  FLOPs, attention left out), where the GPU's peak is known to this script.
Needs: torch with CUDA, transformers. No network (the model is built from the config file).
"""
import argparse
import json
import os
import sys
import time

# Never reach a hub: everything is built from the local config.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Dense bf16 tensor-core peaks (FLOP/s, no sparsity) by device-name fragment; unknown GPUs get none.
BF16_PEAK = [("H200", 989e12), ("H100 SXM", 989e12), ("H100 PCIe", 756e12), ("H100", 989e12), ("A100", 312e12), ("L40S", 362e12)]


def log(msg):
    print(msg, flush=True)


def peak_for(name):
    for frag, peak in BF16_PEAK:
        if frag in name:
            return peak
    return None


def build_model(config_path, torch, transformers):
    with open(config_path) as f:
        cfg = json.load(f)
    config = transformers.AutoConfig.for_model(**cfg)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32, attn_implementation="sdpa")
    return model, config


def timed(torch, fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def bench_update(model, config, torch, batch, seq, steps, deadline):
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0, fused=True)
    ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        # Global-norm clipping, as a trainer does (TRL's max_grad_norm = 1.0) and cppo's side does.
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    warm = timed(torch, step)  # allocations, autotuning
    if time.monotonic() + warm * steps > deadline:
        steps = max(1, int((deadline - time.monotonic()) / max(warm, 1e-3)) - 1)
    if steps < 1:
        return {"skipped": "no time left after the warm-up step"}
    secs = timed(torch, lambda: [step() for _ in range(steps)])
    tokens = batch * seq * steps
    params = sum(p.numel() for p in model.parameters())
    flops = 6.0 * params * tokens
    del opt
    torch.cuda.empty_cache()
    return {"batch": batch, "seq": seq, "steps": steps, "seconds": secs, "tokens_per_s": tokens / secs, "tflops": flops / secs / 1e12}


def bench_generate(model, config, torch, batch, prompt_len, new_tokens, deadline):
    if time.monotonic() > deadline:
        return {"batch": batch, "skipped": "time budget spent"}
    ids = torch.randint(0, config.vocab_size, (batch, prompt_len), device="cuda")
    mask = torch.ones_like(ids)
    kw = dict(attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=0)
    with torch.no_grad():
        model.generate(ids, **dict(kw, max_new_tokens=4, min_new_tokens=4))  # warm-up
        out = [None]
        secs = timed(torch, lambda: out.__setitem__(0, model.generate(ids, **kw)))
    made = (out[0].shape[1] - prompt_len) * batch
    return {"batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens, "seconds": secs, "tokens_per_s": made / secs}


def main():
    ap = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--config", default=os.path.join(root, "configs/models/qwen2.5-1.5b-instruct.json"))
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--update-batch", type=int, default=8)
    ap.add_argument("--update-seq", type=int, default=512)
    ap.add_argument("--update-steps", type=int, default=5)
    ap.add_argument("--gen-batches", default="1,64,256")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=128)
    args = ap.parse_args()
    deadline = time.monotonic() + args.budget_s

    import torch
    import transformers

    if not torch.cuda.is_available():
        log("gpu_bench_torch: torch sees no CUDA device; nothing measured")
        return 2
    name = torch.cuda.get_device_name(0)
    results = {"device": name, "torch": torch.__version__, "transformers": transformers.__version__, "config": args.config}
    log(f"device {name}, torch {torch.__version__}, transformers {transformers.__version__}")

    model, config = build_model(args.config, torch, transformers)
    model.to("cuda")
    params = sum(p.numel() for p in model.parameters())
    log(f"random model with {os.path.basename(args.config)}'s shapes: {params / 1e9:.3f} B parameters")

    # Leave about a third of the budget for generation.
    upd = bench_update(model, config, torch, args.update_batch, args.update_seq, args.update_steps, deadline - args.budget_s / 3)
    peak = peak_for(name)
    if "tflops" in upd and peak:
        upd["share_of_bf16_peak"] = upd["tflops"] * 1e12 / peak
    results["update"] = upd
    log(f"update (fwd+bwd+fused AdamW, bf16 autocast, SDPA): {json.dumps(upd)}")

    model = model.to(torch.bfloat16).eval()
    torch.cuda.empty_cache()
    results["generate"] = []
    for b in [int(x) for x in args.gen_batches.split(",")]:
        try:
            g = bench_generate(model, config, torch, b, args.prompt_len, args.new_tokens, deadline)
        except torch.cuda.OutOfMemoryError as e:
            g = {"batch": b, "skipped": f"out of memory: {e}"}
            torch.cuda.empty_cache()
        results["generate"].append(g)
        log(f"transformers generate: {json.dumps(g)}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    log(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
