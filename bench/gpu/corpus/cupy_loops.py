"""cuBLAS and cuFFT through CuPy: a loop of one library call.

    python bench/gpu/corpus/cupy_loops.py --op gemm|fft [--seconds 10] [--truth FILE]

Third-party code: CuPy's matmul (cuBLAS, fp16 8192^2: tensor cores, compute-bound by construction) and
cupy.fft.fft (cuFFT on 2^27 complex64 values: about 5 flops per byte moved, well under the H100/H200
ridge point: memory-bound by construction).
"""

import cupy as cp

from _corpus import args, construction_truth, loop

a = args(__doc__.splitlines()[0], op=(str, "gemm", "gemm or fft"))
sync = cp.cuda.Device().synchronize
if a.op == "gemm":
    x = cp.random.random((8192, 8192), dtype=cp.float32).astype(cp.float16)
    y = cp.random.random((8192, 8192), dtype=cp.float32).astype(cp.float16)
    out = cp.empty_like(x)

    def step():
        cp.matmul(x, y, out=out)
    label, why = "compute-bound", "fp16 GEMM 8192^3 (cuBLAS, tensor cores): 2*8192^3 flops per 3*128 MiB moved"
else:
    x = (cp.random.random(1 << 27, dtype=cp.float32) + 1j).astype(cp.complex64)

    def step():
        cp.fft.fft(x)
    label = "memory-bound"
    why = "1-D complex64 FFT of 2^27 points (cuFFT): O(5 log2 N) flops per 16 bytes, bandwidth-bound"
step()
sync()
n = loop(step, a.seconds, sync)
print(f"{n} calls", flush=True)
construction_truth(label, why, a.truth)
