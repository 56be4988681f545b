#!/usr/bin/env bash
# The worked example of docs/real-caches.md, end to end: capture (the stand-in model), profile,
# sweeps on the capture and on the profile, recommend, calibrate, and a sweep scoring the scales.
# Usage: run.sh KVTUNE WORKDIR   (WORKDIR is created; its previous contents are replaced)
# tests/python/test_worked_example.py runs it in CI and checks what each step wrote.
set -euo pipefail
kvtune="$(realpath "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
work="$2"
rm -rf "$work"
mkdir -p "$work"
cp "$here"/sweep-*.toml "$here"/scenario-*.toml "$work"/
cd "$work"
step() { printf '\n$ %s\n' "$*"; "$@"; }

step /usr/bin/python3 -B "$here/../../../tests/python/standin_capture.py" --queries 16 \
  --prompts "$here"/prompts/letter.txt "$here"/prompts/notes.txt "$here"/prompts/report.txt --out capture
step "$kvtune" profile capture --out standin.toml
step "$kvtune" sweep sweep-capture.toml --out sweep-capture
step "$kvtune" sweep sweep-profile.toml --out sweep-profile
step "$kvtune" recommend --cache capture --ctx 32768 --max-rel-err 0.05 --runtime vllm --runtime llama-cpp --out recommend
step "$kvtune" calibrate capture --out scales
step "$kvtune" simulate scenario-scales.toml
