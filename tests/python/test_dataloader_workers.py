"""DataLoader with worker processes vs torch: the same batches in the same order for map-style and
iterable datasets (sharded with get_worker_info), drop_last, batch_sampler, in_order, persistent
workers over several epochs, worker_init_fn and per-worker seeds, an exception in a worker re-raised
with its type, a worker that dies, timeouts, torch's argument errors; and kiln surviving fork(): a
child of a process that used two threads computes on two (a fresh pool) instead of hanging."""
import os
import time

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import kiln
import kiln.utils.data as kdata
from helpers import to_kiln

LIB = {torch: tdata, kiln: kdata}


class Squares:  # map-style, shared by both libraries
    def __init__(self, lib, n=23):
        self.lib, self.n = lib, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.lib.tensor([i, i * i]), i


def _iterable(lib):
    class Shards(LIB[lib].IterableDataset):
        def __iter__(self):
            info = LIB[lib].get_worker_info()
            start, step = (0, 1) if info is None else (info.id, info.num_workers)
            return iter(lib.tensor(float(i)) for i in range(start, 13, step))
    return Shards()


def as_lists(batches):
    out = []
    for b in batches:
        if isinstance(b, (list, tuple)):
            out.append([x if isinstance(x, int) else x.tolist() for x in b])
        else:
            out.append(b.tolist())
    return out


@pytest.mark.parametrize("kw", [dict(batch_size=4), dict(batch_size=4, drop_last=True), dict(batch_size=None),
                                dict(batch_size=3, num_workers=3, prefetch_factor=1),
                                dict(batch_size=5, in_order=False)])
def test_map_style_matches_torch(kw):
    kw = dict(kw)
    workers = kw.pop("num_workers", 2)
    got = {lib: as_lists(LIB[lib].DataLoader(Squares(lib), num_workers=workers, **kw)) for lib in (torch, kiln)}
    if kw.get("in_order") is False:
        assert sorted(map(str, got[kiln])) == sorted(map(str, got[torch]))
    else:
        assert got[kiln] == got[torch]


@pytest.mark.parametrize("batch_size", [None, 2, 3])
def test_iterable_sharded_matches_torch(batch_size):
    got = {lib: as_lists(LIB[lib].DataLoader(_iterable(lib), batch_size=batch_size, num_workers=2))
           for lib in (torch, kiln)}
    assert got[kiln] == got[torch]


def test_persistent_workers_and_batch_sampler():
    for lib in (torch, kiln):
        bs = LIB[lib].BatchSampler(LIB[lib].SequentialSampler(range(10)), 3, False)
        dl = LIB[lib].DataLoader(Squares(lib, 10), batch_sampler=bs, num_workers=2, persistent_workers=True)
        epochs = [as_lists(dl) for _ in range(3)]
        assert epochs[0] == epochs[1] == epochs[2]
        assert len(dl) == 4


def _record_seed(_):
    info = kdata.get_worker_info()
    assert info.dataset is not None and info.num_workers == 2
    np.save(f"/tmp/kiln_worker_seed_{os.getpid()}_{info.id}.npy", np.array([info.seed, kiln.initial_seed()]))


def test_worker_init_fn_and_seeds():
    class Draw(kdata.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            info = kdata.get_worker_info()
            return kiln.tensor([info.id, info.seed % 1000]), kiln.rand(())

    kiln.manual_seed(5)
    a = list(kdata.DataLoader(Draw(), batch_size=None, num_workers=2, worker_init_fn=_record_seed))
    kiln.manual_seed(5)
    b = list(kdata.DataLoader(Draw(), batch_size=None, num_workers=2))
    ids = [int(x[0][0]) for x in a]
    assert ids == [0, 1, 0, 1]                                      # round-robin
    seeds = {int(x[0][0]): int(x[0][1]) for x in a}
    assert seeds[0] != seeds[1]                                       # one seed per worker
    assert [float(x[1]) for x in a] == [float(x[1]) for x in b]       # reproducible from the main seed
    assert kdata.get_worker_info() is None


class Failing(kdata.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 4:
            raise KeyError("no item 4")
        return i


class Dying(kdata.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            os._exit(3)
        return i


class Slow(kdata.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(3)
        return i


def test_worker_errors():
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 0"):
        list(kdata.DataLoader(Failing(), batch_size=None, num_workers=2))
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(kdata.DataLoader(Dying(), batch_size=None, num_workers=1))
    with pytest.raises(RuntimeError, match="DataLoader timed out after 1 seconds"):
        list(kdata.DataLoader(Slow(), batch_size=None, num_workers=1, timeout=1))


def test_argument_errors_as_torch():
    for lib in (torch, kiln):
        ds = Squares(lib)
        with pytest.raises(ValueError, match="num_workers option should be non-negative"):
            LIB[lib].DataLoader(ds, num_workers=-1)
        with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
            LIB[lib].DataLoader(ds, persistent_workers=True)
        with pytest.raises(ValueError, match="prefetch_factor option could only be specified in multiprocessing"):
            LIB[lib].DataLoader(ds, prefetch_factor=2)
        with pytest.raises(ValueError, match="timeout option should be non-negative"):
            LIB[lib].DataLoader(ds, timeout=-1)


def test_fork_after_threads_does_not_hang():
    prev = kiln.get_num_threads()
    kiln.set_num_threads(2)
    a = kiln.randn(256, 256)
    (a @ a).sum()
    kiln.randn(1 << 20).exp().sum()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a fresh thread pool, not the parent's (which it would wait for forever)
        try:
            ok = kiln.get_num_threads() == 2
            ok = ok and bool(kiln.allclose((a @ a).sum(), (a @ a).sum()))
            ok = ok and bool(kiln.isfinite(kiln.randn(1 << 20).exp().sum()))
            kiln.set_num_threads(2)
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail("the forked child hung")
    assert os.read(r, 1) == b"1"
    kiln.set_num_threads(prev)
