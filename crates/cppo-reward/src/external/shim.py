"""cppo's Python reward worker: runs users' reward functions as TRL and verl call them.

Shipped inside the cppo binary and run as `python3 -c <this file> <specs>`; standard library only.
`<specs>` is a JSON list of {"name", "path", "function", "style"} ("trl" or "verl").

Protocol (JSON lines, the same for every reward worker, see the README):
  worker -> cppo, once at start: {"ready": true}, or {"error", "function", "traceback"} when a file does
                                  not load or lacks the function (and the worker exits);
  cppo -> worker, per batch:     {"function", "step", "prompts", "completions", "completion_ids", "columns"};
  worker -> cppo, per batch:     {"rewards": [number or null, ...]}, or {"error", "traceback"}.
"""
import asyncio
import importlib.util
import inspect
import json
import math
import os
import sys
import traceback


class Unfit(Exception):
    """A call that cannot be made as asked (a column the function needs is missing, ...)."""


class TrainerState:
    """What TRL's `trainer_state` argument offers reward functions that read the step."""

    def __init__(self, global_step):
        self.global_step = global_step


def load(index, spec):
    path, name = spec["path"], spec["function"]
    if not os.path.isfile(path):
        raise Unfit(f"no such file: {path}")
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        # Reward files import their neighbours, as they do when run as scripts.
        sys.path.insert(0, directory)
    module_spec = importlib.util.spec_from_file_location(f"cppo_rewards_{index}", path)
    if module_spec is None or module_spec.loader is None:
        raise Unfit(f"cannot load {path} as a Python module (is it a .py file?)")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not hasattr(module, name):
        defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        raise Unfit(f"{path} has no function `{name}` (it defines: {', '.join(defined) or 'nothing callable'})")
    function = getattr(module, name)
    if not callable(function):
        raise Unfit(f"`{name}` in {path} is a {type(function).__name__}, not a function")
    return function


def call(function, kwargs, loop):
    """Calls with the arguments the function takes (all of them when it has **kwargs); awaits a coroutine."""
    params = inspect.signature(function).parameters.values()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    missing = [p.name for p in params if p.kind in named and p.default is p.empty and p.name not in kwargs]
    if missing:
        given = ", ".join(sorted(kwargs)) or "none"
        raise Unfit(f"asks for `{missing[0]}`, which the dataset lacks (the arguments it can have: {given})")
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        kwargs = {k: v for k, v in kwargs.items() if any(p.name == k and p.kind in named for p in params)}
    result = function(**kwargs)
    if inspect.isawaitable(result):
        result = loop.run_until_complete(result)
    return result


def score_trl(function, request, loop):
    kwargs = dict(request["columns"])
    kwargs.update(prompts=request["prompts"], completions=request["completions"],
                  completion_ids=request["completion_ids"], trainer_state=TrainerState(request.get("step", 0)))
    result = call(function, kwargs, loop)
    if isinstance(result, (str, bytes, dict)) or not hasattr(result, "__iter__"):
        raise Unfit(f"returned {type(result).__name__}, not a list of rewards")
    return list(result)


def score_verl(function, request, loop):
    columns, completions = request["columns"], request["completions"]
    rewards = []
    for i, completion in enumerate(completions):
        row = {k: v[i] for k, v in columns.items()}
        reward_model = row.get("reward_model")
        if isinstance(reward_model, dict) and "ground_truth" in reward_model:
            truth = reward_model["ground_truth"]
        elif "ground_truth" in row:
            truth = row["ground_truth"]
        else:
            raise Unfit("asks for `ground_truth`, which the dataset lacks (verl keeps it in the column "
                        f"reward_model.ground_truth; columns: {', '.join(sorted(columns)) or 'none'})")
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        kwargs = {"data_source": row.get("data_source"), "solution_str": text, "ground_truth": truth,
                  "extra_info": row.get("extra_info")}
        value = call(function, kwargs, loop)
        if isinstance(value, dict):
            if "score" not in value:
                raise Unfit(f"returned a dict without a `score` key (keys: {', '.join(map(str, value))})")
            value = value["score"]
        rewards.append(value)
    return rewards


def encode(value):
    """A reward as JSON: None stays null; NaN and infinities, which JSON lacks, become their names so
    cppo can say which value was wrong; anything else that is not a number goes as text."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        return value if isinstance(value, str) else repr(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return repr(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return number


def main():
    # The protocol owns the real stdin and stdout: what the functions print goes to stderr, and what they
    # read is empty, so neither can corrupt a reply.
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)
    sys.stdout = sys.stderr

    def reply(obj):
        replies.write(json.dumps(obj) + "\n")
        replies.flush()

    functions = {}
    for index, spec in enumerate(json.loads(sys.argv[1])):
        try:
            functions[spec["name"]] = (load(index, spec), spec.get("style", "trl"))
        except Unfit as e:
            reply({"error": str(e), "function": spec["name"]})
            return 1
        except BaseException as e:
            reply({"error": f"{spec['path']} does not load: {type(e).__name__}: {e}", "function": spec["name"],
                   "traceback": traceback.format_exc()})
            return 1
    reply({"ready": True})
    loop = asyncio.new_event_loop()
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            function, style = functions[request["function"]]
            scorer = score_verl if style == "verl" else score_trl
            reply({"rewards": [encode(v) for v in scorer(function, request, loop)]})
        except Unfit as e:
            reply({"error": str(e)})
        except Exception as e:
            reply({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
