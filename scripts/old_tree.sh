#!/usr/bin/env bash
# An earlier revision's tree at build/old (or DIR), for timings against it in the same device call (carry it):
#   bash scripts/old_tree.sh REV [DIR];  then on the device  (cd build/old && PYTHONPATH=$PWD python3 -m tiles ...)
# Its tiles/backends and tiles/kernels link to the tree's own folders, as the installed package maps them.
set -euo pipefail
cd "$(dirname "$0")/.."
d=${2:-build/old}
rm -rf "$d" && mkdir -p "$d"
git archive "${1:?revision}" | tar -x -C "$d"
ln -sfn ../backends "$d/tiles/backends"
ln -sfn ../kernels "$d/tiles/kernels"
git rev-parse --short "$1" > "$d/REVISION"
du -sh "$d"
