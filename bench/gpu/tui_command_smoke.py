"""Drive `gputop --tui --run -- CMD` in a pseudo-terminal on a GPU machine, then quit with q.

    python bench/gpu/tui_command_smoke.py [--quit-after 25] [--size 120x40] -- CMD ARGS...

Prints gputop's exit code (the command's), the last screen text it drew (ANSI stripped) and the
text report gputop prints after the TUI closes. Exit 0 when gputop exited with the command's code.
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import fcntl

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def main() -> int:
    argv = sys.argv[1:]
    cmd = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser()
    ap.add_argument("--quit-after", type=float, default=25.0)
    ap.add_argument("--size", default="120x40")
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if not cmd:
        ap.error("give the command after --")
    cols, rows = map(int, args.size.split("x"))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
    p = subprocess.Popen([sys.executable, "-m", "gputop", "--tui", "--run", "--", *cmd],
                         stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    out = bytearray()
    t0 = time.monotonic()
    quit_sent = False
    while p.poll() is None and time.monotonic() - t0 < args.quit_after + 30:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
        if not quit_sent and time.monotonic() - t0 > args.quit_after:
            os.write(master, b"q")
            quit_sent = True
    try:
        while True:
            r, _, _ = select.select([master], [], [], 0.5)
            if not r:
                break
            out += os.read(master, 65536)
    except OSError:
        pass
    code = p.wait(timeout=30)
    text = ANSI.sub("", out.decode(errors="replace"))
    print(f"gputop exit code: {code}")
    print("---- last 3000 characters gputop wrote (ANSI stripped) ----")
    print(text[-3000:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
