/*
 * The ceilings a roofline is drawn against, measured on this GPU (gputop/measure/ceilings.py compiles
 * this file with CuPy RawModule, once per process). Every kernel is extern "C" so CuPy finds it by name.
 *
 *   stream_read     DRAM roof. Read-only float4 stream, grid-stride, 8 loads in flight per thread
 *                   before the first use. HBM turns no bus around in a pure read stream, so this is the
 *                   most a kernel gets out of DRAM (on an H100/H200 ~2-3% more than a copy). Each thread
 *                   sums what it read and stores the sum only if it equals ``never``, a value the data
 *                   cannot add up to: the loads cannot be optimised away and nothing is written.
 *   stream_copy     the same stream as a copy (read + write bytes), reported beside the read roof: the
 *                   bandwidth a kernel that reads and writes (like the sweep's) can hope for.
 *   l2_read         L2 roof. The same reads over a working set far smaller than L2, ld.global.cg
 *                   (cached in L2 only: the L1 serves nothing), so every byte comes from L2.
 *   fma_peak        FP32 roof: 8 independent FMA chains per thread, 16-deep unrolled (128 FMAs per loop
 *                   trip). x and y are arguments and each thread stores its sum: nothing folds.
 *   fma_peak_f64    the same in double precision (FP64 roof, not the FP64 tensor path).
 *
 * Variants that did not earn their place (H100, 2026-11-23, docs/benchmarks.md): 1/2/4/16 loads in
 * flight, L2::256B prefetch and L1::no_allocate hints, contiguous runs per block: all within 0.3% of
 * this read stream; copies with 2-8 float4s per thread or streaming stores: within 0.5% of this copy.
 */

#define READ_UNROLL 8

extern "C" __global__ void stream_read(const float4* __restrict__ src, float* __restrict__ sink,
                                       long long n4, float never) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (; i + (long long)(READ_UNROLL - 1) * stride < n4; i += (long long)READ_UNROLL * stride) {
        float4 v[READ_UNROLL];
#pragma unroll
        for (int u = 0; u < READ_UNROLL; ++u) v[u] = __ldcs(src + i + (long long)u * stride);
#pragma unroll
        for (int u = 0; u < READ_UNROLL; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    for (; i < n4; i += stride) {
        const float4 v = __ldcs(src + i);
        acc += (v.x + v.y) + (v.z + v.w);
    }
    if (acc == never) sink[(long long)blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

/* One float4 per thread per step, grid-stride (the fastest copy shape on an H100). */
extern "C" __global__ void stream_copy(const float4* __restrict__ src, float4* __restrict__ dst, long long n4) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        dst[i] = __ldg(src + i);
    }
}

/* Thread t reads float4 (t + s * stride) & mask for s = 0 .. iters-1 (n4 = mask + 1, a power of two): */
/* coalesced across the warp, 8 loads in flight, the whole working set touched again and again.       */
extern "C" __global__ void l2_read(const float4* __restrict__ src, float* __restrict__ sink,
                                   long long mask, int iters, float never) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (int s = 0; s < iters; s += READ_UNROLL) {
        float4 v[READ_UNROLL];
#pragma unroll
        for (int u = 0; u < READ_UNROLL; ++u) v[u] = __ldcg(src + ((tid + (long long)(s + u) * stride) & mask));
#pragma unroll
        for (int u = 0; u < READ_UNROLL; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    if (acc == never) sink[tid] = acc;
}

#define FMA_CHAINS 8
#define FMA_DEPTH 16

extern "C" __global__ void fma_peak(float* __restrict__ out, float x, float y, int iters) {
    const unsigned int gid = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[FMA_CHAINS];
#pragma unroll
    for (int c = 0; c < FMA_CHAINS; ++c) acc[c] = (float)((gid + c) & 1023) * 1.0e-3f;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int d = 0; d < FMA_DEPTH; ++d) {
#pragma unroll
            for (int c = 0; c < FMA_CHAINS; ++c) acc[c] = fmaf(acc[c], x, y);
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < FMA_CHAINS; ++c) s += acc[c];
    out[gid] = s;
}

extern "C" __global__ void fma_peak_f64(double* __restrict__ out, double x, double y, int iters) {
    const unsigned int gid = blockIdx.x * blockDim.x + threadIdx.x;
    double acc[FMA_CHAINS];
#pragma unroll
    for (int c = 0; c < FMA_CHAINS; ++c) acc[c] = (double)((gid + c) & 1023) * 1.0e-3;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int d = 0; d < FMA_DEPTH; ++d) {
#pragma unroll
            for (int c = 0; c < FMA_CHAINS; ++c) acc[c] = fma(acc[c], x, y);
        }
    }
    double s = 0.0;
#pragma unroll
    for (int c = 0; c < FMA_CHAINS; ++c) s += acc[c];
    out[gid] = s;
}
