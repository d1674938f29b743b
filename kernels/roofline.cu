/*
 * The roofline sweep's kernels (loaded by workloads/roofline.py with CuPy RawModule).
 *
 * From the seed "GPU workload design" deck:
 *   compute_k_terms      b[i] = a[i] + a[i]^2 + ... + a[i]^k  with a separate add and multiply per term
 *                        (the seed kernel, unchanged). 2k FLOPs and 8 bytes (one 4-byte read, one
 *                        4-byte write) per element: arithmetic intensity AI = 2k / 8 = k/4 FLOP/byte.
 *   compute_k_terms_fma  the same polynomial by Horner's rule, r = fma(r, x, x) k times: one fused
 *                        multiply-add (2 FLOPs) per term, the same 2k FLOPs and 8 bytes per element.
 *
 * Why both: a GPU's FP32 peak counts an FMA as 2 FLOPs per lane per clock. The seed kernel issues a
 * multiply and an add as two instructions (1 FLOP each), so it can never pass half the FP32 roof.
 *
 * The roofs these points are drawn against are measured by kernels/ceilings.cu (gputop.measure).
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
