"""The loader's agent in a prepared Python process: its folder, a daemon thread that answers gputop's requests, and
the answer at the program's exit. Started by the loader's ``sitecustomize`` at the program's start, by
``os.fork`` in a forked child (multiprocessing's fork, a Pool's workers), or on Python 3.14+ by ``sys.remote_exec``
in a process that was not prepared (:func:`start` is idempotent). Stdlib only; it never imports torch itself.

1. Makes the process's own folder (``protocol.make_folder``: ``BASE/PID``, 0700) with ``loaded.json``, rewritten
   as the program imports torch or a CUDA library (``frameworks``: gputop asks the processes that hold a GPU, and
   where NVML cannot say, those that imported one).
2. Waits on a daemon thread (a look at the folder every ``POLL_S``; the program's threads do no work for gputop
   until a request comes) and answers each request once, in order: a torch.profiler window (torch_answer.py) in a
   program that imported torch, a CUPTI window (cupti_window.py) in one that runs CUDA without it, or one line.
3. At exit with a request pending: a window being recorded is stopped and written (``ended_by``: the program's
   exit); one not started gets its one line. Its folder goes at exit when no gputop ever asked it anything (else the
   asker reads the answers and removes it; a folder whose process is gone is swept after ``SWEEP_AFTER_S``).

Every failure is one ``reason`` line in the answer; the program goes on, its output unchanged.
"""

