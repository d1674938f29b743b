"""Experiment: can a TMA bulk-copy read stream beat the float4 read stream and torch.sum on DRAM?"""
import sys, time
import numpy as np, cupy as cp, torch
sys.path.insert(0, ".")
SRC = r'''
#define STAGES_MAX 8
__device__ __forceinline__ void bar_wait(unsigned addr, unsigned phase) {
  unsigned done;
  do { asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0,1,0,p; }"
                    : "=r"(done) : "r"(addr), "r"(phase) : "memory"); } while (!done);
}
__device__ __forceinline__ void issue(unsigned bar, unsigned dst, const unsigned char* src, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
extern "C" __global__ void bulk_read(const unsigned char* __restrict__ src, float* __restrict__ sink,
                                     long long ntiles, int chunk, int stages, float never) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bar[STAGES_MAX];
  if (threadIdx.x != 0) return;
  unsigned bar0 = (unsigned)__cvta_generic_to_shared(bar);
  unsigned sm0 = (unsigned)__cvta_generic_to_shared(smem);
  for (int s = 0; s < stages; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar0 + 8 * s) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  for (int s = 0; s < stages; ++s) {
    long long t = blockIdx.x + (long long)s * gridDim.x;
    if (t < ntiles) issue(bar0 + 8 * s, sm0 + s * chunk, src + t * (long long)chunk, chunk);
  }
  float acc = 0.f;
  for (long long i = 0;; ++i) {
    long long t = blockIdx.x + i * gridDim.x;
    if (t >= ntiles) break;
    int s = (int)(i % stages); unsigned ph = (unsigned)((i / stages) & 1);
    bar_wait(bar0 + 8 * s, ph);
    acc += *(volatile float*)(smem + s * chunk);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    long long nt = t + (long long)stages * gridDim.x;
    if (nt < ntiles) issue(bar0 + 8 * s, sm0 + s * chunk, src + nt * (long long)chunk, chunk);
  }
  if (acc == never) sink[blockIdx.x] = acc;
}
'''
mod = cp.RawModule(code=SRC)
k = mod.get_function("bulk_read")
ceil = cp.RawModule(code=open("kernels/ceilings.cu").read())
sr = ceil.get_function("stream_read")
sms = cp.cuda.Device().attributes["MultiProcessorCount"]
print("SMs", sms, cp.cuda.runtime.getDeviceProperties(0)["name"])

def bench(fn, nbytes, runs=15):
    fn(); cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event(); ts = []
    for _ in range(runs):
        s.record(); fn(); e.record(); e.synchronize(); ts.append(cp.cuda.get_elapsed_time(s, e) / 1e3)
    ts.sort(); return nbytes / ts[len(ts)//2], nbytes / ts[0]

res = []
for size in (1 << 30, 4 << 30):
    buf = cp.ones(size // 4, dtype=cp.float32); raw = buf.data.ptr
    sink = cp.zeros(1 << 20, dtype=cp.float32); never = np.float32(-1.2345)
    for g_mul in (64, 128, 256):
        g = sms * g_mul // 8 * 8
        n4 = size // 16
        f = lambda: sr((sms * g_mul,), (256,), (buf, sink, np.int64(n4), never))
        med, best = bench(f, size); res.append((size >> 30, "stream_read", g_mul, med, best))
    for chunk in (16384, 32768, 49152):
        for stages in (2, 4, 6):
            smem = chunk * stages
            if smem > 200 * 1024: continue
            k.max_dynamic_shared_size_bytes = smem
            for bps in (1, 2):
                if smem * bps > 220 * 1024: continue
                g = sms * bps
                ntiles = size // chunk
                f = lambda: k((g,), (32,), (buf, sink, np.int64(ntiles), np.int32(chunk), np.int32(stages), never), shared_mem=smem)
                try:
                    med, best = bench(f, ntiles * chunk)
                except Exception as ex:
                    print("fail", chunk, stages, bps, ex); continue
                res.append((size >> 30, f"bulk c{chunk//1024}k s{stages}", bps, med, best))
    t = torch.ones(size // 4, dtype=torch.float32, device="cuda")
    out = torch.empty_like(t)
    def tb(fn, nbytes, runs=15):
        fn(); torch.cuda.synchronize(); ts = []
        for _ in range(runs):
            a, b = torch.cuda.Event(True), torch.cuda.Event(True); a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / 1e3)
        ts.sort(); return nbytes / ts[len(ts)//2], nbytes / ts[0]
    res.append((size >> 30, "torch.sum", 0, *tb(lambda: t.sum(), size)))
    res.append((size >> 30, "torch.copy_", 0, *tb(lambda: out.copy_(t), 2 * size)))
    del t, out, buf
    torch.cuda.empty_cache(); cp.get_default_memory_pool().free_all_blocks()
for r in res:
    print(f"{r[0]} GiB {r[1]:>18} g{r[2]:<4} median {r[3]/1e12:.3f} TB/s best {r[4]/1e12:.3f}")
