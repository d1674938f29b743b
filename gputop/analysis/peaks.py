"""Theoretical peaks of one GPU, computed from its static NVML facts (``read_static()`` output).

Pure function, no NVML. The arithmetic uses what NVML reports (bus width, max clocks, core and SM
counts, PCIe link); the tables below hold only what NVML has no answer for: per-SM tensor rates and
FP64/FP16 ratios by compute capability, and the clock NVIDIA's datasheets quote tensor figures at.
DRAM comes from NVML alone: on a real H200 NVML reports a 6016-bit bus and a 3201 MHz max memory
clock, 4.81 TB/s, within 0.3% of the 4.8 TB/s datasheet (recorded in tests/data/static/).

Sources (cited by the short names used in the comments below):
  [GA100] NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), Table 1 / A100 datasheet.
  [GA102] NVIDIA Ampere GA102 GPU Architecture whitepaper (RTX 3090), Appendix A.
  [AD102] NVIDIA Ada GPU Architecture whitepaper v2.x (RTX 4090), Appendix A, Table 2.
  [GH100] NVIDIA H100 Tensor Core GPU Architecture whitepaper, Table "H100 SXM5 / PCIe", and the
          H100 / H200 product datasheets (dense figures are half the "with sparsity" ones).
  [GV100] NVIDIA Tesla V100 GPU Architecture whitepaper; [TU102] NVIDIA Turing whitepaper, App. A.
  [PG]    CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table.
"""

from __future__ import annotations

from gputop.analysis.links import PCIE_ENCODING, PCIE_GT_PER_S, nvlink_peak  # noqa: F401  (PCIE_*: peaks' public names too)
from gputop.telemetry.static import FP32_LANES_PER_SM

# Dense tensor-core FLOP per SM per clock at full rate (FP16/BF16/FP8 with FP32 accumulate on data-centre
# and workstation parts; INT8 counted as ops). None: the architecture has no such tensor path.
#   Volta 7.0 [GV100]: 8 TCs x 64 FMA = 1024 (V100 SXM2: 80 SMs x 1024 x 1530 MHz = 125 TF); FP16 only.
#   Turing 7.5 [TU102]: 8 TCs x 64 FMA = 1024 FP16, INT8 2x (T4: 40 x 1024 x 1590 MHz = 65 TF, 130 TOPS).
#   Ampere 8.0 [GA100]: 4 TCs x 256 FMA = 2048 BF16/FP16; TF32 half; INT8 2x (A100: 108 x 2048 x
#       1410 MHz = 312 TF BF16, 156 TF TF32, 624 TOPS INT8).
#   Ampere 8.6 [GA102]: 1024 BF16/FP16, TF32 half, INT8 2x (RTX A6000: 84 x 1024 x 1800 MHz = 154.8 TF).
#   Ada 8.9 [AD102]: 1024 BF16/FP16, TF32 half, FP8 and INT8 2x (L4: 58 x 2048 x 2040 MHz = 242 TF FP8).
#   Hopper 9.0 [GH100]: 4096 BF16/FP16, TF32 half, FP8 and INT8 2x (H100 SXM: 132 x 4096 x 1830 MHz
#       = 989.4 TF BF16, 494.7 TF TF32, 1979 TF FP8, 1979 TOPS INT8).
TENSOR_FLOP_PER_SM_CLK = {
    (7, 0): {"tf32": None, "bf16": None, "fp16": 1024, "fp8": None, "int8": None},
    (7, 5): {"tf32": None, "bf16": None, "fp16": 1024, "fp8": None, "int8": 2048},
    (8, 0): {"tf32": 1024, "bf16": 2048, "fp16": 2048, "fp8": None, "int8": 4096},
    (8, 6): {"tf32": 512, "bf16": 1024, "fp16": 1024, "fp8": None, "int8": 2048},
    (8, 9): {"tf32": 512, "bf16": 1024, "fp16": 1024, "fp8": 2048, "int8": 2048},
    (9, 0): {"tf32": 2048, "bf16": 4096, "fp16": 4096, "fp8": 8192, "int8": 8192},
}

