"""Countdown rows (TinyZero's task): reach a target from the given numbers with + - * /, each number
used once. Every row is solvable: its target is the value of a random expression over its numbers.

    python3 examples/countdown/generate.py --out examples/countdown/data --seed 0

writes train.jsonl and test.jsonl in TRL's standard format: `prompt`, plus the columns `target`,
`nums` and `solution` (one equation that works; the model never sees it) that the reward reads.
Standard library only; the same seed gives the same files.
"""
import argparse
import json
import os
import random

PROMPT = ("Using the numbers {nums}, create an equation that equals {target}. You can use basic arithmetic "
          "operations (+, -, *, /) and each number can only be used once. Show your work in <think> </think> "
          "tags. And return the final answer in <answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>.")


def draw(rng, count, low, high, max_target):
    """Numbers and an expression over all of them whose value is a whole number in 1..max_target."""
    while True:
        nums = [rng.randint(low, high) for _ in range(count)]
        terms = [str(n) for n in rng.sample(nums, len(nums))]
        expr = terms[0]
        for term in terms[1:]:
            op = rng.choice("+-*/")
            expr = f"({expr} {op} {term})" if op in "+-" and rng.random() < 0.5 else f"{expr} {op} {term}"
        try:
            value = eval(expr, {"__builtins__": {}})
        except ZeroDivisionError:
            continue
        if value == int(value) and 1 <= value <= max_target:
            return nums, int(value), expr


def rows(rng, n, seen, args):
    out = []
    while len(out) < n:
        nums, target, solution = draw(rng, args.numbers, args.low, args.high, args.max_target)
        key = (tuple(sorted(nums)), target)
        if key in seen:
            continue
        seen.add(key)
        out.append({"prompt": PROMPT.format(nums=nums, target=target), "target": target, "nums": nums, "solution": solution})
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
