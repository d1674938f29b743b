"""Process exit codes of every gputop command (documented in README.md, "Exit codes")."""

OK = 0
FAILED = 1  # the workload (or the monitored command) reported an error; partial results were written
USAGE = 2  # bad flags, bad parameter, unknown workload, unreadable or invalid input file
NO_GPU = 3  # no NVML library, no driver, or no GPU, for a command that needs live GPU data
MISSING_DEPENDENCY = 4  # cupy or torch is needed by the workload but not installed
CRASHED = 5  # the workload's child process died (signal, CUDA fault, OOM kill) without finishing
TIMEOUT = 6  # the workload ran past its timeout and was stopped
INTERRUPTED = 130  # Ctrl-C / SIGINT (128 + 2); a partial document was still written
