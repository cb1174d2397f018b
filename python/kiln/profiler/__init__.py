"""kiln.profiler: torch.profiler's CPU profiler over kiln's dispatch point. `profile()` times every
table op the profiling thread dispatches (forward and backward; kiln's composites show as the ops
they are made of) and the `record_function` ranges around them; `key_averages().table()` prints
torch's table, `export_chrome_trace` writes the Chrome trace format, `schedule` / `on_trace_ready` /
`step()` cycle as torch's do. Op events are named `kiln::<op>` (torch's `aten::<op>`). The timing is
C++ (kiln/dispatch/profiler.cpp); this is the bookkeeping."""
import enum
import functools
import json
import os
import threading

from .. import _C

__all__ = ["profile", "record_function", "schedule", "ProfilerActivity", "ProfilerAction",
           "tensorboard_trace_handler", "supported_activities"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3


def supported_activities():
    return {ProfilerActivity.CPU}


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """torch.profiler.schedule: after skip_first steps, cycles of `wait` idle, `warmup` and `active`
    recorded steps, `repeat` times (0: without end); the last active step of a cycle is RECORD_AND_SAVE.
    skip_first_wait drops the first cycle's wait."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError("Invalid profiler schedule arguments")
    if warmup == 0:
        import warnings
        warnings.warn("Profiler won't be using warmup, this can skew profiler results")
    span = wait + warmup + active

    def action(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step = step - skip_first + (wait if skip_first_wait else 0)
        if repeat > 0 and step / span >= repeat:
            return ProfilerAction.NONE
        k = step % span
        if k < wait:
            return ProfilerAction.NONE
        if k < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if k < span - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def _always_record(step):
    return ProfilerAction.RECORD


# ---- events ----------------------------------------------------------------------------------------
class FunctionEvent:
    """One op call or range: name, times in microseconds, the inputs' shapes (record_shapes)."""

    def __init__(self, name, start_ns, end_ns, depth, is_range, shapes, thread):
        self.name = self.key = name
        self.start_us, self.end_us = start_ns / 1000.0, end_ns / 1000.0
        self.depth, self.is_user_annotation = depth, is_range
        self.input_shapes = [list(s) for s in shapes]
        self.thread = thread
        self.cpu_children = []
        self.count = 1

    @property
    def cpu_time_total(self):
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_time(self):
        return self.cpu_time_total

    def __repr__(self):
        return (f"<FunctionEvent name={self.name} cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The calls of one key summed: count, total and self CPU time, their average."""

    def __init__(self, key, input_shapes=None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0

    def add(self, ev):
        self.count += 1
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self CPU time={_fmt_time(self.self_cpu_time_total)} "
                f"CPU time={_fmt_time(self.cpu_time_total)} count={self.count}>")


def _fmt_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class EventList(list):
    """Events or averages with torch's table()."""

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, max_shapes_column_width=80,
              header=None, top_level_events_only=False):
        rows = list(self)
        if top_level_events_only:
            rows = [r for r in rows if getattr(r, "depth", 0) == 0]
        if sort_by is not None:
            key = sort_by
            if key not in ("cpu_time_total", "self_cpu_time_total", "cpu_time", "count"):
                raise AttributeError(f"sort_by: unknown key '{sort_by}'")
            rows.sort(key=lambda r: getattr(r, key), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        self_total = sum(getattr(r, "self_cpu_time_total", 0.0) for r in self)
        shapes = any(getattr(r, "input_shapes", None) for r in rows)
        name_w = min(max([len(r.key) for r in rows] + [4]) + 2, max_name_column_width)
        cols = [("Name", name_w), ("Self CPU %", 12), ("Self CPU", 12), ("CPU total %", 12), ("CPU total", 12),
                ("CPU time avg", 12), ("# of Calls", 12)]
        if shapes:
            cols.append(("Input Shapes", min(max_shapes_column_width, 80)))
        line = "  ".join("-" * w for _, w in cols) + "  "
        out = []
        if header:
            out += ["=" * len(line), header]
        out += [line, "  ".join(n.rjust(w) for n, w in cols) + "  ", line]

        def pct(v):
            return f"{100.0 * v / self_total:.2f}%" if self_total else "0.00%"
        for r in rows:
            name = r.key if len(r.key) <= name_w else r.key[:name_w - 3] + "..."
            cells = [name.rjust(name_w), pct(r.self_cpu_time_total).rjust(12),
                     _fmt_time(r.self_cpu_time_total).rjust(12), pct(r.cpu_time_total).rjust(12),
                     _fmt_time(r.cpu_time_total).rjust(12), _fmt_time(r.cpu_time).rjust(12), str(r.count).rjust(12)]
            if shapes:
                cells.append(str(r.input_shapes or "")[:cols[-1][1]].rjust(cols[-1][1]))
            out.append("  ".join(cells) + "  ")
        out += [line, f"Self CPU time total: {_fmt_time(self_total)}", ""]
        return "\n".join(out)

    @property
    def self_cpu_time_total(self):
        return sum(getattr(r, "self_cpu_time_total", 0.0) for r in self)


def _build_events(raw, thread):
    events, open_ranges = [], []
    for name, start, end, depth, is_range, shapes in raw:
        ev = FunctionEvent(name if is_range else "kiln::" + name, start, end, depth, is_range, shapes, thread)
        del open_ranges[depth:]
        if open_ranges:
            open_ranges[-1].cpu_children.append(ev)
        if is_range:
            open_ranges.append(ev)
        events.append(ev)
    return events


# ---- profile -----------------------------------------------------------------------------------------
class profile:
    """torch.profiler.profile for the CPU activity (a CUDA activity is refused: kiln has no CUDA yet)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None,
                 custom_trace_id_callback=None):
        acts = set(activities) if activities is not None else supported_activities()
        unsupported = acts - supported_activities()
        if unsupported or use_cuda:
            raise RuntimeError(f"kiln.profiler: activities {sorted(a.name for a in unsupported) or ['CUDA']} are not "
                               "available (kiln profiles the CPU)")
        self.activities = acts
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.acc_events = acc_events
        self.step_num = 0
        self._events = EventList()
        self._recording = False
        self._thread = threading.get_ident()
        self._action = ProfilerAction.NONE

    # the recorder follows the schedule's action for the current step
    def _apply(self, action):
        record = action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if record and not self._recording and _C._profiler_enabled():
            import warnings  # a profile inside another on this thread: the outer one keeps the events
            warnings.warn("kiln.profiler: a profiler is already running on this thread; this one records nothing")
            self._action = action
            return
        if record and not self._recording:
            _C._profiler_start(self.record_shapes)
            self._recording = True
        self._action = action

    def _collect(self):
        if self._recording:
            evs = _build_events(_C._profiler_stop(), self._thread)
            self._recording = False
            if self.acc_events:
                self._events.extend(evs)
            else:
                self._events = EventList(evs)

    def start(self):
        self._apply(self.schedule(self.step_num))
        return self

    def stop(self):
        if self._recording:
            self._collect()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        self._action = ProfilerAction.NONE

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def step(self):
        prev = self._action
        self.step_num += 1
        nxt = self.schedule(self.step_num)
        if prev == ProfilerAction.RECORD_AND_SAVE or (prev in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
                                                       and nxt in (ProfilerAction.NONE, ProfilerAction.WARMUP)):
            self._collect()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        self._apply(nxt)

    def events(self):
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        groups = {}
        for ev in self._events:
            key = (ev.key, str(ev.input_shapes)) if group_by_input_shape else ev.key
            if key not in groups:
                groups[key] = FunctionEventAvg(ev.key, ev.input_shapes if group_by_input_shape else None)
            groups[key].add(ev)
        return EventList(groups.values())

    def export_chrome_trace(self, path):
        pid = os.getpid()
        trace = [{"name": ev.name, "ph": "X", "cat": "user_annotation" if ev.is_user_annotation else "cpu_op",
                  "ts": ev.start_us, "dur": ev.cpu_time_total, "pid": pid, "tid": ev.thread,
                  "args": {"Input Dims": ev.input_shapes} if ev.input_shapes else {}}
                 for ev in self._events]
        with open(path, "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms", "schemaVersion": 1}, f)
        return path

    @property
    def profiler(self):  # torch's legacy accessor
        return self


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An on_trace_ready handler writing one Chrome trace per ready trace into dir_name."""
    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{os.uname().nodename}_{os.getpid()}"
        path = os.path.join(dir_name, f"{name}.{prof.step_num}.pt.trace.json")
        prof.export_chrome_trace(path)
        if use_gzip:
            import gzip
            with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
                g.write(f.read())
            os.remove(path)
    return handler


class record_function:
    """A named range in the profile (a context manager and a decorator); a no-op when not profiling."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args

    def __enter__(self):
        _C._profiler_range_push(self.name)
        return self

    def __exit__(self, *exc):
        _C._profiler_range_pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*a, **kw):
            with record_function(self.name):
                return fn(*a, **kw)
        return wrapped
