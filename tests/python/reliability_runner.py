"""The zygote behind test_reliability.py: runs abusive calls in forked children and reports how they ended.

Run as a script it is the zygote. It imports numpy, torch and kiln (and torch._dynamo, which torch's
optimisers import on first use) but runs no tensor op, so no OpenMP or intra-op pool of either library
exists when it forks (numpy's OpenBLAS starts one thread at import; its own fork handler covers it).
It then serves requests, one JSON object a line on stdin:

    {"lib": "torch" | "kiln", "setup": str, "code": str, "check": [expr, ...], "timeout": seconds}

For each it os.fork()s a child, which runs `setup` and then `code` with the globals lib (torch or
kiln), F (lib.nn.functional), np (numpy) and tmp (the path of a fresh folder, made only when the setup
or code mentions tmp, and removed afterwards). Before `code` the child snapshots every `check`
expression (a tensor's dtype, shape, strides, storage offset and values; a list, tuple, dict, module or
optimizer element by element) and again after it, whether or not it raised. It writes its result as
JSON to a fresh pipe and os._exit()s. The zygote drains that pipe while waiting on the child's pidfd,
reaps it with wait4 and answers one JSON line on its stdout:

    {"status": "raised" | "returned" | "signal" | "hang" | "exit" | "setup-error" | "runner-error",
     "exc": [MRO of the exception class as "module.qualname" strings], "msg": str,
     "mutated": [check expressions whose snapshot changed], "signal": "SIGSEGV", "code": exit code,
     "seconds": float, "peak_mib": the child's peak RSS (wait4), "grown_mib": that beyond the peak of
     a child that runs nothing}

A child killed by a signal is "signal" (even if it wrote a result first); one still running at the
timeout is SIGKILLed and reported "hang"; one that exits without writing a result is "exit". The
zygote's own stdout is kept for the protocol: fd 1 is pointed at stderr before any child exists, so a
child's prints cannot corrupt it. Children get RLIMIT_CORE 0 (no core dumps) and an address space
capped EXTRA_ADDRESS_SPACE above the zygote's, so a call that really fills memory fails at the cap
instead of taking the machine down.

The parent side is `Zygote` (start, run, close), used by a module-scoped pytest fixture; `required_class`
maps the class torch raised onto the name kiln's exception must carry in its MRO.
"""
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# Under the sanitizer run (`make test-asan-python`: the ASan runtime preloaded) memory is not capped or
# measured: ASan's shadow and quarantine make a child's address space and resident size its own.
SANITIZED = "libclang_rt.asan" in os.environ.get("LD_PRELOAD", "")

EXTRA_ADDRESS_SPACE = 3 << 29  # bytes (1.5 GiB) a child may map beyond what the zygote has mapped


# --------------------------------------------------------------------------------------------- child side

def _class_names(cls):
    return [f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__]


def _snapshot(obj, depth=0):
    """A comparable, JSON-able picture of obj: for a tensor its dtype, shape, strides, storage offset and
    values (repr of tolist(), so NaNs compare equal); containers and modules element by element."""
    if depth > 4:
        return repr(type(obj))
    if hasattr(obj, "tolist") and hasattr(obj, "stride") and hasattr(obj, "detach"):
        t = obj.detach()
        return ["tensor", str(t.dtype), list(t.shape), list(t.stride()), int(t.storage_offset()),
                repr(t.tolist())]
    if hasattr(obj, "state_dict") and hasattr(obj, "parameters"):  # a module or an optimizer
        sd = obj.state_dict()
        return ["state", _snapshot(sd, depth + 1)]
    if isinstance(obj, dict):
        return ["dict", [[repr(k), _snapshot(v, depth + 1)] for k, v in obj.items()]]
    if isinstance(obj, (list, tuple)):
        return ["seq", [_snapshot(v, depth + 1) for v in obj]]
    return ["repr", repr(obj)]


