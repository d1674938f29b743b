#!/usr/bin/env bash
# A shell script that starts two Python processes, one a GPU (not a Python launcher): each runs single.py's plain
# loop and writes its truth (the first TRUTH, the second TRUTH with .rank1).  bash two_pythons.sh SECONDS TRUTH
# The GPUs are the first two of those it is given (CUDA_VISIBLE_DEVICES=2,3: 2 and 3; unset: 0 and 1): on
# 2026-11-27 it set 0 and 1 itself and ran on GPUs 0-1 of a 4-GPU machine while the run had 2-3.
D=$(dirname "$0")
IFS=, read -r G0 G1 _ <<< "${CUDA_VISIBLE_DEVICES:-0,1}"
G1=${G1:-$G0}  # one GPU: both on it
CUDA_VISIBLE_DEVICES=$G0 python3 "$D/single.py" --shape plain --seconds "$1" --truth "$2" &
CUDA_VISIBLE_DEVICES=$G1 python3 "$D/single.py" --shape plain --seconds "$1" --truth "${2%.json}.rank1.json" &
wait
