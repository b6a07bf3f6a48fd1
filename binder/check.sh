#!/usr/bin/env bash
# Builds the environment the way repo2docker does from this folder alone (no Docker): apt.txt
# packages, a fresh virtual environment of runtime.txt's Python, requirements.txt installed
# from the repository root, postBuild run with a private HOME; then runs every notebook in it
# under `start`, with nbval comparing the committed outputs: two notebooks at a time, as
# tests/test_notebooks.py runs them (pytest-xdist; notebooks/conftest.py gives each worker its
# own MINITF_STATE_DIR and TMPDIR subfolder).  Called by .ci/run.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
want="$(sed -n 's/^python-\([0-9.]*\)$/\1/p' "$repo/binder/runtime.txt")"
have="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[ "$want" = "$have" ] || { echo "binder/check.sh: runtime.txt wants Python $want, python3 is $have" >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then
    missing=$(grep -v '^#' "$repo/binder/apt.txt" | while read -r p; do
        [ -n "$p" ] && ! dpkg -s "$p" >/dev/null 2>&1 && echo "$p"; done || true)
    if [ -n "$missing" ]; then
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
    fi
fi
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
(cd "$repo" && "$work/venv/bin/python" -m pip install -q -r binder/requirements.txt)
HOME="$work/home" PATH="$work/venv/bin:$PATH" bash "$repo/binder/postBuild"
grep -q "00_start_here.ipynb" "$work/home/.jupyter/jupyter_server_config.py"
# only the test runner is added on top of exactly what Binder would have
"$work/venv/bin/python" -m pip install -q "nbval>=0.11,<1" "pytest>=8,<10" "pytest-xdist>=3.6,<4"
cd "$repo"
# --rootdir is the repository: node ids must stay notebooks/NN_x.ipynb::Cell k (a root outside it
# gives every notebook the same ids, and xdist then runs the wrong cells); -c /dev/null keeps
# pyproject.toml's pytest settings out, so only Binder's packages and these options count
HOME="$work/home" PATH="$work/venv/bin:$PATH" MINITF_STATE_DIR="$work/state" \
    NUMBA_ENABLE_CUDASIM=1 TMPDIR="$work" \
    bash binder/start python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
    --nbval-current-env \
    --nbval notebooks --nbval-sanitize-with notebooks/nbval_sanitize.cfg \
    --rootdir "$repo" -c /dev/null 2>&1 | tail -40
