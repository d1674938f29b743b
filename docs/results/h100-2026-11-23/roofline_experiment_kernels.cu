
#define LD_CS(p) __ldcs(p)
#define LD_G(p) __ldg(p)
#define LD_CG(p) __ldcg(p)
__device__ __forceinline__ float4 ld_256(const float4* p){float4 v;asm volatile("ld.global.nc.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];":"=f"(v.x),"=f"(v.y),"=f"(v.z),"=f"(v.w):"l"(p));return v;}
__device__ __forceinline__ float4 ld_na256(const float4* p){float4 v;asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];":"=f"(v.x),"=f"(v.y),"=f"(v.z),"=f"(v.w):"l"(p));return v;}
__device__ __forceinline__ float4 ld_cs256(const float4* p){float4 v;asm volatile("ld.global.cs.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];":"=f"(v.x),"=f"(v.y),"=f"(v.z),"=f"(v.w):"l"(p));return v;}
#define READK(NAME, U, LD) extern "C" __global__ void NAME(const float4* __restrict__ src, float* __restrict__ sink, long long n4, float never){ \
  const long long stride=(long long)gridDim.x*blockDim.x; long long i=(long long)blockIdx.x*blockDim.x+threadIdx.x; float acc=0.f; \
  for(; i+(long long)(U-1)*stride<n4; i+=(long long)U*stride){ float4 v[U]; _Pragma("unroll") for(int u=0;u<U;++u) v[u]=LD(src+i+(long long)u*stride); \
    _Pragma("unroll") for(int u=0;u<U;++u) acc+=(v[u].x+v[u].y)+(v[u].z+v[u].w);} \
  for(; i<n4; i+=stride){ float4 v=LD(src+i); acc+=(v.x+v.y)+(v.z+v.w);} \
  if(acc==never) sink[(long long)blockIdx.x*blockDim.x+threadIdx.x]=acc; }
READK(rd_cs_u4,4,LD_CS) READK(rd_cs_u8,8,LD_CS) READK(rd_cs_u16,16,LD_CS)
READK(rd_g_u8,8,LD_G) READK(rd_256_u4,4,ld_256) READK(rd_256_u8,8,ld_256) READK(rd_na256_u8,8,ld_na256) READK(rd_cs256_u8,8,ld_cs256)
READK(rd_na256_u4,4,ld_na256) READK(rd_na256_u16,16,ld_na256)
/* contiguous chunk per block */
#define READC(NAME,U,LD) extern "C" __global__ void NAME(const float4* __restrict__ src, float* __restrict__ sink, long long n4, float never){ \
  const long long tile=(long long)U*blockDim.x; const long long nt=n4/tile; long long t=nt*blockIdx.x/gridDim.x, te=nt*(blockIdx.x+1)/gridDim.x; float acc=0.f; \
  for(;t<te;++t){ const long long b=t*tile+threadIdx.x; float4 v[U]; _Pragma("unroll") for(int u=0;u<U;++u) v[u]=LD(src+b+(long long)u*blockDim.x); \
   _Pragma("unroll") for(int u=0;u<U;++u) acc+=(v[u].x+v[u].y)+(v[u].z+v[u].w);} \
  if(acc==never) sink[(long long)blockIdx.x*blockDim.x+threadIdx.x]=acc; }
READC(rdc_cs_u8,8,LD_CS) READC(rdc_na256_u8,8,ld_na256)
#define COPYK(NAME,U,LD,ST) extern "C" __global__ void NAME(const float4* __restrict__ src, float4* __restrict__ dst, long long n4){ \
  const long long tile=(long long)U*blockDim.x; const long long nt=n4/tile; for(long long t=blockIdx.x;t<nt;t+=gridDim.x){ const long long b=t*tile+threadIdx.x; \
  float4 v[U]; _Pragma("unroll") for(int u=0;u<U;++u) v[u]=LD(src+b+(long long)u*blockDim.x); _Pragma("unroll") for(int u=0;u<U;++u) ST(dst+b+(long long)u*blockDim.x, v[u]);}}
#define ST_P(p,v) (*(p)=(v))
#define ST_CS(p,v) __stcs(p,v)
COPYK(cp_g_u1,1,LD_G,ST_P) COPYK(cp_cs_u1,1,LD_CS,ST_CS) COPYK(cp_256_u2,2,ld_na256,ST_CS) COPYK(cp_g_u4,4,LD_G,ST_P)
/* L2: iters loads per thread at (tid + s*stride) & mask */
#define L2K(NAME,U,LD) extern "C" __global__ void NAME(const float4* __restrict__ src, float* __restrict__ sink, long long mask, int iters, float never){ \
  const long long stride=(long long)gridDim.x*blockDim.x; const long long tid=(long long)blockIdx.x*blockDim.x+threadIdx.x; float acc=0.f; \
  for(int s=0;s<iters;s+=U){ float4 v[U]; _Pragma("unroll") for(int u=0;u<U;++u) v[u]=LD(src+((tid+(long long)(s+u)*stride)&mask)); \
   _Pragma("unroll") for(int u=0;u<U;++u) acc+=(v[u].x+v[u].y)+(v[u].z+v[u].w);} \
  if(acc==never) sink[tid]=acc; }
L2K(l2_cg_u4,4,LD_CG) L2K(l2_cg_u8,8,LD_CG) L2K(l2_cs_u8,8,LD_CS)
extern "C" __global__ void fma_peak(float* __restrict__ out, float x, float y, int iters){
  const unsigned gid=blockIdx.x*blockDim.x+threadIdx.x; float a[8];
  _Pragma("unroll") for(int c=0;c<8;++c) a[c]=(float)((gid+c)&1023)*1e-3f;
  for(int i=0;i<iters;++i){ _Pragma("unroll") for(int d=0;d<16;++d){ _Pragma("unroll") for(int c=0;c<8;++c) a[c]=fmaf(a[c],x,y);}}
  float s=0; _Pragma("unroll") for(int c=0;c<8;++c) s+=a[c]; out[gid]=s; }
extern "C" __global__ void fma_peak_f64(double* __restrict__ out, double x, double y, int iters){
  const unsigned gid=blockIdx.x*blockDim.x+threadIdx.x; double a[8];
  _Pragma("unroll") for(int c=0;c<8;++c) a[c]=(double)((gid+c)&1023)*1e-3;
  for(int i=0;i<iters;++i){ _Pragma("unroll") for(int d=0;d<16;++d){ _Pragma("unroll") for(int c=0;c<8;++c) a[c]=fma(a[c],x,y);}}
  double s=0; _Pragma("unroll") for(int c=0;c<8;++c) s+=a[c]; out[gid]=s; }
