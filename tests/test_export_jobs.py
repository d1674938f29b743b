"""``--export``'s job labels (gputop/export/jobs.py): each GPU's work labelled with its job as the scheduler or
launcher knows it, read from real processes' /proc/PID/environ and /proc/PID/cgroup; what cannot be read is said.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from export_util import free_port, get, start_exporter, stop, wait_for
from fault_util import started
from gputop.telemetry.process_job import Job, JobReader, cgroup_pod, environ_job

ROOT = Path(__file__).resolve().parents[1]
SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]

# /proc/PID/cgroup of a pod's process, as the kubelet's two cgroup drivers lay it out (Kubernetes' docs and a
# cgroup v1 node's own file): the cgroupfs driver (v1 and v2) and the systemd driver (v2, dashes as underscores)
CGROUPS = {
    "v1 cgroupfs": "12:memory:/kubepods/burstable/pod0b4d7e4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b/1f2e3d4c5b6a\n"
                   "11:cpu,cpuacct:/kubepods/burstable/pod0b4d7e4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b/1f2e3d4c5b6a\n",
    "v2 systemd": "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b4d7e4e_1c2d_4e5f_8a9b_"
                  "0c1d2e3f4a5b.slice/cri-containerd-1f2e3d4c5b6a.scope\n",
    "v2 cgroupfs": "0::/kubepods/besteffort/pod0b4d7e4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b/1f2e3d4c5b6a\n",
}


def child(**env: str) -> subprocess.Popen:
    """A real process with ``env`` added to this one's, in a session (and process group) of its own."""
    clean = {k: v for k, v in os.environ.items() if k not in ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "MASTER_ADDR",
                                                                "MASTER_PORT")}
    return started(subprocess.Popen(SLEEP, env=dict(clean, **env), start_new_session=True), SLEEP[-1].encode())


@pytest.mark.parametrize("layout", sorted(CGROUPS))
def test_a_pods_uid_is_read_from_its_cgroup_in_either_drivers_layout(layout):
    assert cgroup_pod(CGROUPS[layout]) == "0b4d7e4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
    assert cgroup_pod("0::/user.slice/user-0.slice/session-3.scope\n") is None
    assert cgroup_pod("0::/\n") is None  # a container in its own cgroup namespace sees no path


def test_the_environment_names_the_job_slurm_first_then_torchrun():
    assert environ_job(b"PATH=/bin\0SLURM_JOB_ID=4242\0TORCHELASTIC_RUN_ID=abc\0") == Job("4242", "slurm")
    assert environ_job(b"TORCHELASTIC_RUN_ID=abc\0") == Job("torchelastic:abc", "torchelastic")
    assert environ_job(b"TORCHELASTIC_RUN_ID=none\0") is None  # torchrun's default id names no job
    assert environ_job(b"SLURM_JOB_ID=\0HOME=/root") is None
    assert environ_job(b"MASTER_ADDR=10.0.0.7\0MASTER_PORT=29500\0", "n1") == Job("rendezvous:10.0.0.7:29500",
                                                                                "rendezvous")
    assert environ_job(b"MASTER_ADDR=127.0.0.1\0MASTER_PORT=29501\0", "n1") == Job("rendezvous:127.0.0.1:29501@n1",
                                                                                  "rendezvous")  # one node's


def test_real_processes_jobs_come_from_their_environment_else_their_process_group():
    procs = [child(SLURM_JOB_ID="4242"), child(TORCHELASTIC_RUN_ID="run-7"), child(TORCHELASTIC_RUN_ID="none")]
    try:
        reader = JobReader("node-a")
        got = [reader.of_process({"pid": p.pid, "pgid": os.getpgid(p.pid)}) for p in procs]
        assert got == [Job("4242", "slurm"), Job("torchelastic:run-7", "torchelastic"),
                       Job(f"launcher:{os.getpid()}@node-a", "launcher")]  # a session of its own: its launcher's
        assert reader.take_unreadable() == {}
        # a GPU's jobs, each once; a replay (not live) has only the recorded process group
        listed = [{"pid": p.pid, "pgid": os.getpgid(p.pid)} for p in procs + procs[:1]]
        assert reader.of_gpu(listed) == got
        assert JobReader("vm", live=False).of_process({"pid": procs[0].pid, "pgid": 77}) == Job("pgid:77@vm",
                                                                                             "process-group")
    finally:
        for p in procs:
            p.kill()
            p.wait()
    # gone: no environment, no cgroup, its recorded group stands, and why is counted
    reader = JobReader("node-a")
    assert reader.of_process({"pid": procs[0].pid, "pgid": 5}) == Job("pgid:5@node-a", "process-group")
    assert list(reader.take_unreadable()) == [
        "no such process here (another PID namespace: a container needs the host's, hostPID) or it ended"]


def test_another_users_environment_is_unreadable_and_said():
    """A reader without the right to another user's /proc/PID/environ (here: a child that drops root, or runs as
    a user, reading root's PID 1; its modules imported first, this interpreter's files may be root's): the job falls
    back to the process group and the reason is counted."""
    if os.geteuid() == 0:
        drop = "import os; os.setgid(65534); os.setuid(65534)"
    else:
        drop = "pass"
    with open("/proc/1/status") as f:
        if not any(line.startswith("Uid:") and line.split()[1] == "0" for line in f):
            pytest.skip("PID 1 is not root's here")
    code = textwrap.dedent(f"""
        from gputop.telemetry.process_job import JobReader
        {drop}
        r = JobReader("node-a")
        print(r.of_process({{"pid": 1, "pgid": 1}}))
        print(r.take_unreadable())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert out.returncode == 0, out.stderr
    job, unread = out.stdout.splitlines()
    assert "pgid:1@node-a" in job or "kubernetes" in job
    assert "another user's process" in unread and "CAP_SYS_PTRACE" in unread


@pytest.mark.slow
def test_a_live_exporter_labels_a_gpus_series_with_its_processes_job():
    """``gputop --export --run -- CMD`` on the fake NVML (which lists gputop's descendants on its GPU): the
    command's environment names its job (torchrun's run id), not the exporter's own."""
    port = free_port()
    proc = start_exporter(f"127.0.0.1:{port}", "--json", "--run", "--", "sh", "-c",
                          'TORCHELASTIC_RUN_ID=run-7 exec python3 -c "import time; time.sleep(60)"', fake_nvml=True)
    try:
        def labelled():
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read())
            fams = {f.name: f for f in text_string_to_metric_families(get(f"http://127.0.0.1:{port}/metrics"))}
            jobs = fams.get("gputop_job")
            return fams if jobs and jobs.samples else None
        fams = wait_for(labelled, 60, "the exporter to label its GPU with the command's job", step=0.2)
        assert {(s.labels["hpc_job"], s.labels["source"]) for s in fams["gputop_job"].samples} == {
            ("torchelastic:run-7", "torchelastic")}
        wait_for(lambda: {s.labels.get("hpc_job") for s in text_string_to_metric_families(
            get(f"http://127.0.0.1:{port}/metrics")) if s.name == "DCGM_FI_DEV_GPU_UTIL" for s in s.samples} == {
            "torchelastic:run-7"}, 30, "its series to carry the job")
    finally:
        stop(proc)
