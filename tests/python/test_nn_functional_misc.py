"""F.normalize, F.cosine_similarity, F.pairwise_distance, F.pixel_shuffle / pixel_unshuffle, F.prelu and
the layers over them (PixelShuffle, PixelUnshuffle, Softmax2d, CosineSimilarity, PairwiseDistance,
PReLU) against torch: values (float32/float64, contiguous and strided, broadcasting, zeros), gradients,
and the errors torch raises."""
import numpy as np
import pytest
import torch

import kiln
from helpers import to_kiln, to_torch


def both(fn_k, fn_t, *arrays, grad=True, rtol=1e-5, atol=1e-6):
    """Runs fn on kiln and torch copies of the arrays; compares outputs and input gradients."""
    ts = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    ks = [to_kiln(t.detach()).requires_grad_(t.requires_grad) for t in ts]
    to, ko = fn_t(*ts), fn_k(*ks)
    np.testing.assert_allclose(to_torch(ko.detach()).numpy(), to.detach().numpy(), rtol=rtol, atol=atol)
    assert tuple(ko.shape) == tuple(to.shape) and str(ko.dtype).split(".")[-1] == str(to.dtype).split(".")[-1]
    if grad and any(t.requires_grad for t in ts):
        w = np.random.default_rng(1).standard_normal(tuple(to.shape)).astype(arrays[0].dtype)
        (to * torch.tensor(w)).sum().backward()
        (ko * to_kiln(torch.tensor(w))).sum().backward()
        for t, k in zip(ts, ks):
            if t.requires_grad:
                np.testing.assert_allclose(to_torch(k.grad).numpy(), t.grad.numpy(), rtol=rtol * 10, atol=atol * 10)


RNG = np.random.default_rng(0)


def arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0), (float("inf"), 1)])
def test_normalize(dtype, p, dim):
    x = arr(3, 4, 5, dtype=dtype)
    x[1, :, 2] = 0  # a zero slice: the eps clamp
    both(lambda a: kiln.nn.functional.normalize(a, p, dim), lambda a: torch.nn.functional.normalize(a, p, dim), x)
    both(lambda a: kiln.nn.functional.normalize(a.transpose(0, 2), p, dim),
         lambda a: torch.nn.functional.normalize(a.transpose(0, 2), p, dim), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cosine_similarity_and_pairwise_distance(dtype):
    a, b = arr(4, 6, dtype=dtype), arr(1, 6, dtype=dtype)
    a[2] = 0
    for kw in [{}, {"dim": 0}, {"dim": -1, "eps": 0.5}]:
        both(lambda x, y: kiln.nn.functional.cosine_similarity(x, y, **kw),
             lambda x, y: torch.nn.functional.cosine_similarity(x, y, **kw), a, b)
    for kw in [{}, {"p": 1.0}, {"p": 3.0, "eps": 0.0, "keepdim": True}]:
        both(lambda x, y: kiln.nn.functional.pairwise_distance(x, y, **kw),
             lambda x, y: torch.nn.functional.pairwise_distance(x, y, **kw), a, b)
    both(lambda x, y: kiln.nn.CosineSimilarity(dim=0)(x, y), lambda x, y: torch.nn.CosineSimilarity(dim=0)(x, y),
         arr(5, 3, dtype=dtype), arr(5, 3, dtype=dtype))
    both(lambda x, y: kiln.nn.PairwiseDistance(keepdim=True)(x, y),
         lambda x, y: torch.nn.PairwiseDistance(keepdim=True)(x, y), arr(5, 3, dtype=dtype), arr(5, 3, dtype=dtype))
    # integer inputs go through the common floating dtype; all-integer raises as torch does
    both(lambda x, y: kiln.cosine_similarity(x, y.to(kiln.int64)), lambda x, y: torch.cosine_similarity(x, y.long()),
         arr(3, 4, dtype=dtype), np.arange(12, dtype=dtype).reshape(3, 4), grad=False)
    for m in (kiln, torch):
        with pytest.raises(RuntimeError, match="floating point"):
            m.cosine_similarity(m.ones(2, 3, dtype=m.int64), m.ones(2, 3, dtype=m.int64))


def test_pixel_shuffle():
    x = arr(2, 18, 4, 5)
    both(lambda a: kiln.nn.functional.pixel_shuffle(a, 3), lambda a: torch.nn.functional.pixel_shuffle(a, 3), x)
    both(lambda a: kiln.nn.functional.pixel_unshuffle(a, 2), lambda a: torch.nn.functional.pixel_unshuffle(a, 2),
         arr(3, 2, 4, 6))
    both(lambda a: kiln.nn.PixelUnshuffle(2)(kiln.nn.PixelShuffle(2)(a)), lambda a: a * 1, arr(1, 2, 8, 3, 3))
    both(lambda a: kiln.pixel_shuffle(a, 2), lambda a: torch.pixel_shuffle(a, 2), arr(8, 2, 2))  # no batch dims
    for m in (kiln, torch):
        for bad in [lambda: m.pixel_shuffle(m.ones(4, 2), 2), lambda: m.pixel_shuffle(m.ones(1, 7, 2, 2), 2),
                    lambda: m.pixel_shuffle(m.ones(1, 4, 2, 2), 0), lambda: m.pixel_unshuffle(m.ones(1, 1, 3, 4), 2),
                    lambda: m.pixel_unshuffle(m.ones(1, 1, 4, 3), 2)]:
            with pytest.raises(RuntimeError):
                bad()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prelu(dtype):
    x = arr(2, 3, 4, dtype=dtype)
    x[0, 0, 0] = 0
    both(lambda a, w: kiln.nn.functional.prelu(a, w), lambda a, w: torch.nn.functional.prelu(a, w),
         x, np.array([0.1, -0.3, 0.7], dtype=dtype))
    both(lambda a, w: kiln.prelu(a, w), lambda a, w: torch.prelu(a, w), x, np.array([0.2], dtype=dtype))
    both(lambda a, w: kiln.prelu(a, w), lambda a, w: torch.prelu(a, w), arr(5, dtype=dtype), np.array([0.2], dtype=dtype))
    km, tm = kiln.nn.PReLU(3, init=0.1), torch.nn.PReLU(3, init=0.1)
    xs = arr(4, 3, 2)
    kout, tout = km(to_kiln(torch.tensor(xs))), tm(torch.tensor(xs))
    np.testing.assert_allclose(to_torch(kout.detach()).numpy(), tout.detach().numpy(), rtol=1e-6)
    kout.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(to_torch(km.weight.grad).numpy(), tm.weight.grad.numpy(), rtol=1e-5)
    assert repr(km) == repr(tm) and [n for n, _ in km.named_parameters()] == ["weight"]
    for m in (kiln, torch):
        with pytest.raises(RuntimeError, match="Mismatch of parameter numbers"):
            m.prelu(m.ones(2, 3), m.ones(2))
        with pytest.raises(RuntimeError, match="scalar or 1D"):
            m.prelu(m.ones(2, 3), m.ones(1, 3))


def test_softmax2d():
    both(lambda a: kiln.nn.Softmax2d()(a), lambda a: torch.nn.Softmax2d()(a), arr(2, 3, 4, 5))
    both(lambda a: kiln.nn.Softmax2d()(a), lambda a: torch.nn.Softmax2d()(a), arr(3, 4, 5))
    assert repr(kiln.nn.Softmax2d()) == repr(torch.nn.Softmax2d())
    assert repr(kiln.nn.PixelShuffle(3)) == repr(torch.nn.PixelShuffle(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_instance_norm_functional(dtype):
    x = arr(3, 4, 5, 6, dtype=dtype)
    both(lambda a: kiln.nn.functional.instance_norm(a), lambda a: torch.nn.functional.instance_norm(a), x)
    both(lambda a, w, b: kiln.nn.functional.instance_norm(a, weight=w, bias=b, eps=1e-3),
         lambda a, w, b: torch.nn.functional.instance_norm(a, weight=w, bias=b, eps=1e-3),
         x, arr(4, dtype=dtype), arr(4, dtype=dtype))
    # running statistics: updated with the mean over the batch of per-sample statistics
    rm_t, rv_t = torch.zeros(4, dtype=torch.tensor(x).dtype), torch.ones(4, dtype=torch.tensor(x).dtype)
    rm_k, rv_k = to_kiln(rm_t.clone()), to_kiln(rv_t.clone())
    torch.nn.functional.instance_norm(torch.tensor(x), rm_t, rv_t, momentum=0.3)
    kiln.nn.functional.instance_norm(to_kiln(torch.tensor(x)), rm_k, rv_k, momentum=0.3)
    np.testing.assert_allclose(to_torch(rm_k).numpy(), rm_t.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(to_torch(rv_k).numpy(), rv_t.numpy(), rtol=1e-5, atol=1e-7)
    for m in (kiln, torch):
        with pytest.raises(ValueError, match="more than 1 spatial element"):
            m.nn.functional.instance_norm(m.ones(2, 3, 1))


@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (2, 3, 7)), ("InstanceNorm1d", (3, 7)),
                                       ("InstanceNorm2d", (2, 3, 4, 5)), ("InstanceNorm3d", (2, 3, 2, 3, 4))])
@pytest.mark.parametrize("kw", [{}, {"affine": True}, {"affine": True, "bias": False},
                                {"track_running_stats": True, "momentum": 0.2}])
def test_instance_norm_layers(cls, shape, kw):
    km, tm = getattr(kiln.nn, cls)(3, **kw), getattr(torch.nn, cls)(3, **kw)
    assert repr(km) == repr(tm)
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in km.named_buffers()] == [n for n, _ in tm.named_buffers()]
    x = arr(*shape)
    for training in (True, False):
        km.train(training), tm.train(training)
        both(lambda a: km(a), lambda a: tm(a), x)
    for (n, kb), (_, tb) in zip(km.named_buffers(), tm.named_buffers()):
        np.testing.assert_allclose(to_torch(kb).numpy(), tb.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)
    for m in (kiln, torch):
        with pytest.raises(ValueError, match="expected"):
            getattr(m.nn, cls)(3)(m.ones(*((2,) * (len(shape) + 2))))


