"""Devices and the meta device (DESIGN.md section 2): torch.device's semantics, device= on the factory
functions, tensors without data on which every op runs its meta only, modules moved to "meta", and
the errors torch raises where data would be needed. Compared with torch's own meta tensors."""
import pickle

import pytest
import torch

import kiln
from helpers import load_quickstart
import kiln.nn as nn
import kiln.nn.functional as F


def same_error(kfn, tfn):
    with pytest.raises(Exception) as te:
        tfn()
    with pytest.raises(type(te.value)):
        kfn()


def same_spec(k, t):
    assert k.device.type == t.device.type == "meta"
    assert tuple(k.shape) == tuple(t.shape), (k.shape, t.shape)
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


# ---- kiln.device ------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["cpu", "meta", "cuda", "cuda:0", "cuda:3", "meta:0", ("cuda", 1), ("cpu", 0)])
def test_device_objects_as_torch(spec):
    args = spec if isinstance(spec, tuple) else (spec,)
    k, t = kiln.device(*args), torch.device(*args)
    assert (k.type, k.index) == (t.type, t.index)
    assert str(k) == str(t)
    assert repr(k) == repr(t)
    assert k == kiln.device(*args) and hash(k) == hash(kiln.device(*args))
    assert kiln.device(k) == k
    assert pickle.loads(pickle.dumps(k)) == k


def test_device_equality_and_strings():
    assert kiln.device("cpu") != kiln.device("cpu", 0)  # torch: index None vs 0
    assert kiln.device("cpu") != "cpu"  # torch.device never equals a string
    assert kiln.device("meta") != kiln.device("cpu")


@pytest.mark.parametrize("bad", ["xyz", "CPU", "cuda:", "cpu:x", "cpu:01", "cuda:-1"])
def test_device_strings_rejected_as_torch(bad):
    same_error(lambda: kiln.device(bad), lambda: torch.device(bad))


def test_device_index_rules():
    same_error(lambda: kiln.device("cuda", -1), lambda: torch.device("cuda", -1))
    same_error(lambda: kiln.device("cuda:1", 1), lambda: torch.device("cuda:1", 1))
    # an int names an accelerator; there is none here
    same_error(lambda: kiln.device(2), lambda: torch.device(2))


def test_tensor_device_properties():
    x, m = kiln.ones(2), kiln.ones(2, device="meta")
    assert x.device == kiln.device("cpu") and x.is_cpu and not x.is_meta and not x.is_cuda
    assert m.device == kiln.device("meta") and m.is_meta and not m.is_cpu
    assert x.get_device() == torch.ones(2).get_device() == -1
    assert kiln.Generator().device == kiln.device("cpu")


def test_cuda_raises_naming_the_missing_backend():
    # torch without CUDA raises AssertionError ("Torch not compiled with CUDA enabled")
    for kfn, tfn in [(lambda: kiln.empty(3, device="cuda"), lambda: torch.empty(3, device="cuda")),
                     (lambda: kiln.zeros(3).to("cuda"), lambda: torch.zeros(3).to("cuda")),
                     (lambda: kiln.zeros(3).cuda(), lambda: torch.zeros(3).cuda()),
                     (lambda: kiln.ones(2, device="cuda:0"), lambda: torch.ones(2, device="cuda:0"))]:
        same_error(kfn, tfn)
    with pytest.raises(AssertionError, match="kiln cannot place a tensor on device .cuda.: kiln was built without CUDA"):
        kiln.empty(3, device="cuda")