# GeForce parts of these generations run FP32-accumulate tensor math (TF32, BF16, FP16 and FP8 with an
# FP32 accumulator, which is what cuBLAS/PyTorch use) at half the rate above; INT8 (INT32 accumulate)
# is not halved. RTX 4090 [AD102]: BF16 165.2 TF, FP16 165.2 TF (330.3 with FP16 accumulate), TF32
# 82.6 TF, FP8 330.3 TF (660.6 with FP16 accumulate), INT8 660.6 TOPS at 2520 MHz, 128 SMs.
# RTX 3090 [GA102] and RTX 2080 Ti [TU102] show the same halving.
GEFORCE_HALF_RATE_CC = {(7, 5), (8, 6), (8, 9)}

# FP64 (vector, not FP64 tensor/DMMA) and non-tensor FP16 throughput as a fraction of FP32, by compute
# capability. FP64 from [PG]; FP16 from the whitepapers' "Peak FP16 TFLOPS (non-Tensor)" rows:
# V100 31.4 vs 15.7 (2x), RTX 2080 Ti 26.9 vs 13.4 (2x), A100 78 vs 19.5 (4x), RTX 3090 35.6 vs 35.6
# (1x), RTX 4090 82.6 vs 82.6 (1x), H100 SXM 133.8 vs 66.9 (2x).
FP64_RATIO = {
    (6, 0): 1 / 2, (6, 1): 1 / 32, (7, 0): 1 / 2, (7, 5): 1 / 32, (8, 0): 1 / 2, (8, 6): 1 / 64,
    (8, 9): 1 / 64, (9, 0): 1 / 2, (10, 0): 1 / 2, (12, 0): 1 / 64,
}
FP16_RATIO = {
    (6, 0): 2.0, (6, 1): 1 / 64, (7, 0): 2.0, (7, 5): 2.0, (8, 0): 4.0, (8, 6): 1.0, (8, 9): 1.0,
    (9, 0): 2.0,
}

# Clock (MHz) that NVIDIA's datasheets quote tensor figures at, by exact NVML product name, where it
# differs from NVML's max SM clock. Elsewhere the tensor figures use NVML's max SM clock.
#   H100 SXM / H200 SXM: 989.4 TF BF16 dense = 132 x 4096 x 1830 MHz, while FP32 67 TF uses 1980 MHz.
#   H100 PCIe: 756 TF BF16 dense = 114 x 4096 x 1620 MHz (FP32 51 TF at 1755 MHz).
#   H100 NVL / H200 NVL: 835.5 TF BF16 dense (1671 sparse) = 132 x 4096 x 1545 MHz.
#   RTX 4090: whitepaper figures at the 2520 MHz boost clock; NVML max SM clock is the top of the
#       boost table (about 3105 MHz), which FP32 below still uses as the ceiling.
TENSOR_SPEC_CLOCK_MHZ = {
    "NVIDIA H100 80GB HBM3": 1830,
    "NVIDIA H200": 1830,
    "NVIDIA H100 PCIe": 1620,
    "NVIDIA H100 NVL": 1545,
    "NVIDIA H200 NVL": 1545,
    "NVIDIA GeForce RTX 4090": 2520,
}

TENSOR_KEYS = ("tf32", "bf16", "fp16", "fp8", "int8")

# The device facts the peaks need, by exact NVML product name, as NVML reports them on that model: used only for
# a source that reports none of them (a dcgm-exporter's labels carry the model name alone). H200: read by NVML on
# a real H200 (tests/data/static/h200_recorded.json); H100 SXM and A100 SXM4 80GB: [GH100] / [GA100] (SMs, FP32
# lanes, boost clocks, HBM bus and clock); RTX 4090: [AD102] and NVML on a real card.
MODEL_FACTS = {
    "NVIDIA H200": {"architecture": "Hopper", "compute_capability": [9, 0], "sm_count": 132, "cuda_cores": 16896,
                    "max_sm_clock_mhz": 1980, "max_mem_clock_mhz": 3201, "memory_bus_width_bits": 6016,
                    "pcie_max_gen": 5, "pcie_max_width": 16},
    "NVIDIA H100 80GB HBM3": {"architecture": "Hopper", "compute_capability": [9, 0], "sm_count": 132,
                              "cuda_cores": 16896, "max_sm_clock_mhz": 1980, "max_mem_clock_mhz": 2619,
                              "memory_bus_width_bits": 5120, "pcie_max_gen": 5, "pcie_max_width": 16},
    "NVIDIA A100-SXM4-80GB": {"architecture": "Ampere", "compute_capability": [8, 0], "sm_count": 108,
                              "cuda_cores": 6912, "max_sm_clock_mhz": 1410, "max_mem_clock_mhz": 1593,
                              "memory_bus_width_bits": 5120, "pcie_max_gen": 4, "pcie_max_width": 16},
    "NVIDIA GeForce RTX 4090": {"architecture": "Ada Lovelace", "compute_capability": [8, 9], "sm_count": 128,
                                "cuda_cores": 16384, "max_sm_clock_mhz": 3105, "max_mem_clock_mhz": 10501,
                                "memory_bus_width_bits": 384, "pcie_max_gen": 4, "pcie_max_width": 16},
}
DEVICE_FACTS = tuple(MODEL_FACTS["NVIDIA H200"])


