"""The held-out programs share the corpus' helpers (bench/gpu/corpus_multi/_multi.py): importing this puts them on the path."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus_multi"))