# ---- factories with device= ---------------------------------------------------------------------
FACTORIES = {
    "empty": lambda m, d: m.empty(2, 3, device=d),
    "zeros": lambda m, d: m.zeros((2, 3), device=d, dtype=m.float64),
    "ones": lambda m, d: m.ones(4, device=d, dtype=m.int32),
    "full": lambda m, d: m.full((2, 2), 7, device=d),
    "arange": lambda m, d: m.arange(10, device=d),
    "arange_float": lambda m, d: m.arange(0, 1, 0.25, device=d),
    "linspace": lambda m, d: m.linspace(0, 1, 5, device=d),
    "logspace": lambda m, d: m.logspace(0, 1, 5, device=d),
    "eye": lambda m, d: m.eye(3, 4, device=d),
    "rand": lambda m, d: m.rand(2, 5, device=d),
    "randn": lambda m, d: m.randn(3, device=d, dtype=m.float64),
    "randint": lambda m, d: m.randint(0, 9, (4, 2), device=d),
    "randperm": lambda m, d: m.randperm(6, device=d),
    "normal": lambda m, d: m.normal(0.0, 1.0, (3, 2), device=d),
    "tensor": lambda m, d: m.tensor([[1.0, 2.0]], device=d),
    "as_tensor": lambda m, d: m.as_tensor([1, 2, 3], device=d),
    "zeros_like": lambda m, d: m.zeros_like(m.ones(2, 3), device=d),
    "ones_like": lambda m, d: m.ones_like(m.ones(2, 3, dtype=m.float64), device=d),
    "empty_like": lambda m, d: m.empty_like(m.ones(1, 3), device=d),
    "full_like": lambda m, d: m.full_like(m.ones(2), 3.0, device=d),
    "rand_like": lambda m, d: m.rand_like(m.ones(2, 2), device=d),
    "randn_like": lambda m, d: m.randn_like(m.ones(2, 2), device=d),
}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_factories_on_meta_as_torch(name):
    for dev in ("meta", kiln.device("meta")):
        k = FACTORIES[name](kiln, dev)
        t = FACTORIES[name](torch, "meta")
        same_spec(k, t)
    # and on the CPU the device argument changes nothing
    c = FACTORIES[name](kiln, "cpu")
    assert c.is_cpu and tuple(c.shape) == tuple(FACTORIES[name](torch, "cpu").shape)


def test_like_factories_keep_the_inputs_device():
    m = kiln.ones(2, 3, device="meta")
    for f in (kiln.zeros_like, kiln.ones_like, kiln.empty_like, kiln.rand_like, kiln.randn_like):
        assert f(m).is_meta
    assert kiln.full_like(m, 2.0).is_meta
    assert kiln.zeros_like(m, device="cpu").is_cpu


def test_factories_allocate_nothing_on_meta():
    before = kiln.memory_stats()["allocation.all.allocated"]
    x = kiln.empty(1 << 20, 1 << 20, device="meta")  # 2**40 elements: nothing is allocated
    y = kiln.randn(1 << 20, 1 << 16, device="meta")
    z = (x[:4096, :] @ y[:, :1]).sum()
    assert kiln.memory_stats()["allocation.all.allocated"] == before
    assert tuple(z.shape) == () and x.numel() == 1 << 40


# ---- ops on meta tensors -----------------------------------------------------------------------
OPS = {
    "add_broadcast": lambda m, a, b: a + b[0],
    "mul_scalar": lambda m, a, b: a * 2.5,
    "promotion": lambda m, a, b: a.to(m.float64) + b.to(m.int32),
    "compare": lambda m, a, b: a < b,
    "matmul": lambda m, a, b: a @ b.transpose(0, 1),
    "bmm": lambda m, a, b: m.bmm(a.unsqueeze(0), b.t().unsqueeze(0)),
    "sum_dim": lambda m, a, b: a.sum(1, keepdim=True),
    "mean": lambda m, a, b: a.mean(),
    "max_dim": lambda m, a, b: a.max(0).indices,
    "softmax": lambda m, a, b: F.softmax(a, dim=-1) if m is kiln else torch.nn.functional.softmax(a, dim=-1),
    "view": lambda m, a, b: a.view(4, 3),
    "transpose_contig": lambda m, a, b: a.t().contiguous(),
    "slice": lambda m, a, b: a[1:, ::2],
    "select": lambda m, a, b: a[0],
    "cat": lambda m, a, b: m.cat([a, b], 0),
    "stack": lambda m, a, b: m.stack([a, b], 1),
    "where": lambda m, a, b: m.where(a > 0, a, b),
    "cumsum": lambda m, a, b: m.cumsum(a, 1),
    "sort": lambda m, a, b: m.sort(a, 1).values,
    "topk": lambda m, a, b: m.topk(a, 2).indices,
    "gather": lambda m, a, b: m.gather(a, 1, m.zeros(3, 2, dtype=m.int64, device="meta")),
    "index_select": lambda m, a, b: m.index_select(a, 1, m.zeros(5, dtype=m.int64, device="meta")),
    "tril": lambda m, a, b: m.tril(a),
    "pad": lambda m, a, b: (F if m is kiln else torch.nn.functional).pad(a, (1, 2)),
    "layer_norm": lambda m, a, b: (F if m is kiln else torch.nn.functional).layer_norm(a, (4,)),
    "gelu": lambda m, a, b: (F if m is kiln else torch.nn.functional).gelu(a),
    "cross_entropy": lambda m, a, b: (F if m is kiln else torch.nn.functional).cross_entropy(
        a, m.zeros(3, dtype=m.int64, device="meta")),
    "sdpa": lambda m, a, b: (F if m is kiln else torch.nn.functional).scaled_dot_product_attention(
        a.view(1, 3, 4), b.view(1, 3, 4), a.view(1, 3, 4), is_causal=True),
    "inplace": lambda m, a, b: a.clone().add_(b).mul_(2),
    "out": lambda m, a, b: m.add(a, b, out=m.empty(0, device="meta")),
    "copy_into": lambda m, a, b: m.empty(3, 4, device="meta").copy_(b),
}


