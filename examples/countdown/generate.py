"""Countdown rows (TinyZero's task): reach a target from the given numbers with + - * /, each number
used once. Every row is solvable: its target is the value of a random expression over its numbers.

    python3 examples/countdown/generate.py --out examples/countdown/data --seed 0

writes train.jsonl and test.jsonl in TRL's standard format: `prompt`, plus the columns `target`,
`nums` and `solution` (one equation that works; the model never sees it) that the reward reads.
Standard library only; the same seed gives the same files.

`--style tinyzero` (the default) asks, as TinyZero does, for <think> reasoning and an <answer> tag;
`--style short` asks for the bare equation, which a model too small to follow the tags (SmolLM2-135M)
can still be rewarded for (`rewards.countdown_equation`).
"""
import argparse
import json
import os
import random

PROMPTS = {
    "tinyzero": ("Using the numbers {nums}, create an equation that equals {target}. You can use basic arithmetic "
                 "operations (+, -, *, /) and each number can only be used once. Show your work in <think> </think> "
                 "tags. And return the final answer in <answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>."),
    "short": "Using the numbers {listed} once each, write an equation with + - * or / that equals {target}. "
             "Answer with just the equation.",
}

# Draws in a row that find no new row before the generator gives up: the requested rows do not exist.
PATIENCE = 100_000


def listed(nums):
    words = [str(n) for n in nums]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def draw(rng, count, low, high, max_target):
    """Numbers and an expression over all of them whose value is a whole number in 1..max_target. The
    operators are drawn first, each uniformly, and then numbers until they fit: drawing numbers first
    and rejecting would leave mostly sums (a random product or quotient rarely fits)."""
    while True:
        ops = [rng.choice("+-*/") for _ in range(count - 1)]
        groups = [rng.random() < 0.5 for _ in ops]
        for _ in range(1000):
            nums = [rng.randint(low, high) for _ in range(count)]
            expr = str(nums[0])
            for op, group, n in zip(ops, groups, nums[1:]):
                expr = f"({expr} {op} {n})" if op in "+-" and group else f"{expr} {op} {n}"
            try:
                value = eval(expr, {"__builtins__": {}})
            except ZeroDivisionError:
                continue
            if value == int(value) and 1 <= value <= max_target:
                # Listed in a random order, so the equation's order is part of the task.
                return rng.sample(nums, len(nums)), int(value), expr


def rows(rng, n, seen, args):
    out = []
    misses = 0
    while len(out) < n:
        nums, target, solution = draw(rng, args.numbers, args.low, args.high, args.max_target)
        key = (tuple(sorted(nums)), target)
        if key in seen:
            misses += 1
            if misses >= PATIENCE:
                raise SystemExit(f"generate.py: found only {len(seen)} distinct rows of {args.numbers} numbers in "
                                 f"{args.low}..{args.high} with targets up to {args.max_target}; ask for fewer rows "
                                 f"(--train, --test) or widen --high / --max-target")
            continue
        misses = 0
        seen.add(key)
        prompt = PROMPTS[args.style].format(nums=nums, listed=listed(nums), target=target)
        out.append({"prompt": prompt, "target": target, "nums": nums, "solution": solution})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="examples/countdown/data")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--test", type=int, default=200)
    ap.add_argument("--numbers", type=int, default=3, help="numbers per row (TinyZero uses 3 or 4)")
    ap.add_argument("--low", type=int, default=1)
    ap.add_argument("--high", type=int, default=20)
    ap.add_argument("--max-target", type=int, default=100)
    ap.add_argument("--style", choices=sorted(PROMPTS), default="tinyzero",
                    help="tinyzero: <think> and <answer> tags; short: just the equation (for small models)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    seen = set()
    # Test rows first, so the held-out set stays the same whatever the size of the training set.
    test = rows(rng, args.test, seen, args)
    train = rows(rng, args.train, seen, args)
    os.makedirs(args.out, exist_ok=True)
    for name, split in (("train", train), ("test", test)):
        with open(os.path.join(args.out, f"{name}.jsonl"), "w") as f:
            for row in split:
                f.write(json.dumps(row) + "\n")
    print(f"wrote {len(train)} training and {len(test)} held-out rows to {args.out}")


if __name__ == "__main__":
    main()