def _child(req, wfd):
    res = {"status": "runner-error", "exc": [], "msg": "", "mutated": []}
    try:
        import numpy as np
        lib = sys.modules[req["lib"]]
        g = {"__name__": "__abuse__", "lib": lib, "F": lib.nn.functional, "np": np, "tmp": req["tmp"]}
        try:
            exec(req.get("setup") or "", g)
        except BaseException as e:  # noqa: BLE001
            res.update(status="setup-error", exc=_class_names(type(e)), msg=str(e)[:400])
            raise SystemExit
        checks = list(req.get("check") or [])
        before = [_snapshot(eval(c, g)) for c in checks]
        try:
            exec(req["code"], g)
            res.update(status="returned")
        except BaseException as e:  # noqa: BLE001 - the class is what is reported
            res.update(status="raised", exc=_class_names(type(e)), msg=f"{str(e)[:400]}")
        after = []
        for c in checks:
            try:
                after.append(_snapshot(eval(c, g)))
            except BaseException as e:  # noqa: BLE001 - an unreadable input counts as changed
                after.append(["unreadable", type(e).__name__])
        res["mutated"] = [c for c, b, a in zip(checks, before, after) if b != a]
    except SystemExit:
        pass
    except BaseException as e:  # noqa: BLE001
        res.update(status="runner-error", msg=f"{type(e).__name__}: {str(e)[:400]}")
    data = json.dumps(res).encode()
    view = memoryview(data)
    while view:
        n = os.write(wfd, view)
        view = view[n:]
    os.close(wfd)


def _serve_one(req, proto_fd_in, proto_fd_out, base):
    timeout = float(req.get("timeout", 30))
    _serve_one.count = getattr(_serve_one, "count", 0) + 1
    req["tmp"] = os.path.join(base, str(_serve_one.count))
    uses_tmp = "tmp" in req.get("setup", "") + req.get("code", "")
    if uses_tmp:  # only the few cases that write files get a folder (making one costs milliseconds)
        os.mkdir(req["tmp"])
    try:
        return _fork_one(req, timeout, proto_fd_in, proto_fd_out)
    finally:
        if uses_tmp:
            shutil.rmtree(req["tmp"], ignore_errors=True)


def _fork_one(req, timeout, proto_fd_in, proto_fd_out):
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(r)
            os.close(proto_fd_in)
            os.close(proto_fd_out)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if not SANITIZED:  # (ASan maps its shadow and allocator regions as it goes)
                limit = _mapped_bytes() + EXTRA_ADDRESS_SPACE
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            _child(req, w)
        except BaseException:  # noqa: BLE001
            code = 3
        finally:
            os._exit(code)
    os.close(w)
    # wait for the child's exit (its pidfd turns readable) while draining its result pipe
    pidfd = os.pidfd_open(pid)
    chunks, deadline, exited, hang = [], t0 + timeout, False, False
    watch = [r, pidfd]
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            hang = True
            break
        ready, _, _ = select.select(watch, [], [], left)
        if r in ready:
            b = os.read(r, 1 << 16)
            if b:
                chunks.append(b)
            else:
                watch.remove(r)
        if pidfd in ready:
            exited = True
            watch.remove(pidfd)
        if exited and (r not in watch or not select.select([r], [], [], 0)[0]):
            break  # exited, and its pipe is at EOF or holds nothing more (a grandchild may keep it open)
    os.close(r)
    os.close(pidfd)
    if hang:
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    peak = usage.ru_maxrss * 1024  # bytes on Linux
    extra = {"seconds": time.monotonic() - t0, "peak_mib": round(peak / 2**20, 1),
             "grown_mib": round((peak - (_BASE_PEAK or peak)) / 2**20, 1)}
    if hang:
        return {"status": "hang", "exc": [], "msg": f"no result after {timeout} s", "mutated": [], **extra}
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        return {"status": "signal", "signal": name, "exc": [], "mutated": [], "msg": f"killed by {name}", **extra}
    raw = b"".join(chunks)
    try:
        res = json.loads(raw.decode())
    except ValueError:
        return {"status": "exit", "code": os.WEXITSTATUS(status), "exc": [], "mutated": [],
                "msg": f"exited with {os.WEXITSTATUS(status)} without a result: {raw[:200]!r}", **extra}
    res.update(extra)
    return res


_BASE_PEAK = None  # the peak RSS of a child that runs nothing: what "grown_mib" is measured from