def test_local_response_norm():
    for shape in [(2, 6, 5), (2, 6, 3, 4), (1, 7, 2, 2, 3)]:
        for size in (1, 2, 3, 5):
            both(lambda a: kiln.nn.functional.local_response_norm(a, size, alpha=0.1, beta=0.6, k=1.5),
                 lambda a: torch.nn.functional.local_response_norm(a, size, alpha=0.1, beta=0.6, k=1.5), arr(*shape))
    both(lambda a: kiln.nn.LocalResponseNorm(3)(a), lambda a: torch.nn.LocalResponseNorm(3)(a), arr(2, 5, 4, 4))
    assert repr(kiln.nn.LocalResponseNorm(3)) == repr(torch.nn.LocalResponseNorm(3))
    for m in (kiln, torch):
        with pytest.raises(ValueError, match="Expected 3D or higher"):
            m.nn.functional.local_response_norm(m.ones(2, 3), 2)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence(batch_first, side):
    from kiln.nn.utils.rnn import pad_sequence as kpad
    from torch.nn.utils.rnn import pad_sequence as tpad
    seqs = [arr(3, 2), arr(5, 2), arr(1, 2)]
    both(lambda *s: kpad(list(s), batch_first=batch_first, padding_value=-1.5, padding_side=side),
         lambda *s: tpad(list(s), batch_first=batch_first, padding_value=-1.5, padding_side=side), *seqs)
    both(lambda *s: kpad(s), lambda *s: tpad(s), arr(4), arr(2))  # 1-d sequences
    # mixed dtypes: the first one's; a tensor input is unbound along dim 0
    k = kpad([kiln.ones(2), kiln.arange(3)])
    t = tpad([torch.ones(2), torch.arange(3)])
    assert k.dtype == kiln.float32 and k.tolist() == t.tolist()
    assert kpad(kiln.ones(2, 3)).tolist() == tpad(torch.ones(2, 3)).tolist()
    for m, pad in ((kiln, kpad), (torch, tpad)):
        for bad in [lambda: pad([]), lambda: pad([m.ones(2, 3), m.ones(2, 4)]),
                    lambda: pad([m.ones(2)], padding_side="mid")]:
            with pytest.raises(RuntimeError):
                bad()


def test_threshold_inplace_and_argument_checks_like_torch():
    """F.threshold(inplace=True) writes its input (gradient zero where the value was written), and the
    checks torch's functional front ends make: hardtanh's bounds, celu's alpha, group_norm's num_groups,
    rms_norm's normalized_shape."""
    a = RNG.standard_normal(7).astype(np.float32)
    res = []
    for lib in (torch, kiln):
        leaf = lib.tensor(a.tolist(), requires_grad=True)
        x = leaf * 2
        y = lib.nn.functional.threshold(x, 0.5, -1.0, inplace=True)
        assert y is x
        x.sum().backward()
        res.append((x.tolist(), leaf.grad.tolist()))
        with pytest.raises(RuntimeError, match="leaf Variable"):
            lib.nn.functional.threshold(lib.ones(3, requires_grad=True), 0.5, 0.0, inplace=True)
        F_ = lib.nn.functional
        with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
            F_.hardtanh(lib.ones(3), 2.0, 1.0)
        assert F_.hardtanh(lib.full((2,), 3.0), 1.0, 1.0).tolist() == [1.0, 1.0]
        with pytest.raises(RuntimeError, match="alpha cannot be 0"):
            F_.celu(lib.ones(3), alpha=0.0)
        with pytest.raises(ZeroDivisionError):
            F_.group_norm(lib.ones(2, 4, 3), 0)
        for shape, ns in (((2, 3), (4,)), ((2, 3), (3, 2)), ((2, 3), ())):
            with pytest.raises(RuntimeError):
                F_.rms_norm(lib.ones(*shape), ns)
        with pytest.raises(ValueError, match="at least 3 dimensions"):
            F_.rms_norm(lib.ones(2, 3), (1, 2, 3))
        with pytest.raises(RuntimeError, match="weight"):
            F_.rms_norm(lib.ones(2, 3), (3,), weight=lib.ones(4))
        assert F_.rms_norm(lib.ones(2, 3), (2, 3)).shape == (2, 3)
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-6)
    assert res[1][1] == res[0][1]


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool", "complex64"])
def test_layer_norm_of_unsupported_dtype_raises_as_torch(dtype):
    """torch's NotImplementedError ("LayerNormKernelImpl" not implemented for 'Long'), naming the dtype."""
    x = torch.ones(2, 3, dtype=getattr(torch, dtype))
    with pytest.raises(NotImplementedError) as et:
        torch.nn.functional.layer_norm(x, (3,))
    with pytest.raises(NotImplementedError) as ek:
        kiln.nn.functional.layer_norm(to_kiln(x), (3,))
    assert str(et.value) in str(ek.value), (et.value, ek.value)
