"""A jax.jit training step of a bf16 MLP (XLA: fused elementwise ops, large GEMMs).

    python bench/gpu/corpus/jax_step.py [--seconds 10] [--truth FILE]

Third-party code: JAX/XLA. Ground truth by construction: four 8192x8192 bf16 GEMMs per layer and step
(forward and backward) against a few elementwise ops: compute-bound (tensor cores). The script asks XLA
not to preallocate 75% of the device memory (which would read as memory pressure).
"""

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from _corpus import args, construction_truth, loop  # noqa: E402

a = args(__doc__.splitlines()[0], width=(int, 8192, "hidden width"), batch=(int, 8192, "rows per step"))
key = jax.random.PRNGKey(0)
ws = [jax.random.normal(k, (a.width, a.width), jnp.bfloat16) * 0.01 for k in jax.random.split(key, 4)]
x = jax.random.normal(key, (a.batch, a.width), jnp.bfloat16)


def loss(ws, x):
    for w in ws:
        x = jax.nn.gelu(x @ w)
    return jnp.mean(jnp.square(x.astype(jnp.float32)))


@jax.jit
def step_fn(ws, x):
    g = jax.grad(loss)(ws, x)
    return [w - 1e-3 * gw for w, gw in zip(ws, g)]


state = {"ws": step_fn(ws, x)}


def step():
    state["ws"] = step_fn(state["ws"], x)


jax.block_until_ready(state["ws"])
n = loop(step, a.seconds, lambda: jax.block_until_ready(state["ws"]))
print(f"{n} steps", flush=True)
construction_truth("compute-bound", "4 layers of 8192^2 bf16 GEMMs (3 per layer with the backward) per step", a.truth)
