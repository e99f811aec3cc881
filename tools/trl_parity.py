"""Runs TRL's own GRPOTrainer._compute_loss on inputs cppo wrote and compares loss and gradient.

TRL's code runs unchanged: a GRPOTrainer is made without its __init__ (no model, no dataset) and given
the attributes _compute_loss reads; only the model's forward (_get_per_token_logps_and_entropies) is
replaced by cppo's fixed log-probs (a leaf tensor, whose .grad is dL/dlogp) and entropies. The rollout
correction's ratio is built inside TRL's _generate_and_score_completions, which needs a vLLM engine, so
that one step is written out below from TRL's lines (clamp / mask of exp(diff), per token or summed per
sequence) and handed to _compute_loss as inputs["importance_sampling_ratio"], where TRL applies it.

Usage: python tools/trl_parity.py CASES.json   (tools/trl_parity.sh makes the environment)
"""

import collections
import json
import math
import sys
import types

import torch
import trl
from trl import GRPOTrainer


class OneProcess:
    """The accelerator calls of _compute_loss, for a single process."""

    num_processes = 1
    sync_gradients = True

    def gather(self, x):
        return x

    def gather_for_metrics(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x

    def pad_across_processes(self, x, dim=0, pad_index=0):
        return x


def importance_sampling_ratio(c, trainer_logps, sampling, mask):
    """TRL's vLLM importance-sampling ratio (GRPOTrainer._generate_and_score_completions)."""
    diff = (trainer_logps - sampling) * mask
    if c["vllm_importance_sampling_mode"] in ("sequence_mask", "sequence_truncate"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    lo, hi = c["vllm_importance_sampling_clip_min"], c["vllm_importance_sampling_clip_max"]
    if c["vllm_importance_sampling_mode"] in ("sequence_truncate", "token_truncate"):
        return torch.clamp(ratio, min=lo, max=hi)
    lo = -math.inf if lo is None else lo
    hi = math.inf if hi is None else hi
    return ratio.masked_fill((ratio < lo) | (ratio > hi), value=0.0)


def trl_loss(case):
    c, k, w = case["trl"], case["rows"], case["width"]

    def t(key):
        return torch.tensor(case[key], dtype=torch.float32).view(k, w)

    logps = t("logprobs").clone().requires_grad_(True)
    entropy, mask = t("entropy"), t("mask")
    trainer = GRPOTrainer.__new__(GRPOTrainer)
    trainer.__dict__.update(
        args=types.SimpleNamespace(
            delta=c["delta"],
            use_bias_correction_kl=c["use_bias_correction_kl"],
            sapo_temperature_pos=c["sapo_temperature_pos"],
            sapo_temperature_neg=c["sapo_temperature_neg"],
            vespo_k_pos=c["vespo_k_pos"],
            vespo_lambda_pos=c["vespo_lambda_pos"],
            vespo_k_neg=c["vespo_k_neg"],
            vespo_lambda_neg=c["vespo_lambda_neg"],
            steps_per_generation=1,
        ),
        model=types.SimpleNamespace(training=True),
        accelerator=OneProcess(),
        loss_type=c["loss_type"],
        importance_sampling_level=c["importance_sampling_level"],
        epsilon_low=c["epsilon"],
        epsilon_high=c["epsilon_high"],
        beta=c["beta"],
        top_entropy_quantile=c["top_entropy_quantile"],
        off_policy_mask_threshold=c["off_policy_mask_threshold"],
        use_vllm=c["vllm_importance_sampling_correction"],
        vllm_importance_sampling_correction=c["vllm_importance_sampling_correction"],
        max_completion_length=c["max_completion_length"],
        current_gradient_accumulation_steps=1,
        _metrics={"train": collections.defaultdict(list), "eval": collections.defaultdict(list)},
        _entropy_bonus_enabled=False,
        aux_loss_enabled=False,
        use_adaptive_entropy=False,
    )
    trainer._get_per_token_logps_and_entropies = lambda *a, **kw: (logps, entropy, None)
    inputs = {
        "prompt_ids": torch.zeros((k, 1), dtype=torch.long),
        "prompt_mask": torch.ones((k, 1), dtype=torch.long),
        "completion_ids": torch.zeros((k, w), dtype=torch.long),
        "completion_mask": mask,
        "advantages": torch.tensor(case["advantages"], dtype=torch.float32),
        "ref_per_token_logps": t("reference"),
        "sampling_per_token_logps": t("sampling"),
        "num_items_in_batch": mask.sum(),
    }
    if case["old"] is not None:
        inputs["old_per_token_logps"] = t("old")
    if c["vllm_importance_sampling_correction"]:
        trainer_logps = t("old") if case["old"] is not None else logps.detach()
        inputs["importance_sampling_ratio"] = importance_sampling_ratio(c, trainer_logps, t("sampling"), mask)
    loss = trainer._compute_loss(None, inputs)
    loss.backward()
    return loss.item(), logps.grad.flatten().tolist()


def main():
    cases = json.load(open(sys.argv[1]))["cases"]
    print(f"TRL {trl.__version__}, PyTorch {torch.__version__}: {len(cases)} cases")
    print(f"{'case':32} {'cppo loss':>12} {'TRL loss':>12} {'max |dgrad|':>12}")
    bad = 0
    for case in cases:
        loss, grad = trl_loss(case)
        ours = case["cppo"]
        dgrad = max(abs(a - b) for a, b in zip(grad, ours["grad"]))
        scale = max(1.0, max(abs(g) for g in grad))
        ok = abs(loss - ours["loss"]) <= 1e-5 * max(1.0, abs(loss)) and dgrad <= 1e-5 * scale
        bad += not ok
        print(f"{case['name']:32} {ours['loss']:12.7f} {loss:12.7f} {dgrad:12.2e} {'ok' if ok else 'DIFFERS'}")
    print(f"{len(cases) - bad} of {len(cases)} cases agree within f32 noise")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