def model_facts(static: dict) -> dict:
    """The facts :data:`MODEL_FACTS` holds for ``static``'s model, where the source reported none of them
    ({} when it reported any, or the model is not on file): what a dcgm-exporter's ``modelName`` gives."""
    if any(static.get(k) is not None for k in DEVICE_FACTS):
        return {}
    return dict(MODEL_FACTS.get(static.get("name") or "", {}))


def with_model_facts(static: dict) -> dict:
    """``static`` as people are shown it: the source's facts, and where it reported none of them (a dcgm-exporter)
    :func:`model_facts` (its model's published figures), ``published_facts`` naming those it took ([]: none). The
    one answer of ``--once``'s text and the TUI; documents keep what the source said (and the peaks' notes say
    where their facts came from)."""
    known = model_facts(static)
    return {**static, **known, "published_facts": sorted(known)}


def compute_peaks(static: dict) -> dict:
    """Theoretical peaks (plain floats, None where a needed fact is missing) and notes saying why."""
    notes: list[str] = []
    name = static.get("name") or ""
    known = model_facts(static)
    if known:
        static = {**static, **known}
        notes.append(f"device facts from the {name}'s published figures: the source reports none of them")
    cc = _cc(static.get("compute_capability"))
    sm_clock = _pos(static.get("max_sm_clock_mhz"))
    sm_count, cores = _sm_and_cores(static, cc, notes)

    if cc and sm_clock:
        notes.append(f"FP32/FP64/FP16 at NVML's max SM clock {sm_clock:.0f} MHz; FP64/FP16 ratios and per-SM "
                     f"tensor rates from the compute capability {cc[0]}.{cc[1]} table (NVML does not report them)")
    dram = _dram(static, name, notes)
    fp32 = cores * 2 * sm_clock * 1e6 if cores and sm_clock else None
    if fp32 is None:
        notes.append("FP32 peak n/a: needs CUDA core count and max SM clock")
    fp64 = _ratio(fp32, FP64_RATIO, cc, "FP64", notes)
    fp16 = _ratio(fp32, FP16_RATIO, cc, "FP16 (non-tensor)", notes)
    tensor_clock, tensor_source = _tensor_clock(name, sm_clock, notes)
    tensor = _tensor(cc, sm_count, tensor_clock, name, notes)
    nvlink = nvlink_peak(static)

    return {
        "dram_bytes_per_s": dram,
        "fp32_flops": fp32,
        "fp64_flops": fp64,
        "fp16_flops": fp16,
        "tensor_dense_flops": tensor,
        "tensor_clock_mhz": float(tensor_clock) if tensor_clock else None,
        "tensor_clock_source": tensor_source,
        "pcie_bytes_per_s_per_dir": _pcie(static, notes),
        "nvlink_bytes_per_s_per_dir": nvlink[0],
        "nvlink_peak_source": nvlink[1],
        "ridge_fp32_flop_per_byte": fp32 / dram if fp32 and dram else None,
        "notes": notes,
    }


