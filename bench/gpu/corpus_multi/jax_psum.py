"""A JAX data-parallel step over every local GPU with pmap: a matmul block, then a psum of a 256 MiB gradient-like
array across the devices (one process drives all GPUs, as JAX does on one host).

    python bench/gpu/corpus_multi/jax_psum.py [--seconds 20] [--truth F]

Truth: construction (psum of 256 MiB a step next to 4 bf16 8192^2 matmuls), and the step time.
"""

import time

from _multi import args, since_start, write_truth

a = args(__doc__.splitlines()[0], mults=(int, 4, "matmuls a step"))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

n = jax.local_device_count()


def step(w, g):
    for _ in range(a.mults):
        w = jnp.tanh(w @ w)
    return w, jax.lax.psum(g, "i") * (1.0 / n)


pstep = jax.pmap(step, axis_name="i")
w = jnp.stack([jnp.ones((8192, 8192), jnp.bfloat16) * 0.01] * n)
g = jnp.stack([jnp.ones((64 * 2**20,), jnp.float32)] * n)
w, g = pstep(w, g)
g.block_until_ready()
t_start, t0, steps = since_start(), time.perf_counter(), 0
while time.perf_counter() - t0 < a.seconds:
    w, g = pstep(w, g)
    steps += 1
g.block_until_ready()
wall = time.perf_counter() - t0
write_truth(a, 0, {"case": "jax_psum", "by": "construction", "devices": n, "steps": steps, "step_s": wall / steps,
                   "loop": [round(t_start, 3), round(t_start + wall, 3)]})