import os
import sys
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name):  # a module of this folder, by its path (the program's own folder comes first on sys.path)
    import importlib.util

    key = "_gputop_" + name
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, os.path.join(_HERE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


_protocol = _load("protocol")  # the folder and its files, shared with gputop
_cupti = _load("cupti_window")  # CUDA programs without torch: a CUPTI window
_torch_answer = _load("torch_answer")  # a torch window started at a step or on time
_torch_answer.M.protocol, _torch_answer.M.cupti = _protocol, _cupti
_torch_answer.M.kineto, _torch_answer.M.kernel_spans = _load("kineto_summary"), _load("kernel_spans")
_torch_answer.M.torch_window = _load("torch_window")

POLL_S = 0.2
EXIT_WAIT_S = 20.0  # at exit, how long the program waits for a recorded window to be written
SWEEP_AFTER_S = 600.0  # another process's folder, its process gone this long: removed
OTHER_PROTOCOL = ("this process's gputop profile loader speaks protocol %d and the request is protocol %d: ask with "
                  "the gputop whose loader it carries (%s), or restart the program with this gputop's loader "
                  "(gputop --profile-env)")
ENDED = "the program ended before the window started"

_state = {"seq": 0, "current": None, "win": None, "folder": None, "asked": False, "frameworks": None,
          "remote": False}
_lock = threading.Lock()


def _frameworks():
    """(the CUDA frameworks the program has imported, whether torch has initialised CUDA in it)."""
    names = [n for n in ("torch",) + tuple(_cupti.CUDA_MODULES) if n in sys.modules]
    cuda = False
    mod = _torch_answer._imported("torch.cuda")
    if mod is not None:
        try:
            cuda = bool(mod.is_initialized())
        except Exception:
            pass
    return names, cuda


def _write_loaded(folder):
    fw = _frameworks()
    _protocol.write_loaded(folder, {
        "pid": os.getpid(), "start": _protocol.process_start(os.getpid()),
        "python": "%d.%d.%d" % sys.version_info[:3], "loader": _HERE, "run": os.environ.get(_protocol.RUN_ENV),
        "frameworks": fw[0], "cuda": fw[1], "remote": _state["remote"]})
    _state["frameworks"] = fw


def _dispatch(request, seq):
    """The answer to one request of this loader's protocol."""
    if _torch_answer.torch_ready(time.monotonic() + _torch_answer.START_WAIT_S):
        return _torch_answer.answer(request, _state, _state["folder"], seq)
    if "torch" not in sys.modules:  # CUDA without torch (CuPy, JAX...): a CUPTI window, from the start time
        while time.time() < request.start_at:
            time.sleep(min(0.05, request.start_at - time.time()))
        return _cupti.answer(request.seconds, _state)
    torch = sys.modules["torch"]
    return _protocol.unavailable("torch %s: its import did not finish within %.0f s, or it has no torch.profiler"
                                 % (getattr(torch, "__version__", "?"), _torch_answer.START_WAIT_S))


def _answer_one(folder, seq):
    t = time.time()
    request = _protocol.read_request(folder, seq)
    with _lock:
        _state["current"], _state["asked"] = seq, True
    if request is None:
        doc = _protocol.unavailable("request %d could not be read (not a request of gputop's profile protocol %d)"
                                    % (seq, _protocol.PROTOCOL))
    elif request.protocol != _protocol.PROTOCOL:
        doc = _protocol.unavailable(OTHER_PROTOCOL % (_protocol.PROTOCOL, request.protocol, _HERE))
    else:
        try:
            doc = _dispatch(request, seq)
        except Exception as exc:
            doc = _protocol.unavailable("the loader failed: %s: %s" % (exc.__class__.__name__, exc))
    _reply(folder, seq, doc, t)


def _reply(folder, seq, doc, t):
    """Write the answer to request ``seq`` once (the waiting thread or, at exit, the main thread)."""
    with _lock:
        if _state["seq"] >= seq:
            return
        try:
            _protocol.write_answer(folder, seq, os.getpid(), t, doc)
        except OSError:
            pass
        _state["seq"], _state["win"], _state["current"] = seq, None, None


def _sweep(folder):
    """Remove the folders of processes gone for a while beside this one."""
    import shutil

    base = os.path.dirname(folder)
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        path = os.path.join(base, name)
        if name.isdigit() and path != folder and _protocol.stale(path, SWEEP_AFTER_S):
            shutil.rmtree(path, ignore_errors=True)


def _serve(folder):
    try:
        _sweep(folder)
    except Exception:
        pass
    while True:
        try:
            if _frameworks() != _state["frameworks"]:
                _write_loaded(folder)
            waiting = [s for s in _protocol.requests(folder) if s > _state["seq"]]
            if waiting:
                _answer_one(folder, waiting[0])
                continue
            if not os.path.isdir(folder):
                return  # removed: this process's loader is let go of
        except Exception:
            pass
        time.sleep(POLL_S)


def _at_exit():
    """The program ends: a pending request answered (:func:`_answer_at_exit`), then a CUPTI teardown of a window's
    stop still waiting for a CUDA call is let finish (torch_window.settle: left waiting, the exit hangs)."""
    try:
        _answer_at_exit()
    finally:
        if os.getpid() == _state.get("pid"):
            try:
                _torch_answer.M.torch_window.settle_at_exit(sys.modules.get("torch"))
            except Exception:
                pass


def _answer_at_exit():
    """The program ends with a request pending: a window being recorded is stopped and still written (the waiting
    thread dies at exit); one not started gets its one line now."""
    folder = _state["folder"]
    if folder is None or os.getpid() != _state.get("pid"):
        return
    seq = _state["current"]
    if seq is None:
        waiting = [s for s in _protocol.requests(folder) if s > _state["seq"]]
        for s in waiting:  # read in the last look's interval
            _reply(folder, s, _protocol.unavailable(ENDED), time.time())
        if not waiting and not _state["asked"]:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
        return
    win = _state["win"]
    if win is not None and getattr(win, "prof", None) is not None:
        try:
            if hasattr(win, "started_by"):  # torch: on the profiler's thread, or any where it records every thread
                win.ended_by = win.ended_by or "the program's exit"
                win.stop(teardown=False, sync=False) if (win.all_threads or win.thread == threading.get_ident()) \
                    else None
            else:
                win.stop()  # CUPTI: the recording thread ends it
        except Exception as exc:
            win.error = "the profiler failed at exit: %s: %s" % (exc.__class__.__name__, exc)
            win.finish()
        end = time.monotonic() + EXIT_WAIT_S
        while _state["seq"] < seq and time.monotonic() < end:
            time.sleep(0.02)
        return
    if win is not None:
        win.finish()
    why = _cupti.exit_reason() if "torch" not in sys.modules else ENDED
    _reply(folder, seq, _protocol.unavailable(why), time.time())


def _begin():
    """This process's folder and thread (a fresh process, or a forked child: the parent's are not its own)."""
    global _lock
    _lock = threading.Lock()  # a forked child's copy may be held by a thread it does not have
    inherited = _state.get("win")
    if inherited is not None and hasattr(inherited, "finish"):
        inherited.finish()  # a window of the parent's: its hooks go
    try:
        folder = _protocol.make_folder(os.getpid())
    except (OSError, _protocol.Refused):
        return False  # no private folder to be found in: this process cannot be asked
    _state.update(seq=0, current=None, win=None, folder=folder, asked=False, frameworks=None, pid=os.getpid())
    try:
        _write_loaded(folder)
    except OSError:
        return False
    threading.Thread(target=_serve, args=(folder,), name="gputop-profile-loader", daemon=True).start()
    return True


def start(remote=False):
    """The agent in this process (once): its folder, its thread, its exit handler, and a fresh agent in each
    forked child. ``remote``: installed into a running process (sys.remote_exec)."""
    if _state.get("started"):
        return
    _state["started"], _state["remote"] = True, remote
    if not _begin():
        return
    import atexit

    atexit.register(_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_begin)
