"""Memory formats vs torch: Tensor.to / contiguous / clone / is_contiguous with channels_last and
channels_last_3d give torch's strides (size-1 dims, already-formatted and sliced inputs too),
Module.to(memory_format=) re-lays the 4-d parameters; channels_last inputs through conv, pooling,
norms and interpolate give torch's values and gradients. kiln's op outputs stay contiguous (pinned
here; torch's follow the input's format)."""
import pytest
import torch

import kiln
from helpers import assert_same, to_kiln

CL = {torch: torch.channels_last, kiln: kiln.channels_last}
CL3 = {torch: torch.channels_last_3d, kiln: kiln.channels_last_3d}
CF = {torch: torch.contiguous_format, kiln: kiln.contiguous_format}
PF = {torch: torch.preserve_format, kiln: kiln.preserve_format}


def both(x, fn):
    return fn(kiln, to_kiln(x)), fn(torch, x)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 3, 1, 5), (2, 1, 4, 4), (3, 2, 1, 1)])
def test_channels_last_strides(shape):
    x = torch.randn(*shape)
    fns = [lambda m, t: t.to(memory_format=CL[m]), lambda m, t: t.contiguous(memory_format=CL[m]),
           lambda m, t: t.clone(memory_format=CL[m]), lambda m, t: t.to(memory_format=CL[m]).clone(
               memory_format=CF[m]), lambda m, t: t.to(m.float64, memory_format=CL[m])]
    if 1 not in shape:
        # a channels-last tensor with a size-1 dim is also contiguous: torch's contiguous() / clone() then
        # keep its exact strides, kiln's give the plain contiguous ones (a dense clone is contiguous in kiln)
        fns += [lambda m, t: t.to(memory_format=CL[m]).contiguous(), lambda m, t: t.to(memory_format=CL[m]).clone()]
    for fn in fns:
        k, t = both(x, fn)
        assert k.stride() == t.stride() and k.shape == t.shape
        assert_same(k, t)
    k, t = both(x, lambda m, t: t.to(memory_format=CL[m]))
    for fmt in (CL, CF, PF):
        if fmt is PF:
            continue
        assert k.is_contiguous(memory_format=fmt[kiln]) == t.is_contiguous(memory_format=fmt[torch])
    sliced = torch.randn(2, 6, 4, 5)[:, ::2]
    k, t = both(sliced, lambda m, t: t.contiguous(memory_format=CL[m]))
    assert k.stride() == t.stride()


def test_channels_last_3d_and_errors():
    x = torch.randn(2, 3, 4, 5, 6)
    k, t = both(x, lambda m, t: t.to(memory_format=CL3[m]))
    assert k.stride() == t.stride()
    assert k.is_contiguous(memory_format=kiln.channels_last_3d) and not k.is_contiguous()
    for lib in (torch, kiln):
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            (torch.randn(3, 4) if lib is torch else kiln.randn(3, 4)).contiguous(memory_format=CL[lib])
        with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
            (torch.randn(3, 4) if lib is torch else kiln.randn(3, 4)).contiguous(memory_format=CL3[lib])
    assert repr(kiln.channels_last) == "kiln.channels_last"


def test_module_to_and_layers_on_channels_last():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                             torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 4, 1)).double()
    km = kiln.nn.Sequential(kiln.nn.Conv2d(3, 8, 3, padding=1), kiln.nn.BatchNorm2d(8), kiln.nn.ReLU(),
                            kiln.nn.MaxPool2d(2), kiln.nn.Conv2d(8, 4, 1)).to(kiln.float64)
    km.load_state_dict({k: to_kiln(v) for k, v in tm.state_dict().items()})
    tm, km = tm.to(memory_format=torch.channels_last), km.to(memory_format=kiln.channels_last)
    assert km[0].weight.stride() == tm[0].weight.stride() and km[0].weight.is_leaf
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64).to(memory_format=torch.channels_last)
    res = {}
    for lib, m in ((torch, tm), (kiln, km)):
        xi = (x if lib is torch else to_kiln(x)).detach().requires_grad_()
        y = m(xi)
        y = lib.nn.functional.interpolate(y, scale_factor=2, mode="bilinear")
        y.square().sum().backward()
        res[lib] = (y.detach(), xi.grad, m[0].weight.grad)
        if lib is kiln:
            assert y.is_contiguous()  # kiln's choice: outputs are contiguous
    for k, t in zip(res[kiln], res[torch]):
        assert_same(k, t, rtol=1e-9, atol=1e-9)
