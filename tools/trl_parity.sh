#!/usr/bin/env bash
# Parity of cppo's loss with TRL's: runs TRL's own GRPOTrainer._compute_loss on the inputs cppo wrote
# (tests/trl_parity.rs writes them and calls this script) and compares loss and gradient.
#   bash tools/trl_parity.sh CASES.json
# The virtual environment (TRL, CPU PyTorch; PyPI's PyTorch where the CPU index is unreachable) is made
# once at $CPPO_TRL_VENV (default: target/trl-venv).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${CPPO_TRL_VENV:-$here/../target/trl-venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import trl, torch' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q --index-url https://download.pytorch.org/whl/cpu torch \
    || "$venv/bin/pip" install -q torch
  "$venv/bin/pip" install -q trl numpy
fi
exec "$venv/bin/python" "$here/trl_parity.py" "$@"
