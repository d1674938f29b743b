"""A torchvision ResNet trained on torchvision's FakeData through its transforms and a DataLoader.

    python bench/gpu/corpus/tv_resnet_train.py [--workers 8] [--heavy 0] [--seconds 10] [--truth FILE]

Third-party code: torchvision.models, torchvision.datasets.FakeData, torchvision.transforms,
torch.utils.data.DataLoader. ``--heavy 1 --workers 0`` adds many CPU transforms in the training process
itself (the host-bound / input-starved variant). Ground truth: torch.profiler's kernel-time breakdown
over the last steps (data loading included).
"""

import torch
import torchvision
from torchvision import transforms as T

from _corpus import args, loop, profile_truth

a = args(__doc__.splitlines()[0], workers=(int, 8, "DataLoader workers"), heavy=(int, 0, "many CPU transforms"),
         batch=(int, 128, "images per step"), model=(str, "resnet50", "torchvision model name"))
ops = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()]
if a.heavy:
    ops += [T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.RandomRotation(15), T.GaussianBlur(9), T.RandomPerspective()]
ops += [T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
data = torchvision.datasets.FakeData(size=100_000, image_size=(3, 256, 256), transform=T.Compose(ops))
loader = torch.utils.data.DataLoader(data, batch_size=a.batch, num_workers=a.workers, pin_memory=True,
                                     persistent_workers=a.workers > 0, shuffle=True)
model = getattr(torchvision.models, a.model)(num_classes=1000).cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
it = iter(loader)


def step():
    global it
    try:
        x, y = next(it)
    except StopIteration:
        it = iter(loader)
        x, y = next(it)
    x = x.cuda(non_blocking=True).to(memory_format=torch.channels_last)
    y = y.cuda(non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


step()
n = loop(step, a.seconds, torch.cuda.synchronize)
print(f"{n} steps", flush=True)
profile_truth(step, 5, a.truth, input_pipeline=f"DataLoader(workers={a.workers})")
# Stop the workers now: persistent workers with a pin-memory thread can hang the interpreter's exit (the first
# H100 run's ResNet-50 case was killed by its time limit after writing its truth).
if hasattr(it, "_shutdown_workers"):
    it._shutdown_workers()
