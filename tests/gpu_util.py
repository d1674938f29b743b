"""What the GPU-marked tests ask of the machine before they run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys


def torch_cuda() -> bool:
    """torch is installed and sees a CUDA device (asked in a child: importing torch here is slow)."""
    if importlib.util.find_spec("torch") is None:
        return False
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                       capture_output=True, text=True, timeout=120)
    return r.stdout.strip() == "True"
