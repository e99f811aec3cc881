#!/usr/bin/env bash
# The one prepared command a GPU session runs (issue 15): at most about 8 minutes, nothing to install, no
# network. The GPU machine has PyTorch and transformers but no Rust, so the cppo binary is built here
# (`cargo build --release -p cppo --features cuda`, stripped) and carried; point CPPO_BIN at it.
#
#   CPPO_BIN=target/release/cppo scripts/gpu-check.sh
#
# 1. `cppo selftest --device cuda --bench <Qwen2.5-1.5B config>`: every CUDA backend op against the CPU
#    backend on fresh random inputs and the generation engine on the CUDA backend against the engine on the
#    CPU (small random model: same tokens, log-probs within bound), then on a random model with Qwen2.5-1.5B's
#    shapes: cppo's update timed (the decoder's tape forward + backward and AdamW over every weight, on the
#    CUDA backend, weights already on the device; G = 8, prompt 256, 256 new tokens) and cppo's generation
#    timed (the engine on the CUDA backend, bf16 weights, KV cache on the device, sampled on the device
#    at temperature 1; batch 1, 64, 256 of 64-token prompts, 128 new tokens each: `cppo generate: {json}`
#    lines); its last line is `N passed, N failed`.
# 2. scripts/gpu_bench_torch.py: transformers + torch baselines on a random model with Qwen2.5-1.5B's shapes
#    (update tokens/s with fused AdamW under bf16 autocast; `generate` tokens/s at batch 1, 64, 256, same
#    prompt length, new tokens and sampling as cppo's).
# 3. Side by side: cppo's generation tokens/s over transformers' per batch (issue 15's target: at least 5x at
#    batch 256).
# 5. When CPPO_STEP_BENCH is set (a second call: the first three take most of the device tool's 10 minutes):
#    `cppo bench step --device cuda --random-config <Qwen2.5-1.5B config> --max-new-tokens 512`: one GRPO step
#    (8 questions x G = 16) and CPPO P = 0.875 on the same rollouts, rollouts and update on the GPU, phase by
#    phase, with CPPO's policy phase over GRPO's (target: at most 0.2x).
# 4. When CPPO_TRAIN_TEST is set: the trainer test binary built with the cuda feature
#    (`cargo test --release -p cppo-train --features cuda --test device_update --no-run`, stripped, carried):
#    two training steps of a tiny model with model.device = "cuda" (rollouts and update on the GPU) against
#    the CPU update, and the reference-backend device tests.
#
# NEVER RUN ON A GPU YET: written on a CPU-only machine. Results go to $OUT (the device tool's output
# folder) when it is set, else to ./gpu-check-out.
set -u
cd "$(dirname "$0")/.."
BIN=${CPPO_BIN:-target/release/cppo}
OUTDIR=${OUT:-gpu-check-out}
mkdir -p "$OUTDIR"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
status=0

echo "== nvidia-smi"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$OUTDIR/nvidia-smi.txt" || true

echo "== cppo selftest --device cuda ($BIN)"
if [ -x "$BIN" ]; then
    # NVRTC compiles our kernels at first use: a cold start takes seconds, not minutes.
    # The random 1.5 B-parameter model is drawn on the CPU first (tens of seconds).
    # Generation is timed within 90 s of its start (a batch reached later is reported as skipped).
    timeout 270 "$BIN" selftest --device cuda --bench configs/models/qwen2.5-1.5b-instruct.json 2>&1 | tee "$OUTDIR/selftest.txt"
    rc=${PIPESTATUS[0]}
    echo "selftest exit status: $rc"
    [ "$rc" -eq 0 ] || status=1
else
    echo "no cppo binary at $BIN: build it with \`cargo build --release -p cppo --features cuda\` and carry it" | tee "$OUTDIR/selftest.txt"
    status=1
fi

echo "== PyTorch + transformers baselines (random Qwen2.5-1.5B shapes)"
timeout 190 python3 scripts/gpu_bench_torch.py --budget-s 160 --json "$OUTDIR/torch.json" 2>&1 | tee "$OUTDIR/torch.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== cppo side by side"
{
    echo "update: cppo's figure is the 'cppo tape' line of the selftest above (tokens/s through the model of tape +" \
         "AdamW, comparable with the PyTorch update's tokens/s over its batch)."
    python3 - "$OUTDIR/selftest.txt" "$OUTDIR/torch.json" <<'PY'
import json, sys
cppo = {}
try:
    for line in open(sys.argv[1]):
        if "cppo generate: {" in line:
            g = json.loads(line[line.index("{"):line.rindex("}") + 1])
            cppo[g["batch"]] = g
except OSError as e:
    print(f"generation: no selftest output ({e})")
try:
    torch = {g["batch"]: g for g in json.load(open(sys.argv[2])).get("generate", [])}
except (OSError, ValueError) as e:
    torch = {}
    print(f"generation: no transformers figures ({e})")
for b in sorted(set(cppo) | set(torch)):
    c, t = cppo.get(b, {}), torch.get(b, {})
    ct, tt = c.get("tokens_per_s"), t.get("tokens_per_s")
    ratio = f"{ct / tt:.2f}x" if ct and tt else "n/a"
    say = lambda v, g: f"{v:.1f} tokens/s" if v else g.get("skipped", "no figure")
    print(f"generate batch {b}: cppo {say(ct, c)}, transformers {say(tt, t)}: cppo/transformers {ratio}")
PY
    echo "whole GRPO/CPPO steps: timed by step 5 (CPPO_STEP_BENCH=1, a call of its own)."
} 2>&1 | tee "$OUTDIR/cppo.txt"

echo "== the trainer on the GPU (model.device = cuda) against the CPU"
if [ -n "${CPPO_TRAIN_TEST:-}" ] && [ -x "$CPPO_TRAIN_TEST" ]; then
    timeout 120 "$CPPO_TRAIN_TEST" --test-threads 1 2>&1 | tee "$OUTDIR/trainer.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
    echo "CPPO_TRAIN_TEST not set: the trainer test binary was not carried, so the trainer did not run on the GPU" | tee "$OUTDIR/trainer.txt"
fi

echo "== a whole GRPO step and CPPO P = 0.875 on the GPU, phase by phase"
if [ -n "${CPPO_STEP_BENCH:-}" ] && [ -x "$BIN" ]; then
    # Drawing the random 1.5 B-parameter model on the CPU takes tens of seconds; the step itself seconds.
    timeout 300 "$BIN" bench step --device cuda --random-config configs/models/qwen2.5-1.5b-instruct.json --max-new-tokens 512 2>&1 | tee "$OUTDIR/step.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
    echo "CPPO_STEP_BENCH not set (or no cppo binary): whole steps not timed in this call" | tee "$OUTDIR/step.txt"
fi

exit $status