@pytest.mark.parametrize("name", list(OPS))
def test_ops_on_meta_as_torch(name):
    k = OPS[name](kiln, kiln.empty(3, 4, device="meta"), kiln.empty(3, 4, device="meta"))
    t = OPS[name](torch, torch.empty(3, 4, device="meta"), torch.empty(3, 4, device="meta"))
    same_spec(k, t)


def test_views_on_meta_have_torch_strides():
    k, t = kiln.empty(4, 6, device="meta"), torch.empty(4, 6, device="meta")
    for f in (lambda x: x.t(), lambda x: x[1:, ::2], lambda x: x.unsqueeze(1).expand(4, 3, 6),
              lambda x: x.view(2, 12), lambda x: x.permute(1, 0)[2]):
        kv, tv = f(k), f(t)
        assert kv.is_meta and tuple(kv.shape) == tuple(tv.shape)
        assert tuple(kv.stride()) == tuple(tv.stride()) and kv.storage_offset() == tv.storage_offset()


def test_cpu_scalars_mix_with_meta_other_cpu_tensors_do_not():
    m = kiln.ones(3, device="meta")
    assert (m + kiln.tensor(1.0)).is_meta  # a 0-dim CPU tensor goes with any device, as in torch
    same_error(lambda: m + kiln.ones(3), lambda: torch.ones(3, device="meta") + torch.ones(3))
    # (torch lets cpu.add_(meta) through and leaves the CPU tensor as it was; kiln keeps its rule)
    with pytest.raises(RuntimeError, match="same device"):
        kiln.ones(3).add_(m)
    with pytest.raises(RuntimeError, match="same device"):
        kiln.add(kiln.ones(2), kiln.ones(2), out=kiln.empty(2, device="meta"))


def test_what_needs_data_raises_as_torch():
    k, t = kiln.empty(3, device="meta"), torch.empty(3, device="meta")
    same_error(lambda: k.tolist(), lambda: t.tolist())
    same_error(lambda: k.cpu(), lambda: t.cpu())
    same_error(lambda: k.numpy(), lambda: t.numpy())
    same_error(lambda: kiln.empty(1, device="meta").item(), lambda: torch.empty(1, device="meta").item())
    same_error(lambda: k.item(), lambda: t.item())
    same_error(lambda: kiln.ones(3).copy_(k), lambda: torch.ones(3).copy_(t))
    same_error(lambda: kiln.nonzero(k), lambda: torch.nonzero(t))
    same_error(lambda: kiln.masked_select(k, k > 0), lambda: torch.masked_select(t, t > 0))
    same_error(lambda: kiln.unique(k), lambda: torch.unique(t))
    assert k.data_ptr() == t.data_ptr() == 0


def test_repr_as_torch():
    for f in (lambda m: m.empty(8, 16, device="meta"), lambda m: m.empty(3, device="meta", dtype=m.float64),
              lambda m: m.empty((), device="meta"), lambda m: m.empty(0, device="meta"),
              lambda m: m.empty(2, 0, device="meta", dtype=m.int32)):
        assert repr(f(kiln)) == repr(f(torch)).replace("torch.", "kiln.")


