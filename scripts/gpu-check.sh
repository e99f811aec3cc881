#!/usr/bin/env bash
# The one prepared command a GPU session runs (issue 15): at most about 8 minutes, nothing to install, no
# network. The GPU machine has PyTorch and transformers but no Rust, so the cppo binary is built here
# (`cargo build --release -p cppo --features cuda`, stripped) and carried; point CPPO_BIN at it.
#
#   CPPO_BIN=target/release/cppo scripts/gpu-check.sh
#
# 1. `cppo selftest --device cuda --bench <Qwen2.5-1.5B config>`: every CUDA backend op against the CPU
#    backend on fresh random inputs, then cppo's update timed on a random model with Qwen2.5-1.5B's shapes
#    (the decoder's tape forward + backward and AdamW over every weight, on the CUDA backend, weights
#    already on the device; G = 8, prompt 256, 256 new tokens); its last line is `N passed, N failed`.
# 2. scripts/gpu_bench_torch.py: transformers + torch baselines on a random model with Qwen2.5-1.5B's shapes
#    (update tokens/s with fused AdamW under bf16 autocast; `generate` tokens/s at batch 1, 64, 256).
# 3. What cppo cannot give yet: generation on the CUDA backend (batch 1, 64, 256) and a whole GRPO/CPPO step
#    (the trainer does not run on the CUDA backend; only the tape does, through Decoder::tape_on_weights).
#    The script says so instead of printing figures.
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
    timeout 200 "$BIN" selftest --device cuda --bench configs/models/qwen2.5-1.5b-instruct.json 2>&1 | tee "$OUTDIR/selftest.txt"
    rc=${PIPESTATUS[0]}
    echo "selftest exit status: $rc"
    [ "$rc" -eq 0 ] || status=1
else
    echo "no cppo binary at $BIN: build it with \`cargo build --release -p cppo --features cuda\` and carry it" | tee "$OUTDIR/selftest.txt"
    status=1
fi

echo "== PyTorch + transformers baselines (random Qwen2.5-1.5B shapes)"
timeout 260 python3 scripts/gpu_bench_torch.py --budget-s 230 --json "$OUTDIR/torch.json" 2>&1 | tee "$OUTDIR/torch.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== cppo side by side"
echo "cppo's update figure is the 'cppo tape' line of the selftest above (tokens/s through the model of tape +" \
     "AdamW, comparable with the PyTorch update's tokens/s over its batch). cppo generation and" \
     "whole GRPO/CPPO steps do not run on the CUDA backend yet: no figures for them." | tee "$OUTDIR/cppo.txt"

exit $status
