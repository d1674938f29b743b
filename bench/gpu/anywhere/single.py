"""One process on one GPU, in one of the loop shapes gputop's windows must start in:

    python single.py --shape plain|infer|server|graphs [--seconds 12] [--truth FILE]

plain: torch.matmul and adds in a loop (no nn.Module); infer: a transformer encoder's forward passes without
gradients; server: the same forward passes served by two worker threads while the main thread queues requests;
graphs: the encoder's forward captured in a CUDA graph and replayed (no module call at all).
"""

import queue
import threading

import torch

from _anywhere import args, loop, profile_truth

a = args(__doc__.splitlines()[0], shape=(str, "plain", "plain, infer, server or graphs"))
dev = "cuda"
if a.shape == "plain":
    x = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)

    def step():
        y = torch.matmul(x, x)
        y.add_(1.0).relu_()
else:
    layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4).to(dev).half().eval()
    x = torch.randn(8, 256, 1024, device=dev, dtype=torch.half)
    if a.shape == "infer":
        @torch.no_grad()
        def step():
            model(x)
    elif a.shape == "graphs":
        static_x = x.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                model(static_x)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), torch.no_grad():
            static_y = model(static_x)

        def step():
            graph.replay()
    else:  # server
        requests, done = queue.Queue(), queue.Queue()

        def worker():
            with torch.no_grad():
                while True:
                    item = requests.get()
                    if item is None:
                        return
                    model(item)
                    torch.cuda.current_stream().synchronize()
                    done.put(1)
        workers = [threading.Thread(target=worker, daemon=True) for _ in range(2)]
        for w in workers:
            w.start()

        def step():  # a batch of 4 requests served
            for _ in range(4):
                requests.put(x)
            for _ in range(4):
                done.get()
loop(step, a.seconds, torch.cuda.synchronize)
profile_truth(step, 10, a.truth)
print("single", a.shape, "done", flush=True)
