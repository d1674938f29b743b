#!/usr/bin/env bash
# A shell script that starts two Python processes, one a GPU (not a Python launcher): each runs single.py's plain
# loop; the first writes its truth.  bash two_pythons.sh SECONDS TRUTH
D=$(dirname "$0")
CUDA_VISIBLE_DEVICES=0 python3 "$D/single.py" --shape plain --seconds "$1" --truth "$2" &
CUDA_VISIBLE_DEVICES=1 python3 "$D/single.py" --shape plain --seconds "$1" &
wait
