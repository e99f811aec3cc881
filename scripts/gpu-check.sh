#!/usr/bin/env bash
# The prepared commands of a GPU session, one stage per call, each well inside the device tool's 600 s
# per command, each writing its results to $OUT as it goes (a time-out keeps what was written). The GPU
# machine has PyTorch and its nvidia-* wheels but no Rust and no network, so the cppo binary is built
# here (`cargo build --release -p cppo --features cuda`, stripped) and carried; point CPPO_BIN at it.
#
#   CPPO_BIN=target/release/cppo scripts/gpu-check.sh 1     # first, always; fix what it finds first
#   CPPO_BIN=target/release/cppo scripts/gpu-check.sh 2
#   CPPO_BIN=target/release/cppo CPPO_TRAIN_TEST=path/to/device_update-binary scripts/gpu-check.sh 3
#   scripts/gpu-check.sh --dry-run                          # all three on tiny shapes (CI: on the fake driver)
#
# Stage 1 (at most ~250 s): `cppo selftest --device cuda` with CPPO_CUDA_SYNC=1 (each kernel waited for,
#   so a fault names its kernel): every CUDA backend op against the CPU backend on fresh random inputs and
#   the generation engine against the CPU's. Each section is printed as it finishes; the last line is
#   `N passed, N failed`. Anything failed: the script stops there (exit 1).
# Stage 2 (at most ~420 s): the benches against PyTorch on a random model with Qwen2.5-1.5B's shapes:
#   `cppo selftest --bench` (cppo's update: tape forward + backward and AdamW; cppo's generation at batch 1,
#   64, 256), scripts/gpu_bench_torch.py (transformers + torch: update with fused AdamW under bf16 autocast,
#   `generate` at the same batches), and the two side by side (issue 15's target: >= 5x at batch 256).
# Stage 3 (at most ~430 s): `cppo bench step --device cuda` (one GRPO step and CPPO P = 0.875 on the same
#   rollouts, phase by phase) and, when CPPO_TRAIN_TEST names the carried trainer test binary
#   (`cargo test --release -p cppo-train --features cuda --test device_update --no-run`), two training
#   steps with model.device = "cuda" against the CPU.
# --dry-run: the same three stages in one call on tiny shapes (a tiny random config, 4 new tokens, no
#   PyTorch unless it imports): proves the script and the binary's paths, not the timings.
#
# Libraries: cppo finds libcuda, libcublasLt and libnvrtc itself (the loader path, CUDA_HOME,
# /usr/local/cuda, the Python wheels' site-packages/nvidia/*/lib, CPPO_NVRTC_DIR) and names every place it
# searched when one is missing. CPPO_OFFLINE=1: it never tries to fetch NVRTC here.
set -u
cd "$(dirname "$0")/.."
BIN=${CPPO_BIN:-target/release/cppo}
OUTDIR=${OUT:-gpu-check-out}
mkdir -p "$OUTDIR"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 CPPO_OFFLINE=1
CONFIG=configs/models/qwen2.5-1.5b-instruct.json
STEP_SHAPE=(--max-new-tokens 512)
BENCH_SHAPE=()
SEED=()
dry=0
stages=()
for a in "$@"; do
    case "$a" in
        --dry-run) dry=1 ;;
        1|2|3) stages+=("$a") ;;
        *) echo "usage: $0 [--dry-run] [1|2|3]..." >&2; exit 2 ;;
    esac
done
if [ "$dry" = 1 ]; then
    # A tiny random model: the script's paths on any driver, the fake one included, in a minute or two.
    CONFIG="$OUTDIR/tiny-config.json"
    cat > "$CONFIG" <<'JSON'
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 32, "intermediate_size": 48,
 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 96,
 "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true,
 "bos_token_id": 1, "eos_token_id": 2}
