import sys
from pathlib import Path

# tests import their helpers (fake_nvml) by name
sys.path.insert(0, str(Path(__file__).parent))
