#!/usr/bin/env bash
# An earlier revision's tree at build/old, for timings against it in the same device call (carry build/old):
#   bash scripts/old_tree.sh REV;  then on the device  (cd build/old && PYTHONPATH=$PWD python3 -m tiles ...)
# Its tiles/backends and tiles/kernels link to the tree's own folders, as the installed package maps them.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf build/old && mkdir -p build/old
git archive "${1:?revision}" | tar -x -C build/old
ln -sfn ../backends build/old/tiles/backends
ln -sfn ../kernels build/old/tiles/kernels
git rev-parse --short "$1" > build/old/REVISION
du -sh build/old