JSON
    STEP_SHAPE=(--max-new-tokens 4 --questions 2 --group 8 --prompt-len 8)
    BENCH_SHAPE=(--bench-tiny)
    # A seed known to pass: a dry run proves the script, not the backend (fresh inputs on a real GPU).
    SEED=(--seed 5)
    [ ${#stages[@]} -gt 0 ] || stages=(1 2 3)
fi
[ ${#stages[@]} -gt 0 ] || stages=(1)

if [ ! -x "$BIN" ]; then
    echo "no cppo binary at $BIN: build it with \`cargo build --release -p cppo --features cuda\` and carry it" | tee "$OUTDIR/error.txt"
    exit 1
fi
# Stage lines go to the terminal and, line by line, to their file under $OUT.
run() { # NAME TIMEOUT COMMAND...: runs it, writing NAME.txt as it goes; returns its status
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*"
    timeout "$limit" "$@" 2>&1 | tee "$OUTDIR/$name.txt"
    local rc=${PIPESTATUS[0]}
    echo "$name exit status: $rc" | tee -a "$OUTDIR/$name.txt"
    return "$rc"
}
torch_ok() { python3 -c 'import torch, transformers' >/dev/null 2>&1; }

stage1() {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUTDIR/nvidia-smi.txt" 2>&1 || echo "no nvidia-smi" > "$OUTDIR/nvidia-smi.txt"
    cat "$OUTDIR/nvidia-smi.txt"
    CPPO_CUDA_SYNC=1 run selftest 240 "$BIN" selftest --device cuda "${SEED[@]}"
}

stage2() {
    local status=0
    # The random 1.5 B-parameter model is drawn on the CPU first (tens of seconds); generation is timed
    # within 90 s of its start (a batch reached later is reported as skipped).
    run bench 200 "$BIN" selftest --device cuda "${SEED[@]}" --bench "$CONFIG" "${BENCH_SHAPE[@]}" || status=1
    if torch_ok; then
        run torch 190 python3 scripts/gpu_bench_torch.py --budget-s 160 --json "$OUTDIR/torch.json" || status=1
    else
        echo "torch or transformers does not import here: no PyTorch baseline" | tee "$OUTDIR/torch.txt"
        [ "$dry" = 1 ] || status=1
    fi
    python3 - "$OUTDIR/bench.txt" "$OUTDIR/torch.json" <<'PY' 2>&1 | tee "$OUTDIR/side-by-side.txt"
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
print("update: cppo's figure is the 'cppo tape' line of bench.txt, PyTorch's the update line of torch.txt")
for b in sorted(set(cppo) | set(torch)):
    c, t = cppo.get(b, {}), torch.get(b, {})
    ct, tt = c.get("tokens_per_s"), t.get("tokens_per_s")
    ratio = f"{ct / tt:.2f}x" if ct and tt else "n/a"
    say = lambda v, g: f"{v:.1f} tokens/s" if v else g.get("skipped", "no figure")
    print(f"generate batch {b}: cppo {say(ct, c)}, transformers {say(tt, t)}: cppo/transformers {ratio}")
PY
    return $status
}

stage3() {
    local status=0
    run step 300 "$BIN" bench step --device cuda --random-config "$CONFIG" "${STEP_SHAPE[@]}" || status=1
    if [ -n "${CPPO_TRAIN_TEST:-}" ] && [ -x "$CPPO_TRAIN_TEST" ]; then
        run trainer 120 "$CPPO_TRAIN_TEST" --test-threads 1 || status=1
    else
        echo "CPPO_TRAIN_TEST not set: the trainer test binary was not carried, so the trainer did not run on the GPU" | tee "$OUTDIR/trainer.txt"
    fi
    return $status
}

status=0
for s in "${stages[@]}"; do
    if ! "stage$s"; then
        status=1
        if [ "$s" = 1 ]; then
            echo "stage 1 failed: fix what it found before running the benches" | tee -a "$OUTDIR/selftest.txt"
            exit 1
        fi
    fi
done
echo "stages ${stages[*]}: $([ $status = 0 ] && echo passed || echo 'something failed, see above')"
exit $status
