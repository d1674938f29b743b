// Kernels of the CUDA-graphs workload (workloads/cudagraphs.py), compiled at run time by CuPy's RawModule.

// The seed's shortKernel (listings 1 and 2): one multiply-add per element on N = 50000 floats, a kernel
// so short that launching it costs more than running it. As in the seed, the constants are doubles.
extern "C" __global__ void shortKernel(float* dst, const float* src, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) dst[idx] = 1.23 * src[idx] + 4.0;
}

// Busy-waits for `cycles` SM clock ticks on one thread. Queued first, it keeps the GPU busy while the host
// queues the work to be timed behind it, so that work then runs back to back at the GPU's own pace.
extern "C" __global__ void spinKernel(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
