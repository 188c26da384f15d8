#!/usr/bin/env bash
# Installs the benchmark's peers (PyTorch SDPA and FlexAttention) into .venv-peers/, on request only:
# the build and the tests never need it. Safe to run again (skips what is there).
#   bash scripts/setup_peers.sh      # torch (the default PyPI wheel, ~3 GB with its CUDA libraries) + numpy
# torch.compile on the CPU also needs a C++ compiler (g++, from scripts/setup.sh) and the Python headers
# of the interpreter the venv is made from (pyenv and python.org builds ship them; on Debian: python3-dev).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv-peers"
python=${PYTHON:-python3}

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
if ! "$venv/bin/python" -c 'import torch, numpy' 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check torch numpy
fi
include=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$include/Python.h" ] || echo "setup_peers: warning: no Python.h in $include; torch.compile (FlexAttention) needs it" >&2
command -v g++ >/dev/null || echo "setup_peers: warning: no g++; torch.compile (FlexAttention) needs a C++ compiler" >&2
echo "setup_peers: ok, torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') in $venv"
