"""kiln.save / kiln.load against torch.save / torch.load (both directions), the weights_only unpickler's
refusals, malformed files, and pickle / copy.deepcopy of tensors."""
import collections
import copy
import io
import os
import pickle
import zipfile

import pytest
import torch

import kiln
from helpers import ALL_DTYPES, assert_same, make, to_kiln, to_torch


def _same(k, t):
    assert_same(k, t, exact=True)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_kiln_save_torch_load(tmp_path, dtype):
    """Every dtype; contiguous, strided and a view sharing its base's storage; torch.load's default
    weights_only=True accepts the file."""
    base = make((4, 6), dtype, seed=1)
    kb = to_kiln(base)
    obj = {"t": kb, "view": kb[1:, ::2], "T": kb.t(), "scalar": to_kiln(make((), dtype, seed=2)),
           "empty": to_kiln(make((0, 3), dtype))}
    kiln.save(obj, tmp_path / "k.pt")
    t = torch.load(tmp_path / "k.pt")
    _same(obj["t"], t["t"])
    _same(obj["view"], t["view"])
    _same(obj["T"], t["T"])
    _same(obj["scalar"], t["scalar"])
    assert t["empty"].shape == (0, 3) and t["empty"].dtype == base.dtype
    assert t["view"].untyped_storage().data_ptr() == t["t"].untyped_storage().data_ptr()  # one storage
    assert t["T"].stride() == (1, 6)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_torch_save_kiln_load(tmp_path, dtype):
    base = make((3, 5), dtype, seed=3)
    torch.save({"t": base, "view": base[:, 1::2], "p": torch.nn.Parameter(base.clone(), requires_grad=False)},
               tmp_path / "t.pt")
    k = kiln.load(tmp_path / "t.pt")
    _same(k["t"], base)
    _same(k["view"], base[:, 1::2])
    assert type(k["p"]).__name__ == "Parameter" and not k["p"].requires_grad
    _same(k["p"], base)


def test_round_trip_training_state(tmp_path):
    """A model's and an optimiser's state, nested containers and Python scalars, both directions."""
    tm = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    topt = torch.optim.Adam(tm.parameters(), lr=0.01)
    tm(torch.randn(5, 4)).sum().backward()
    topt.step()
    ck = {"model": tm.state_dict(), "optim": topt.state_dict(), "epoch": 7, "note": "x", "hist": [1.5, None]}
    buf = io.BytesIO()
    torch.save(ck, buf)
    buf.seek(0)
    k = kiln.load(buf)
    assert isinstance(k["model"], collections.OrderedDict) and list(k["model"]) == list(ck["model"])
    for name, v in ck["model"].items():
        _same(k["model"][name], v)
    assert k["optim"]["param_groups"] == ck["optim"]["param_groups"]
    for i, st in ck["optim"]["state"].items():
        for key, v in st.items():
            _same(k["optim"]["state"][i][key], v)
    assert (k["epoch"], k["note"], k["hist"]) == (7, "x", [1.5, None])
    # and back: kiln writes it, torch reads it
    out = io.BytesIO()
    kiln.save(k, out)
    out.seek(0)
    t = torch.load(out)
    for name, v in ck["model"].items():
        assert torch.equal(t["model"][name], v)
    tm.load_state_dict(t["model"])
    assert t["optim"]["param_groups"] == ck["optim"]["param_groups"]


def test_parameters_and_requires_grad(tmp_path):
    m = kiln.nn.Linear(3, 2)
    sd = {"w": m.weight, "leaf": kiln.ones(2, requires_grad=True)}
    kiln.save(sd, tmp_path / "p.pt")
    t = torch.load(tmp_path / "p.pt")
    assert isinstance(t["w"], torch.nn.Parameter) and t["w"].requires_grad
    assert torch.equal(t["w"].detach(), to_torch(m.weight.detach()))
    assert t["leaf"].requires_grad and not isinstance(t["leaf"], torch.nn.Parameter)
    k = kiln.load(tmp_path / "p.pt")
    assert type(k["w"]).__name__ == "Parameter" and k["w"].requires_grad and k["leaf"].requires_grad


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_weights_only_refuses_code(tmp_path):
    flag = tmp_path / "pwned"
    torch.save({"x": torch.ones(2), "evil": _Evil(flag)}, tmp_path / "e.pt")
    with pytest.raises(pickle.UnpicklingError, match="unsupported global"):
        kiln.load(tmp_path / "e.pt")
    assert not flag.exists()
    with pytest.raises(pickle.UnpicklingError):  # torch refuses it too (weights_only=True by default)
        torch.load(tmp_path / "e.pt")
    # weights_only=False runs it, as torch's does: only for trusted files
    kiln.load(tmp_path / "e.pt", weights_only=False)
    assert flag.exists()


