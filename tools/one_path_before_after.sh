#!/usr/bin/env bash
# Issue 31's held figures, before and after, side by side on one machine:
#   1. the quickstart config at f32 products, f32 rollout weights and temperature 1 for 5 steps:
#      metrics.jsonl of the two builds equal within 1e-6 relative, timings aside;
#   2. `cppo bench step` and `cppo bench generate`, the two builds alternating (A B A B) so that a
#      change in the machine's load hits both.
# Usage: tools/one_path_before_after.sh BEFORE_BIN AFTER_BIN [OUT_DIR] [--metrics-only]
set -euo pipefail
before=$1; after=$2; out=${3:-/tmp/one-path}; mode=${4:-all}
mkdir -p "$out"
grep -m1 "model name" /proc/cpuinfo | sed 's/^/cpu: /'
grep -o -m1 'avx512_bf16\|avx512f\|avx2' /proc/cpuinfo | head -1 | sed 's/^/widest: /'
set_args=(--quiet --set train.steps=5 --set train.eval_every=0 --set optim.matmul_precision='"f32"'
          --set generation.weights='"f32"' --set generation.temperature=1.0)
for which in before after; do
  bin=${!which}
  "$bin" train configs/quickstart.toml "${set_args[@]}" --set output_dir="\"$out/qs-$which\"" > "$out/qs-$which.log" 2>&1
done
python3 - "$out/qs-before/metrics.jsonl" "$out/qs-after/metrics.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 5, (len(a), len(b))
def leaves(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if k in ("time", "seconds") or k.endswith("_seconds") or k.endswith("_per_s"):
                continue
            yield from leaves(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, x
worst, n = 0.0, 0
for s, (x, y) in enumerate(zip(a, b)):
    lx, ly = dict(leaves(x)), dict(leaves(y))
    assert lx.keys() == ly.keys(), set(lx) ^ set(ly)
    for k in lx:
        u, v = lx[k], ly[k]
        n += 1
        if isinstance(u, (int, float)) and isinstance(v, (int, float)) and not isinstance(u, bool):
            rel = abs(u - v) / max(abs(u), abs(v), 1e-30)
            if rel > worst:
                worst, where = rel, f"step {s+1}{k}: {u} vs {v}"
        else:
            assert u == v, f"step {s+1}{k}: {u!r} vs {v!r}"
print(f"quickstart metrics: {n} values over 5 steps, largest relative difference {worst:.3g}" + (f" ({where})" if worst else ""))
sys.exit(0 if worst <= 1e-6 else 1)
PY
[ "$mode" = "--metrics-only" ] && exit 0
for round in $(seq 1 "${ROUNDS:-2}"); do
  for which in before after; do
    bin=${!which}
    "$bin" bench step --repeats 3 > "$out/step-$which-$round.md" 2>&1
    "$bin" bench generate > "$out/generate-$which-$round.md" 2>&1
  done
done
echo "bench outputs in $out (step-{before,after}-{1,2}.md, generate-...)"
