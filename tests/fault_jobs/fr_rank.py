"""A rank's flight recorder dump pipe as ProcessGroupNCCL's heartbeat monitor keeps it (torch 2.4-2.11,
ProcessGroupNCCL.hpp's DumpPipe), without NCCL: the FIFO ``$TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe`` made with
mkfifo and opened O_RDONLY | O_NONBLOCK (only where ``TORCH_NCCL_TRACE_BUFFER_SIZE`` > 0), polled; a byte read
there writes the rank's dump to ``$TORCH_FR_DUMP_TEMP_FILE<rank>`` (the DebugInfoWriter's file). The dump written is
a real one given on the command line (tests/data/flight_recorder/: real gloo dumps).

    python fr_rank.py RANK DUMP_FILE
"""

import os
import shutil
import sys
import time

rank, dump = int(sys.argv[1]), sys.argv[2]  # (its RANK in its environment: torchrun's, set by who starts it)
stem = os.environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "")
size = int(os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE", "0") or 0)
out = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
if not stem or size <= 0 or not out:
    print("no pipe", flush=True)
    time.sleep(3600)
pipe = f"{stem}{rank}.pipe"
if os.path.exists(pipe):
    os.unlink(pipe)
os.mkfifo(pipe, 0o666)
fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
print("READY", rank, os.getpid(), flush=True)
while True:
    try:
        got = os.read(fd, 128)
    except BlockingIOError:
        got = b""
    if got:
        shutil.copyfile(dump, f"{out}{rank}.tmp")
        os.rename(f"{out}{rank}.tmp", f"{out}{rank}")
    time.sleep(0.2)
