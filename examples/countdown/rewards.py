"""Countdown's rewards, written for TRL's GRPOTrainer (`reward_funcs=[countdown_format, countdown_exact]`)
and used by cppo unchanged. TinyZero scores 0.1 for the format and 1 for a right equation.
`countdown_equation` is the reward of the short prompt (`generate.py --style short`): the bare
equation on the completion's first line.
"""
import ast
import re

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _answer(completion):
    # Conversational datasets give each completion as a list of messages.
    text = completion if isinstance(completion, str) else completion[-1]["content"]
    found = ANSWER.findall(text)
    return found[-1].strip() if found else None


def _value(node):
    """The value of an expression of numbers, parentheses and + - * / only; None for anything else."""
    if isinstance(node, ast.Expression):
        return _value(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        a, b = _value(node.left), _value(node.right)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        return a / b if b != 0 else None
    return None


def _exact(equation, target, nums):
    if equation is None or len(equation) > 200:
        return False
    equation = equation.split("=")[0]
    used = sorted(int(n) for n in re.findall(r"\d+", equation))
    if used != sorted(nums):
        return False
    try:
        value = _value(ast.parse(equation, mode="eval"))
    except (SyntaxError, ValueError, RecursionError):
        return False
    return value is not None and abs(value - target) < 1e-5


def countdown_format(completions, **kwargs):
    """1 when the completion ends its reasoning with an <answer>...</answer>."""
    return [float(_answer(c) is not None) for c in completions]


def countdown_exact(completions, target, nums, **kwargs):
    """1 when the answer uses each given number once and equals the target."""
    return [float(_exact(_answer(c), t, n)) for c, t, n in zip(completions, target, nums)]


def _first_line(completion):
    text = completion if isinstance(completion, str) else completion[-1]["content"]
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return None


def countdown_equation(completions, target, nums, **kwargs):
    """1 when the completion's first line is an equation (`47 + 5` or `47 + 5 = 52`) that uses each
    given number once and equals the target; no tags needed."""
    return [float(_exact(_first_line(c), t, n)) for c, t, n in zip(completions, target, nums)]
