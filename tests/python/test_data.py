"""kiln.utils.data against torch.utils.data (same datasets; order-independent checks where RNGs differ)."""
import collections

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import kiln
import kiln.utils.data as kud

from helpers import to_kiln


def as_np(x):
    if isinstance(x, (list, tuple)):
        return [as_np(v) for v in x]
    if isinstance(x, dict):
        return {k: as_np(v) for k, v in x.items()}
    return x.numpy()


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (10, False), (4, True)])
def test_dataloader_sequential_matches_torch(batch_size, drop_last):
    x, y = torch.randn(10, 3), torch.arange(10)
    kd = kud.TensorDataset(to_kiln(x), to_kiln(y))
    td = tud.TensorDataset(x, y)
    kl = kud.DataLoader(kd, batch_size=batch_size, drop_last=drop_last)
    tl = tud.DataLoader(td, batch_size=batch_size, drop_last=drop_last)
    assert len(kl) == len(tl)
    kb, tb = list(kl), list(tl)
    assert len(kb) == len(tb)
    for a, b in zip(kb, tb):
        assert isinstance(a, list) and len(a) == 2
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u.numpy(), v.numpy())
            assert u.dtype == to_kiln(v).dtype


def test_shuffle_is_a_permutation_and_seeded():
    d = kud.TensorDataset(kiln.arange(50))
    g = kiln.Generator().manual_seed(5)
    first = [int(v) for b in kud.DataLoader(d, batch_size=7, shuffle=True, generator=g) for v in b[0]]
    assert sorted(first) == list(range(50)) and first != list(range(50))
    g2 = kiln.Generator().manual_seed(5)
    again = [int(v) for b in kud.DataLoader(d, batch_size=7, shuffle=True, generator=g2) for v in b[0]]
    assert first == again
    second_epoch = [int(v) for b in kud.DataLoader(d, batch_size=7, shuffle=True, generator=g) for v in b[0]]
    assert second_epoch != first


def test_default_collate_structures_match_torch():
    samples = [{"a": (float(i), i), "b": [torch.full((2,), i)], "c": "s"} for i in range(3)]
    ksamples = [{"a": s["a"], "b": [to_kiln(s["b"][0])], "c": s["c"]} for s in samples]
    kc, tc = kud.default_collate(ksamples), tud.default_collate(samples)
    assert kc.keys() == tc.keys() and kc["c"] == tc["c"]
    for u, v in zip(kc["a"], tc["a"]):
        np.testing.assert_array_equal(u.numpy(), v.numpy())
        assert str(u.dtype).split(".")[-1] == str(v.dtype).split(".")[-1]
    np.testing.assert_array_equal(kc["b"][0].numpy(), tc["b"][0].numpy())
    P = collections.namedtuple("P", "x y")
    kp = kud.default_collate([P(1, 2.0), P(3, 4.0)])
    tp = tud.default_collate([P(1, 2.0), P(3, 4.0)])
    assert type(kp).__name__ == "P" and kp.x.tolist() == tp.x.tolist() and kp.y.tolist() == tp.y.tolist()
    assert kud.default_collate([True, False]).dtype == kiln.bool


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.34, 0.33, 0.33], [10, 0]])
def test_random_split_sizes_match_torch(lengths):
    kd, td = kud.TensorDataset(kiln.arange(10)), tud.TensorDataset(torch.arange(10))
    ks = kud.random_split(kd, lengths, generator=kiln.Generator().manual_seed(0))
    ts = tud.random_split(td, lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ks] == [len(s) for s in ts]
    allidx = sorted(int(s[i][0]) for s in ks for i in range(len(s)))
    assert allidx == list(range(10))


def test_random_split_errors():
    d = kud.TensorDataset(kiln.arange(10))
    with pytest.raises(ValueError):
        kud.random_split(d, [3, 3])
    with pytest.raises(ValueError):
        tud.random_split(tud.TensorDataset(torch.arange(10)), [3, 3])


def test_tensor_dataset_and_subset_concat():
    with pytest.raises(AssertionError):
        kud.TensorDataset(kiln.zeros(3), kiln.zeros(4))
    d = kud.TensorDataset(kiln.arange(5), kiln.arange(5) * 2)
    assert len(d) == 5 and int(d[2][1]) == 4
    s = kud.Subset(d, [4, 0])
    assert int(s[0][0]) == 4 and len(s) == 2
    c = d + s
    assert len(c) == 7 and int(c[5][0]) == 4 and int(c[-1][0]) == 0


def test_samplers_and_errors():
    d = list(range(10))
    assert list(kud.BatchSampler(kud.SequentialSampler(d), 3, False)) == list(tud.BatchSampler(tud.SequentialSampler(d), 3, False))
    assert len(kud.BatchSampler(kud.SequentialSampler(d), 3, True)) == 3
    rs = list(kud.RandomSampler(d, replacement=True, num_samples=25, generator=kiln.Generator().manual_seed(1)))
    assert len(rs) == 25 and all(0 <= i < 10 for i in rs)
    for bad in (0, -1, True):
        with pytest.raises(ValueError):
            kud.BatchSampler(d, bad, False)
        with pytest.raises(ValueError):
            tud.BatchSampler(d, bad, False)
    with pytest.raises(ValueError):
        kud.DataLoader(d, sampler=kud.SequentialSampler(d), shuffle=True)


def test_iterable_dataset_and_plain_list():
    class Stream(kud.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    class TStream(tud.IterableDataset):
        def __iter__(self):
            return iter(range(7))
    kb = [b.tolist() for b in kud.DataLoader(Stream(), batch_size=3)]
    tb = [b.tolist() for b in tud.DataLoader(TStream(), batch_size=3)]
    assert kb == tb
    assert [b.tolist() for b in kud.DataLoader([1, 2, 3, 4], batch_size=2)] == \
        [b.tolist() for b in tud.DataLoader([1, 2, 3, 4], batch_size=2)]
    assert list(kud.DataLoader([5, 6], batch_size=None)) == [5, 6]