def test_malformed_files_raise(tmp_path):
    kiln.save({"a": kiln.arange(10.0)}, tmp_path / "ok.pt")
    good = (tmp_path / "ok.pt").read_bytes()
    # a file that is no zip: what torch.load raises when it tries its legacy format on it
    for lib in (torch, kiln):
        with pytest.raises(pickle.UnpicklingError):
            lib.load(io.BytesIO(b"not a zip at all"))
        with pytest.raises(EOFError):
            lib.load(io.BytesIO(b""))
        with pytest.raises(RuntimeError, match="magic number"):
            lib.load(io.BytesIO(pickle.dumps(5, protocol=2)))
    # a zip cut at its tail, or with a damaged header: torch's RuntimeError (or OSError for a short file)
    for lib in (torch, kiln):
        with pytest.raises(RuntimeError):
            lib.load(io.BytesIO(good[:len(good) // 2]))
    (tmp_path / "cut.pt").write_bytes(good[:-30])
    with pytest.raises(OSError) as info:  # kiln's class is both
        kiln.load(tmp_path / "cut.pt")
    assert isinstance(info.value, RuntimeError)
    bad = bytearray(good)
    bad[10:60] = b"x" * 50
    for lib in (torch, kiln):
        with pytest.raises(RuntimeError):
            lib.load(io.BytesIO(bytes(bad)))
    with pytest.raises(RuntimeError, match="Parent directory"):
        kiln.save(kiln.ones(2), tmp_path / "missing" / "x.pt")
    # a data record cut short, a missing record, a garbage pickle
    z = zipfile.ZipFile(io.BytesIO(good))
    members = {n: z.read(n) for n in z.namelist()}

    def rezip(mut):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as w:
            for n, d in mut(dict(members)).items():
                w.writestr(n, d)
        out.seek(0)
        return out

    with pytest.raises(RuntimeError):
        kiln.load(rezip(lambda m: {**m, "archive/data/0": m["archive/data/0"][:13]}))
    with pytest.raises(RuntimeError, match="missing"):
        kiln.load(rezip(lambda m: {k: v for k, v in m.items() if k != "archive/data/0"}))
    with pytest.raises(pickle.UnpicklingError):
        kiln.load(rezip(lambda m: {**m, "archive/data.pkl": b"\x80\x02garbage"}))
    with pytest.raises(RuntimeError, match="data.pkl"):
        kiln.load(rezip(lambda m: {k: v for k, v in m.items() if not k.endswith("data.pkl")}))
    # every single-byte corruption of the pickle raises one of the two classes, never anything else
    pkl = members["archive/data.pkl"]
    for i in range(len(pkl)):
        bad = bytearray(pkl)
        bad[i] ^= 0xFF
        try:
            kiln.load(rezip(lambda m: {**m, "archive/data.pkl": bytes(bad)}))
        except (pickle.UnpicklingError, RuntimeError):
            pass


def test_aligned_storage_records(tmp_path):
    kiln.save({"a": kiln.ones(7), "b": kiln.ones(3, dtype=kiln.int16)}, tmp_path / "a.pt")
    raw = (tmp_path / "a.pt").read_bytes()
    z = zipfile.ZipFile(tmp_path / "a.pt")
    for info in z.infolist():
        if "/data/" in info.filename:
            start = info.header_offset + 30 + len(info.filename) + len(info.extra)
            assert start % 64 == 0
            assert raw[start:start + info.file_size] == z.read(info.filename)


def test_pickle_and_deepcopy_tensors():
    t = to_kiln(make((3, 4), "float32", seed=4)).t()
    u = pickle.loads(pickle.dumps(t))
    assert kiln.equal(t, u) and u.is_contiguous()
    for dt in ALL_DTYPES:
        x = to_kiln(make((2, 3), dt, seed=5))
        _same(pickle.loads(pickle.dumps(x)), to_torch(x))
    p = kiln.nn.Parameter(kiln.ones(2))
    p.grad = kiln.full((2,), 3.0)
    q = copy.deepcopy(p)
    assert type(q).__name__ == "Parameter" and q.requires_grad and q.grad.tolist() == [3.0, 3.0]
    assert q.data_ptr() != p.data_ptr()
    shared = kiln.ones(2)
    a, b = copy.deepcopy([shared, shared])
    assert a is b  # deepcopy's memo: one copy
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(kiln.ones(2, requires_grad=True) * 2)
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(torch.ones(2, requires_grad=True) * 2)


def test_deepcopy_python_module():
    class M(kiln.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = kiln.nn.Parameter(kiln.ones(2))
            self.register_buffer("b", kiln.zeros(2))

        def forward(self, x):
            return x * self.w + self.b

    m = M()
    m2 = copy.deepcopy(m)
    with kiln.no_grad():
        m2.w.add_(1.0)
    assert m.w.tolist() == [1.0, 1.0] and m2.w.tolist() == [2.0, 2.0]
    assert [n for n, _ in m2.named_parameters()] == ["w"] and [n for n, _ in m2.named_buffers()] == ["b"]


def test_deepcopy_and_pickle_cpp_layers():
    """Layers computed in C++: a copy is a fresh layer with the same arguments and state (values,
    requires_grad, gradients, training flags), independent of the original; the same through pickle and
    kiln.save / kiln.load(weights_only=False) of a whole model."""
    kiln.manual_seed(0)
    m = kiln.nn.Sequential(kiln.nn.Linear(4, 6), kiln.nn.GELU(), kiln.nn.LSTM(6, 5, batch_first=True))
    m[0].weight.grad = kiln.full((6, 4), 2.0)
    m[0].bias.requires_grad_(False)
    m.eval()
    x = kiln.randn(2, 3, 4)
    want = m(x)[0]
    for copy_of in (copy.deepcopy, lambda mod: pickle.loads(pickle.dumps(mod))):
        c = copy_of(m)
        assert kiln.equal(c(x)[0], want)
        assert not c.training and not c[2].training
        assert c[0].weight.grad.tolist() == m[0].weight.grad.tolist() and not c[0].bias.requires_grad
        with kiln.no_grad():
            c[0].weight.add_(1.0)
        assert kiln.equal(m(x)[0], want)  # the original is untouched
    buf = io.BytesIO()
    kiln.save(m, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="unsupported global"):
        kiln.load(buf)
    buf.seek(0)
    assert kiln.equal(kiln.load(buf, weights_only=False)(x)[0], want)
    enc = kiln.nn.TransformerEncoder(kiln.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2)
    y = kiln.randn(3, 2, 8)
    assert kiln.equal(copy.deepcopy(enc)(y), enc(y))
