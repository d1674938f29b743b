/*
 * Roofline kernels (loaded by workloads/roofline.py with CuPy RawModule, compiled once per process).
 *
 * The sweep (from the seed "GPU workload design" deck):
 *   compute_k_terms      b[i] = a[i] + a[i]^2 + ... + a[i]^k  with a separate add and multiply per term
 *                        (the seed kernel, unchanged). 2k FLOPs and 8 bytes (one 4-byte read, one
 *                        4-byte write) per element: arithmetic intensity AI = 2k / 8 = k/4 FLOP/byte.
 *   compute_k_terms_fma  the same polynomial by Horner's rule, r = fma(r, x, x) k times: one fused
 *                        multiply-add (2 FLOPs) per term, the same 2k FLOPs and 8 bytes per element.
 *
 * Why both: a GPU's FP32 peak counts an FMA as 2 FLOPs per lane per clock. The seed kernel issues a
 * multiply and an add as two instructions (1 FLOP each), so it can never pass half the FP32 roof.
 *
 * The measured ceilings (the roofs this GPU really reaches in the same run):
 *   stream_read_u{4,8}                     read-only float4 stream (DRAM roof, reads counted)
 *   stream_copy_u{1,2,4,8}[_cs|_l2][_blk]  float4 copy, U loads in flight per thread before the U
 *                        stores, with or without cache hints, grid-stride or one contiguous run per
 *                        block. The workload tries these (and a few grid sizes) and keeps the fastest
 *                        as the DRAM roof: the best copy this GPU can do, not one guess at it.
 *   fma_peak             8 independent FMA chains per thread, 16-deep unrolled: 128 FMAs per loop trip,
 *                        so loop overhead is ~2% of issue slots. x and y are kernel arguments and every
 *                        thread stores its sum, so the compiler can neither fold nor drop the chains.
 *
 * All kernels are extern "C" so CuPy finds them by name. No managed memory; the host checks errors.
 */

/* ---------------------------------------------------------------------------------------------- */
/* The seed kernel, as published (roofline_kernel.cuh).                                            */
extern "C" __global__ void compute_k_terms(const float* __restrict__ a,
                                           float* __restrict__ b,
                                           int n,
                                           int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i];
        float result = 0.0f;
        float power = x;  // x^1
        // k iterations of one add and one multiply: 2k FLOPs, registers only.
        for (int j = 0; j < k; ++j) {
            result += power;
            power *= x;
        }
        b[i] = result;  // 4-byte read + 4-byte write = 8 bytes per element
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* The same polynomial by Horner's rule: x + x^2 + ... + x^k = x(1 + x(1 + ... )).                 */
/* Starting from r = 0, r = fma(r, x, x) gives x, x^2 + x, x^3 + x^2 + x, ...: exactly k FMAs.     */
#define HORNER_UNROLL 32

extern "C" __global__ void compute_k_terms_fma(const float* __restrict__ a,
                                               float* __restrict__ b,
                                               int n,
                                               int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i];
        float r = 0.0f;
        int j = 0;
        // Unrolled so that the loop's counter/compare/branch take ~3 of every 35 issue slots.
        for (; j + HORNER_UNROLL <= k; j += HORNER_UNROLL) {
#pragma unroll
            for (int u = 0; u < HORNER_UNROLL; ++u) {
                r = fmaf(r, x, x);
            }
        }
        for (; j < k; ++j) {
            r = fmaf(r, x, x);
        }
        b[i] = r;
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* DRAM roof: float4 copy in tiles of U x blockDim float4s; each thread first loads its U float4s   */
/* (U x 16 bytes in flight), then stores them. HINT 0: plain loads (read-only path) and stores;      */
/* 1: streaming (evict-first) loads and stores; 2: loads that ask L2 to fetch 256-byte blocks, and   */
/* streaming stores. CONTIG false: block b copies tiles b, b + grid, b + 2 grid, ... (grid-stride);  */
/* true: block b copies one contiguous run of tiles (long sequential streams per block).             */
template <int HINT>
__device__ __forceinline__ float4 load4(const float4* p) {
    if (HINT == 1) return __ldcs(p);
#if __CUDA_ARCH__ >= 800  /* the L2 prefetch-size qualifier exists from sm_80 on */
    if (HINT == 2) {
        float4 v;
        asm volatile("ld.global.nc.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
                     : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                     : "l"(p));
        return v;
    }
#endif
    return __ldg(p);
}

template <int HINT>
__device__ __forceinline__ void store4(float4* p, float4 v) {
    if (HINT == 0) {
        *p = v;
    } else {
        __stcs(p, v);
    }
}

