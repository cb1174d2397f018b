"""DataLoader worker processes (torch.utils.data's multiprocessing loader): each worker fetches and
collates the batches whose indices it is sent and puts them on one result queue; the main process
hands out indices round-robin, keeps prefetch_factor batches in flight per worker and yields in
order. Tensors travel by pickling (kiln.save's format). kiln itself runs on one thread in a forked
worker (see kiln/backend/cpu/parallel.cpp)."""
import itertools
import os
import queue
import random
import sys
import traceback

_STATUS_CHECK_INTERVAL = 5.0
_worker_info = None


class WorkerInfo:
    def __init__(self, **kwargs):
        self.__keys = tuple(kwargs.keys())
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__initialized = True

    def __setattr__(self, key, val):
        if self.__dict__.get("_WorkerInfo__initialized", False):
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        return super().__setattr__(key, val)

    def __repr__(self):
        return f"{self.__class__.__name__}({', '.join(f'{k}={getattr(self, k)}' for k in self.__keys)})"


def get_worker_info():
    """In a DataLoader worker: its id, num_workers, seed and its copy of the dataset; None elsewhere."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process and raised there again."""

    def __init__(self, exc_info=None, where="in background"):
        exc_info = exc_info or sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            raise KeyError(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:  # noqa: BLE001
            raise RuntimeError(msg) from None
        raise exception


class _StopIteration:
    def __init__(self, worker_id):
        self.worker_id = worker_id


class _Resume:
    pass


def _fetcher(dataset, iterable, auto_collation, collate_fn, drop_last, batch_size):
    if not iterable:
        if auto_collation:
            return lambda index: collate_fn([dataset[i] for i in index])
        return lambda index: collate_fn(dataset[index])
    it = iter(dataset)

    def fetch(_):
        if batch_size is None:
            return collate_fn(next(it))
        batch = list(itertools.islice(it, batch_size))
        if not batch or (drop_last and len(batch) < batch_size):
            raise StopIteration
        return collate_fn(batch)
    return fetch


def worker_loop(dataset, iterable, index_queue, data_queue, done_event, auto_collation, collate_fn, drop_last,
                batch_size, base_seed, init_fn, worker_id, num_workers):
    global _worker_info
    import kiln
    try:
        kiln.set_num_threads(1)
        seed = base_seed + worker_id
        random.seed(seed)
        kiln.manual_seed(seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetch = _fetcher(dataset, iterable, auto_collation, collate_fn, drop_last, batch_size)
        except Exception:  # noqa: BLE001
            init_error = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
        parent = os.getppid()
        exhausted = False
        while True:
            try:
                r = index_queue.get(timeout=_STATUS_CHECK_INTERVAL)
            except queue.Empty:
                if done_event.is_set() or os.getppid() != parent:
                    break
                continue
            if r is None:
                break
            if isinstance(r, _Resume):
                data_queue.put((r, None))
                exhausted = False
                if init_error is None:
                    fetch = _fetcher(dataset, iterable, auto_collation, collate_fn, drop_last, batch_size)
                continue
            if done_event.is_set() or exhausted:
                continue
            idx, index = r
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetch(index)
                except StopIteration:
                    if not iterable:
                        raise
                    data, exhausted = _StopIteration(worker_id), True
                except Exception:  # noqa: BLE001
                    data = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
            data_queue.put((idx, data))
            del data
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        data_queue.cancel_join_thread()
        data_queue.close()


class MultiProcessingIter:
    """The main process's side: hands out indices, collects batches in order, watches the workers."""

    def __init__(self, loader):
        import multiprocessing
        import kiln
        self._shutdown = True  # nothing to shut down until the workers start
        self._loader = loader
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self._num_workers = loader.num_workers
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        if cpus and self._num_workers > cpus:
            import warnings
            warnings.warn(f"This DataLoader will create {self._num_workers} worker processes in total. Our suggested "
                          f"max number of worker in current system is {cpus}, which is smaller than what this "
                          "DataLoader is going to create. Please be aware that excessive worker creation might get "
                          "DataLoader running slow or even freeze, lower the worker number to avoid potential "
                          "slowness/freeze if necessary.")
        self._prefetch = loader.prefetch_factor
        self._timeout = loader.timeout
        self._in_order = loader.in_order
        self._persistent = loader.persistent_workers
        base_seed = int(kiln.randint(0, 2 ** 62, (), generator=loader.generator).item())
        self._done_event = ctx.Event()
        self._data_queue = ctx.Queue()
        self._index_queues, self._workers = [], []
        for i in range(self._num_workers):
            q = ctx.Queue()
            q.cancel_join_thread()
            w = ctx.Process(target=worker_loop, daemon=True,
                            args=(loader.dataset, loader._iterable, q, self._data_queue, self._done_event,
                                  loader._auto_collation, loader.collate_fn, loader.drop_last,
                                  loader.batch_size if loader._iterable else None, base_seed,
                                  loader.worker_init_fn, i, self._num_workers))
            w.start()
            self._index_queues.append(q)
            self._workers.append(w)
        self._shutdown = False
        self._reset(first=True)

    def _reset(self, first=False):
        self._sampler_iter = iter(self._loader._index_source())
        self._send_idx = self._rcvd_idx = 0
        self._task_info = {}
        self._active = [True] * self._num_workers
        self._cycle = itertools.cycle(range(self._num_workers))
        if not first:  # persistent workers: a new epoch
            for q in self._index_queues:
                q.put(_Resume())
            acks = 0
            while acks < self._num_workers:
                r, _ = self._get_data()
                if isinstance(r, _Resume):
                    acks += 1
        for _ in range(self._prefetch * self._num_workers):
            self._put_index()

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def _put_index(self):
        if not any(self._active):
            return
        for _ in range(self._num_workers):
            w = next(self._cycle)
            if self._active[w]:
                break
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        self._index_queues[w].put((self._send_idx, index))
        self._task_info[self._send_idx] = (w,)
        self._send_idx += 1

    def _get_data(self):
        import time
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _STATUS_CHECK_INTERVAL if deadline is None else min(_STATUS_CHECK_INTERVAL,
                                                                        max(0.0, deadline - time.monotonic()))
            try:
                return self._data_queue.get(timeout=wait)
            except queue.Empty:
                dead = [w for w in self._workers if not w.is_alive()]
                if dead:
                    pids = ", ".join(str(w.pid) for w in dead)
                    self._shutdown_workers()
                    raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None

    def __next__(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is None:  # handed out already (in_order=False)
                    self._rcvd_idx += 1
                    continue
                if len(info) == 2 or self._active[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]  # its worker ran out (iterable dataset)
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            info = self._task_info.get(self._rcvd_idx)
            if info is not None and len(info) == 2:
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process(info[1])
            idx, data = self._get_data()
            if isinstance(idx, _Resume):
                continue
            if isinstance(data, _StopIteration):
                self._active[data.worker_id] = False
                self._task_info.pop(idx, None)
                if idx == self._rcvd_idx:
                    self._rcvd_idx += 1
                continue
            if idx != self._rcvd_idx and self._in_order:
                self._task_info[idx] += (data,)
                continue
            self._task_info.pop(idx, None)
            if idx == self._rcvd_idx:
                self._rcvd_idx += 1
            return self._process(data)

    def _process(self, data):
        self._put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        try:
            self._done_event.set()
            for q in self._index_queues:
                q.put(None)
            for w in self._workers:
                w.join(timeout=_STATUS_CHECK_INTERVAL)
                if w.is_alive():
                    w.terminate()
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
            self._data_queue.cancel_join_thread()
            self._data_queue.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass

    def __del__(self):
        self._shutdown_workers()