def _pos(v) -> float | None:
    """A usable positive number, else None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def _cc(v) -> tuple[int, int] | None:
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return (v[0], v[1])
    return None


def _sm_and_cores(static: dict, cc, notes: list[str]) -> tuple[float | None, float | None]:
    sm_count, cores = _pos(static.get("sm_count")), _pos(static.get("cuda_cores"))
    lanes = FP32_LANES_PER_SM.get(cc) if cc else None
    if cores is None and sm_count and lanes:
        cores = sm_count * lanes
        notes.append(f"CUDA cores not reported; {int(sm_count)} SMs x {lanes} FP32 lanes per SM (cc {cc[0]}.{cc[1]})")
    if sm_count is None and cores and lanes:
        sm_count = cores // lanes
        notes.append(f"SM count not reported; {int(cores)} CUDA cores / {lanes} FP32 lanes per SM")
    return sm_count, cores


def _dram(static: dict, name: str, notes: list[str]) -> float | None:
    bus, mem_clock = _pos(static.get("memory_bus_width_bits")), _pos(static.get("max_mem_clock_mhz"))
    if not bus or not mem_clock:
        notes.append("DRAM peak n/a: needs memory bus width and max memory clock")
        return None
    return bus / 8 * mem_clock * 1e6 * 2


def _ratio(fp32, table: dict, cc, what: str, notes: list[str]) -> float | None:
    if fp32 is None:
        return None
    if cc not in table:
        notes.append(f"{what} peak n/a: no rate on file for compute capability "
                     f"{'.'.join(map(str, cc)) if cc else 'n/a'}")
        return None
    return fp32 * table[cc]


def _tensor_clock(name: str, sm_clock, notes: list[str]) -> tuple[float | None, str]:
    spec = TENSOR_SPEC_CLOCK_MHZ.get(name)
    if spec and (sm_clock is None or spec < sm_clock):
        notes.append(f"tensor peaks at the {name} datasheet tensor clock {spec} MHz"
                     + (f", not NVML's max SM clock {sm_clock:.0f} MHz" if sm_clock else ""))
        return float(spec), f"datasheet tensor clock for {name}"
    if sm_clock is None:
        return None, "n/a (no max SM clock)"
    return sm_clock, "NVML max SM clock (no datasheet tensor clock on file for this product)"


def _tensor(cc, sm_count, clock, name: str, notes: list[str]) -> dict:
    rates = TENSOR_FLOP_PER_SM_CLK.get(cc) if cc else None
    if rates is None:
        notes.append(f"tensor peaks n/a: no per-SM tensor rate on file for compute capability "
                     f"{'.'.join(map(str, cc)) if cc else 'n/a'}")
        return {k: None for k in TENSOR_KEYS}
    if not sm_count or not clock:
        notes.append("tensor peaks n/a: needs SM count and a clock")
        return {k: None for k in TENSOR_KEYS}
    half = cc in GEFORCE_HALF_RATE_CC and "GeForce" in name
    if half:
        notes.append("GeForce: TF32/BF16/FP16/FP8 tensor peaks are with FP32 accumulate (half the FP16-accumulate "
                     "rate); INT8 is full rate")
    out = {}
    for k in TENSOR_KEYS:
        r = rates[k]
        if r is not None and half and k != "int8":
            r = r / 2
        out[k] = float(sm_count * r * clock * 1e6) if r is not None else None
    return out


def _pcie(static: dict, notes: list[str]) -> float | None:
    max_gen, cur_gen = static.get("pcie_max_gen"), static.get("pcie_cur_gen")
    width = _pos(static.get("pcie_cur_width")) or _pos(static.get("pcie_max_width"))
    # A link trained below its max gen is either idling (GPUs drop to gen 1 to save power, and static facts
    # are read at start-up, usually idle) or held back by the slot (then it stays there under load).
    gen = cur_gen if cur_gen in PCIE_GT_PER_S else max_gen
    if cur_gen == 1 and max_gen in PCIE_GT_PER_S and max_gen > 1:
        gen = max_gen
        notes.append(f"PCIe link is gen 1 now (idle power saving); peak uses the max gen {max_gen}")
    elif cur_gen in PCIE_GT_PER_S and max_gen in PCIE_GT_PER_S and cur_gen < max_gen:
        notes.append(f"PCIe link trained at gen {cur_gen} below the GPU's gen {max_gen} (slot or riser limit)")
    if gen not in PCIE_GT_PER_S or not width:
        notes.append("PCIe peak n/a: needs link generation and width")
        return None
    return PCIE_GT_PER_S[gen] * 1e9 * PCIE_ENCODING[gen] / 8 * width