template <int U, int HINT, bool CONTIG>
__device__ __forceinline__ void stream_copy(const float4* __restrict__ src, float4* __restrict__ dst,
                                            long long n4) {
    const long long tile = (long long)U * blockDim.x;
    const long long ntiles = (n4 + tile - 1) / tile;
    long long t = blockIdx.x, t_end = ntiles, step = gridDim.x;
    if (CONTIG) {
        t = ntiles * blockIdx.x / gridDim.x;
        t_end = ntiles * (blockIdx.x + 1) / gridDim.x;
        step = 1;
    }
    for (; t < t_end; t += step) {
        const long long base = t * tile + threadIdx.x;
        if (base + (long long)(U - 1) * blockDim.x < n4) {  // a whole tile: no bounds checks
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = load4<HINT>(src + base + (long long)u * blockDim.x);
#pragma unroll
            for (int u = 0; u < U; ++u) store4<HINT>(dst + base + (long long)u * blockDim.x, v[u]);
        } else {  // the last, partial tile
            for (int u = 0; u < U; ++u) {
                const long long i = base + (long long)u * blockDim.x;
                if (i < n4) dst[i] = src[i];
            }
        }
    }
}

/* stream_copy_u<U>[_cs|_l2][_blk]: U in {1, 2, 4, 8}; _cs: HINT 1; _l2: HINT 2; _blk: CONTIG. */
#define STREAM_COPY_ONE(NAME, U, HINT, CONTIG)                                                       \
    extern "C" __global__ void NAME(const float4* __restrict__ src, float4* __restrict__ dst,        \
                                    long long n4) {                                                  \
        stream_copy<U, HINT, CONTIG>(src, dst, n4);                                                  \
    }
#define STREAM_COPY(U)                                                                               \
    STREAM_COPY_ONE(stream_copy_u##U, U, 0, false)                                                   \
    STREAM_COPY_ONE(stream_copy_u##U##_cs, U, 1, false)                                              \
    STREAM_COPY_ONE(stream_copy_u##U##_l2, U, 2, false)                                              \
    STREAM_COPY_ONE(stream_copy_u##U##_blk, U, 0, true)                                              \
    STREAM_COPY_ONE(stream_copy_u##U##_cs_blk, U, 1, true)                                           \
    STREAM_COPY_ONE(stream_copy_u##U##_l2_blk, U, 2, true)

STREAM_COPY(1)
STREAM_COPY(2)
STREAM_COPY(4)
STREAM_COPY(8)

/* Read-only DRAM stream: HBM turns no bus around between reads and writes, so a pure read stream is */
/* the highest bandwidth a kernel can get out of DRAM (the memory roof is the faster of this and the */
/* copy above). Grid-stride, U float4 streaming loads in flight per thread; each thread sums what it */
/* read and stores the sum only if it equals ``never``, a value the data cannot add up to, so the    */
/* loads cannot be optimised away and the kernel writes (almost) nothing.                            */
template <int U>
__device__ __forceinline__ void stream_read(const float4* __restrict__ src, float* __restrict__ sink,
                                            long long n4, float never) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (; i + (long long)(U - 1) * stride < n4; i += (long long)U * stride) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcs(src + i + (long long)u * stride);
#pragma unroll
        for (int u = 0; u < U; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    for (; i < n4; i += stride) {
        const float4 v = __ldcs(src + i);
        acc += (v.x + v.y) + (v.z + v.w);
    }
    if (acc == never) sink[(long long)blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

#define STREAM_READ(U)                                                                               \
    extern "C" __global__ void stream_read_u##U(const float4* __restrict__ src, float* __restrict__ sink, \
                                                long long n4, float never) {                         \
        stream_read<U>(src, sink, n4, never);                                                        \
    }
STREAM_READ(4)
STREAM_READ(8)

/* ---------------------------------------------------------------------------------------------- */
/* FP32 roof: FMA_CHAINS independent chains a = a * x + y per thread; FLOPs = 2 x FMA_CHAINS x       */
/* FMA_DEPTH x iters per thread. With 8 chains a warp always has an independent FMA ready, and the    */
/* many warps per SM sub-partition cover the FMA latency several times over.                         */
#define FMA_CHAINS 8
#define FMA_DEPTH 16

extern "C" __global__ void fma_peak(float* __restrict__ out, float x, float y, int iters) {
    const unsigned int gid = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[FMA_CHAINS];
#pragma unroll
    for (int c = 0; c < FMA_CHAINS; ++c) {
        acc[c] = (float)((gid + c) & 1023) * 1.0e-3f;  // differs per thread and chain: nothing to fold
    }
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int d = 0; d < FMA_DEPTH; ++d) {
#pragma unroll
            for (int c = 0; c < FMA_CHAINS; ++c) {
                acc[c] = fmaf(acc[c], x, y);
            }
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < FMA_CHAINS; ++c) {
        s += acc[c];
    }
    out[gid] = s;  // one store per thread: negligible traffic, and the chains cannot be removed
}
