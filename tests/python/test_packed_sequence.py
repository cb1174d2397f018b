"""nn.utils.rnn's PackedSequence vs torch: pack_padded_sequence / pad_packed_sequence / pack_sequence /
unpack_sequence / unpad_sequence (sorted and unsorted, batch_first, total_length, padding_value, the
gradient back to the padded input), and RNN / LSTM / GRU over a PackedSequence with the same weights:
outputs, final states and gradients for one and two layers, both directions, projections, initial
states in the caller's batch order; torch's errors."""
import itertools

import pytest
import torch
import torch.nn.utils.rnn as trnn

import kiln
import kiln.nn.utils.rnn as krnn
from helpers import assert_same, to_kiln

MOD = {torch: trnn, kiln: krnn}


def rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,enforce", [([5, 3, 3, 1], True), ([2, 5, 1, 4], False), ([4], True),
                                             ([3, 3], True)])
def test_pack_and_pad_round_trip(lengths, enforce, batch_first):
    B, T = len(lengths), max(lengths)
    x = rand(B, T, 3) if batch_first else rand(T, B, 3)
    res = {}
    for lib in (torch, kiln):
        xi = (x if lib is torch else to_kiln(x)).clone().requires_grad_()
        p = MOD[lib].pack_padded_sequence(xi, lengths, batch_first=batch_first, enforce_sorted=enforce)
        padded, lens = MOD[lib].pad_packed_sequence(p, batch_first=batch_first, padding_value=-1.0, total_length=T + 1)
        (padded * (padded.detach() + 2)).sum().backward()
        res[lib] = (p.data.detach(), p.batch_sizes, p.sorted_indices, p.unsorted_indices, padded.detach(), lens,
                    xi.grad)
    for k, t in zip(res[kiln], res[torch]):
        if t is None:
            assert k is None
        else:
            assert_same(k, t)


def test_pack_sequence_and_unpack():
    seqs = [rand(n, 2, seed=n) for n in (2, 4, 1)]
    for lib in (torch, kiln):
        s = seqs if lib is torch else [to_kiln(v) for v in seqs]
        p = MOD[lib].pack_sequence(s, enforce_sorted=False)
        back = MOD[lib].unpack_sequence(p)
        for a, b in zip(back, s):
            assert lib.equal(a, b)
        padded = MOD[lib].pad_sequence(s, batch_first=True)
        for a, b in zip(MOD[lib].unpad_sequence(padded, lib.tensor([2, 4, 1]), batch_first=True), s):
            assert lib.equal(a, b)
    tp = trnn.pack_sequence(seqs, enforce_sorted=False)
    kp = krnn.pack_sequence([to_kiln(v) for v in seqs], enforce_sorted=False)
    assert_same(kp.data, tp.data)
    assert kp.batch_sizes.tolist() == tp.batch_sizes.tolist()
    assert isinstance(kp, tuple) and kp._fields == tp._fields


CASES = list(itertools.product(["RNN", "LSTM", "GRU"], [1, 2], [False, True]))


@pytest.mark.parametrize("cls,layers,bidirectional", CASES)
def test_recurrent_layers_over_packed(cls, layers, bidirectional):
    lengths = [3, 6, 1, 4]
    B, T, I, H = 4, 6, 3, 5
    kw = dict(num_layers=layers, bidirectional=bidirectional)
    if cls == "LSTM" and layers == 2:
        kw["proj_size"] = 2
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(I, H, **kw).double()
    km = getattr(kiln.nn, cls)(I, H, **kw, dtype=kiln.float64)
    km.load_state_dict({k: to_kiln(v.detach()) for k, v in tm.state_dict().items()})
    x = rand(T, B, I, seed=1)
    dirs = 2 if bidirectional else 1
    R = kw.get("proj_size", H)
    h0 = rand(layers * dirs, B, R, seed=2)
    c0 = rand(layers * dirs, B, H, seed=3)
    res = {}
    for lib, m in ((torch, tm), (kiln, km)):
        conv = (lambda t: t) if lib is torch else to_kiln  # noqa: E731
        xi = conv(x).clone().requires_grad_()
        hi = conv(h0).clone().requires_grad_()
        p = MOD[lib].pack_padded_sequence(xi, lengths, enforce_sorted=False)
        state = (hi, conv(c0)) if cls == "LSTM" else hi
        out, hn = m(p, state)
        padded, _ = MOD[lib].pad_packed_sequence(out)
        hn = hn[0] if cls == "LSTM" else hn
        (padded.square().sum() + hn.sum()).backward()
        res[lib] = (padded.detach(), hn.detach(), xi.grad, hi.grad, m.weight_hh_l0.grad)
    for k, t in zip(res[kiln], res[torch]):
        assert_same(k, t, rtol=1e-9, atol=1e-9)


def test_batch_first_module_and_no_initial_state():
    torch.manual_seed(0)
    tm = torch.nn.GRU(2, 3, batch_first=True).double()
    km = kiln.nn.GRU(2, 3, batch_first=True, dtype=kiln.float64)
    km.load_state_dict({k: to_kiln(v.detach()) for k, v in tm.state_dict().items()})
    x = rand(3, 4, 2)
    tp = trnn.pack_padded_sequence(x, [4, 2, 3], batch_first=True, enforce_sorted=False)
    kp = krnn.pack_padded_sequence(to_kiln(x), [4, 2, 3], batch_first=True, enforce_sorted=False)
    (to, th), (ko, kh) = tm(tp), km(kp)
    assert isinstance(ko, krnn.PackedSequence)
    assert_same(ko.data, to.data.detach(), rtol=1e-9, atol=1e-9)
    assert_same(kh, th.detach(), rtol=1e-9, atol=1e-9)


def test_errors():
    x = rand(4, 3, 2)
    for lib in (torch, kiln):
        xi = x if lib is torch else to_kiln(x)
        with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
            MOD[lib].pack_padded_sequence(xi, [2, 4, 1])
        with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
            MOD[lib].pack_padded_sequence(xi, [3, 2, 0])
        with pytest.raises(RuntimeError, match="Expected `len\\(lengths\\)` to be equal to batch_size"):
            MOD[lib].pack_padded_sequence(xi, [3, 2])
        p = MOD[lib].pack_padded_sequence(xi, [4, 2, 1])
        with pytest.raises(ValueError, match="Expected total_length to be at least"):
            MOD[lib].pad_packed_sequence(p, total_length=2)