def test_to_and_back():
    x = kiln.arange(6.0).view(2, 3)
    m = x.to("meta")
    assert m.is_meta and tuple(m.shape) == (2, 3) and m.dtype == kiln.float32
    assert x.to("meta", kiln.float64).dtype == kiln.float64
    assert x.to(device="meta", dtype=kiln.float16).is_meta
    assert x.to(m).is_meta  # to(other): other's dtype and device
    assert m.to("meta") is m and x.to("cpu") is x and x.cpu() is x
    assert x.to("cpu", copy=True) is not x
    with pytest.raises(NotImplementedError):
        m.to("cpu")


def test_autograd_on_meta():
    x = kiln.randn(4, 5, device="meta", requires_grad=True)
    w = kiln.randn(5, 3, device="meta", requires_grad=True)
    y = (F.gelu(x @ w) * 2).sum()
    y.backward()
    assert x.grad.is_meta and tuple(x.grad.shape) == (4, 5)
    assert w.grad.is_meta and tuple(w.grad.shape) == (5, 3)
    # a gradient returns to its input's device: from meta to the CPU there is no data to copy
    c = kiln.ones(3, requires_grad=True)
    with pytest.raises(NotImplementedError):
        c.to("meta").sum().backward()


# ---- modules ----------------------------------------------------------------------------------
def test_layers_made_on_meta():
    for k, t in [(nn.Linear(4, 3, device="meta"), torch.nn.Linear(4, 3, device="meta")),
                 (nn.LayerNorm(8, device="meta"), torch.nn.LayerNorm(8, device="meta")),
                 (nn.Embedding(10, 4, device="meta"), torch.nn.Embedding(10, 4, device="meta")),
                 (nn.Conv1d(2, 3, 3, device="meta"), torch.nn.Conv1d(2, 3, 3, device="meta")),
                 (nn.LSTM(4, 5, device="meta"), torch.nn.LSTM(4, 5, device="meta")),
                 (nn.TransformerEncoderLayer(16, 2, 32, device="meta"),
                  torch.nn.TransformerEncoderLayer(16, 2, 32, device="meta"))]:
        kp, tp = dict(k.named_parameters()), dict(t.named_parameters())
        assert kp.keys() == tp.keys()
        for n in kp:
            same_spec(kp[n], tp[n])
    # positional device argument too (Linear(in, out, bias, device))
    assert nn.Linear(2, 2, True, "meta").weight.is_meta


def test_module_to_meta_and_to_empty():
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8))
    assert m.to("meta") is m
    assert all(p.is_meta for p in m.parameters()) and all(b.is_meta for b in m.buffers())
    assert isinstance(m[0].weight, nn.Parameter)
    out = m(kiln.randn(5, 4, device="meta"))
    assert out.is_meta and tuple(out.shape) == (5, 8)
    m.to_empty(device="cpu")
    assert all(p.is_cpu for p in m.parameters())
    assert tuple(m(kiln.randn(5, 4)).shape) == (5, 8)


def _quickstart():
    return load_quickstart()


def test_quickstart_forward_and_backward_on_meta_allocate_nothing():
    qs = _quickstart()
    vocab, context, batch = 40, 32, 4
    model = qs.CharTransformer(vocab, context, d_model=48, n_layers=2, n_heads=4, dropout=0.1).to("meta")
    opt = kiln.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    x = kiln.randint(0, vocab, (batch, context), device="meta")
    y = kiln.randint(0, vocab, (batch, context), device="meta")
    before = kiln.memory_stats()["allocated_bytes.all.current"]
    loss = qs.loss_fn(model, x, y)
    loss.backward()
    opt.step()
    assert loss.is_meta and tuple(loss.shape) == ()
    for p in model.parameters():
        assert p.is_meta and p.grad.is_meta and tuple(p.grad.shape) == tuple(p.shape)
    # what stays allocated is at most the optimiser's 0-dim CPU step counters (as torch's)
    assert kiln.memory_stats()["allocated_bytes.all.current"] - before <= 64 * len(list(model.parameters()))

    # the same shapes as a real CPU step
    kiln.manual_seed(0)
    real = qs.CharTransformer(vocab, context, d_model=48, n_layers=2, n_heads=4, dropout=0.1)
    xr = kiln.randint(0, vocab, (batch, context))
    lr = qs.loss_fn(real, xr, xr)
    lr.backward()
    assert [tuple(p.grad.shape) for p in real.parameters()] == [tuple(p.grad.shape) for p in model.parameters()]