def _mapped_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def zygote_main():
    proto_out = os.dup(1)
    proto_in = os.dup(0)
    os.dup2(2, 1)  # anything printed by a child goes to stderr, never into the protocol
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import kiln  # noqa: F401
    import kiln.nn.functional  # noqa: F401
    import torch.nn.functional  # noqa: F401
    try:  # torch's optimisers import torch._dynamo on first use (about 1 s): pay that once, here
        import torch._dynamo  # noqa: F401
    except Exception:  # noqa: BLE001
        pass
    import gc
    gc.collect()
    gc.freeze()  # a child's collections then skip the imported objects instead of copying their pages
    global _BASE_PEAK
    base = tempfile.mkdtemp(prefix="abuse-")
    _BASE_PEAK = max(_serve_one({"lib": "kiln", "code": "pass"}, proto_in, proto_out, base)["peak_mib"]
                     for _ in range(3)) * 2**20
    out = os.fdopen(proto_out, "w", buffering=1)
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    inp = os.fdopen(proto_in, "r")
    for line in inp:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            res = _serve_one(req, proto_in, proto_out, base)
        except Exception as e:  # noqa: BLE001
            res = {"status": "runner-error", "exc": [], "mutated": [], "msg": f"zygote: {e!r}"}
        out.write(json.dumps(res) + "\n")
    shutil.rmtree(base, ignore_errors=True)


# -------------------------------------------------------------------------------------------- parent side

class Zygote:
    """The parent's handle: run(lib, code, setup=, check=, timeout=) -> result dict (see the docstring)."""

    def __init__(self, env=None):
        self.env = env
        self.proc = None
        self.err = None

    def start(self):
        self.err = tempfile.TemporaryFile()
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, env=env, text=True, bufsize=1)
        hello = self._readline(120)
        if not hello or not json.loads(hello).get("ready"):
            raise RuntimeError(f"zygote did not start: {hello!r}; stderr: {self.stderr_tail()}")
        return self

    def stderr_tail(self, n=2000):
        self.err.seek(0, 2)
        size = self.err.tell()
        self.err.seek(max(0, size - n))
        return self.err.read().decode(errors="replace")

    def _readline(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        return self.proc.stdout.readline()

    def run(self, lib, code, setup="", check=(), timeout=30.0):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        req = {"lib": lib, "code": code, "setup": setup, "check": list(check), "timeout": timeout}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self._readline(timeout + 30)
        if not line:
            tail = self.stderr_tail()
            self.close()
            raise RuntimeError(f"the zygote stopped answering; stderr: {tail}")
        return json.loads(line)

    def close(self):
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(10)
            except Exception:  # noqa: BLE001
                self.proc.kill()
                self.proc.wait()
            self.proc = None


# The class torch raises -> the name kiln's class (or one of its bases) must carry. Builtin and other
# non-torch classes (pickle.UnpicklingError, ...) must appear by their own name in kiln's MRO.
TORCH_TO_KILN = {
    "torch._C._LinAlgError": "kiln.linalg.LinAlgError",
    "torch.linalg.LinAlgError": "kiln.linalg.LinAlgError",
    "torch.OutOfMemoryError": "kiln.OutOfMemoryError",
    "torch._C.OutOfMemoryError": "kiln.OutOfMemoryError",
    "torch.cuda.OutOfMemoryError": "kiln.OutOfMemoryError",
    "torch.autograd.gradcheck.GradcheckError": "kiln.autograd.gradcheck.GradcheckError",
}


def required_class(torch_mro):
    """The class name kiln's exception must have in its MRO for the call to count as torch's class."""
    first = torch_mro[0]
    if first.startswith("torch.") and first not in TORCH_TO_KILN:
        raise KeyError(f"no kiln counterpart known for {first}")
    return TORCH_TO_KILN.get(first, first)


def short(res):
    """One-line description of a result, for messages."""
    s = res["status"]
    if s == "raised":
        return f"{res['exc'][0].replace('builtins.', '')}({res['msg'][:160]!r})"
    if s == "signal":
        return f"signal {res['signal']}"
    if s == "returned":
        return "returned (accepted)"
    return f"{s}: {res.get('msg', '')[:200]}"


if __name__ == "__main__":
    zygote_main()
