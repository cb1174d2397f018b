"""Recurrent layers (RNN tanh/relu, LSTM with proj_size, GRU, the cells) against torch.nn with the same
weights copied across by name: outputs, final states, gradients of the input, of the initial states
and of every parameter; layouts (batch_first, unbatched, strided, expanded states), dropout, float32
tolerances, the fused layer ops (lstm_layer, gru_layer, rnn_layer and their *_backward), gradcheck,
errors and reprs."""
import math
import os
import subprocess
import sys
import warnings

import pytest
import torch

import kiln
import kiln.nn.rnn as krnn
from helpers import to_kiln, to_torch

KINDS = {  # name: (torch class, kiln class, extra kwargs)
    "rnn_tanh": (torch.nn.RNN, krnn.RNN, {}),
    "rnn_relu": (torch.nn.RNN, krnn.RNN, {"nonlinearity": "relu"}),
    "lstm": (torch.nn.LSTM, krnn.LSTM, {}),
    "lstm_proj": (torch.nn.LSTM, krnn.LSTM, {"proj_size": 3}),
    "gru": (torch.nn.GRU, krnn.GRU, {}),
}
KDT = {torch.float32: kiln.float32, torch.float64: kiln.float64}
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Both libraries on one thread: their OpenMP pools spinning against each other on a small
    machine make these tiny problems many times slower. test_two_threads covers the parallel path."""
    kn, tn = kiln.get_num_threads(), torch.get_num_threads()
    kiln.set_num_threads(1), torch.set_num_threads(1)
    yield
    kiln.set_num_threads(kn), torch.set_num_threads(tn)


def copy_params(km, tm):
    kp, tp = dict(km.named_parameters()), dict(tm.named_parameters())
    assert list(kp) == list(tp)
    for name, p in tp.items():
        assert tuple(kp[name].shape) == tuple(p.shape), name
    with kiln.no_grad():
        for name, p in kp.items():
            p.copy_(to_kiln(tp[name].detach()))


def close(k, t, tol, msg=""):
    assert k is not None, msg
    got = to_torch(k.detach() if k.requires_grad else k)
    assert tuple(got.shape) == tuple(t.shape), f"{msg}: shape {tuple(got.shape)} != {tuple(t.shape)}"
    torch.testing.assert_close(got.to(t.dtype), t.detach(), rtol=tol, atol=tol, msg=msg or None)


def pair(kind, dtype=torch.float64, **kw):
    tcls, kcls, extra = KINDS[kind]
    kw = {**extra, **kw}
    torch.manual_seed(0)
    tm = tcls(**kw).to(dtype)
    km = kcls(**kw, dtype=KDT[dtype])
    copy_params(km, tm)
    return km, tm


def leaf(t):
    return to_kiln(t.detach()).requires_grad_(), t.detach().clone().requires_grad_()


def flat(res):
    """(output, h) or (output, (h, c)) -> [output, h(, c)]"""
    out, h = res
    return [out, *h] if isinstance(h, tuple) else [out, h]


def compare(km, tm, x, hx=None, tol=1e-10, grads=True):
    """Forward both modules, then backward a random weighting of every output; compare all grads."""
    kx, tx = leaf(x)
    khx = thx = None
    if hx is not None:
        pairs = [leaf(h) for h in (hx if isinstance(hx, tuple) else (hx,))]
        khx = tuple(p[0] for p in pairs) if isinstance(hx, tuple) else pairs[0][0]
        thx = tuple(p[1] for p in pairs) if isinstance(hx, tuple) else pairs[0][1]
    kres, tres = flat(km(kx, khx)), flat(tm(tx, thx))
    for i, (k, t) in enumerate(zip(kres, tres)):
        close(k, t, tol, f"result {i}")
    if not grads:
        return
    g = torch.Generator().manual_seed(1)
    ws = [torch.randn(t.shape, dtype=t.dtype, generator=g) for t in tres]
    sum((t * w).sum() for t, w in zip(tres, ws)).backward()
    kloss = None
    for k, w in zip(kres, ws):
        term = (k * to_kiln(w)).sum()
        kloss = term if kloss is None else kloss + term
    kloss.backward()
    close(kx.grad, tx.grad, tol, "input grad")
    if hx is not None:
        for i, (k, t) in enumerate(zip(khx if isinstance(khx, tuple) else (khx,),
                                       thx if isinstance(thx, tuple) else (thx,))):
            close(k.grad, t.grad, tol, f"hx[{i}] grad")
    kp = dict(km.named_parameters())
    for name, p in tm.named_parameters():
        close(kp[name].grad, p.grad, tol, f"grad of {name}")


def states(kind, layers, dirs, batch, hidden=6, proj=3, dtype=torch.float64, unbatched=False):
    g = torch.Generator().manual_seed(2)
    lead = (layers * dirs,) if unbatched else (layers * dirs, batch)
    h = torch.randn(*lead, proj if kind == "lstm_proj" else hidden, dtype=dtype, generator=g)
    if kind.startswith("lstm"):
        return h, torch.randn(*lead, hidden, dtype=dtype, generator=g)
    return h


# ---- modules vs torch, float64 ------------------------------------------------------------------
@pytest.mark.parametrize("given_h0", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("kind", list(KINDS))
def test_module_matches_torch(kind, num_layers, bidirectional, batch_first, bias, given_h0):
    km, tm = pair(kind, input_size=5, hidden_size=6, num_layers=num_layers, bias=bias,
                  batch_first=batch_first, bidirectional=bidirectional)
    T, B = 4, 3
    x = torch.randn((B, T, 5) if batch_first else (T, B, 5), dtype=torch.float64)
    hx = states(kind, num_layers, 2 if bidirectional else 1, B) if given_h0 else None
    compare(km, tm, x, hx)


@pytest.mark.parametrize("given_h0", [False, True])
@pytest.mark.parametrize("kind", list(KINDS))
def test_unbatched_input(kind, given_h0):
    for batch_first in (False, True):
        km, tm = pair(kind, input_size=5, hidden_size=6, num_layers=2, bidirectional=True,
                      batch_first=batch_first)
        hx = states(kind, 2, 2, 1, unbatched=True) if given_h0 else None
        compare(km, tm, torch.randn(4, 5, dtype=torch.float64), hx)


@pytest.mark.parametrize("kind", list(KINDS))
def test_strided_input_and_expanded_states(kind):
    km, tm = pair(kind, input_size=5, hidden_size=6, num_layers=2, bidirectional=True)
    x = torch.randn(5, 8, 12, dtype=torch.float64)[:, ::2, 1:11:2]  # (5, 4, 5), non-contiguous
    hx = states(kind, 1, 1, 4)
    hx = tuple(h.expand(4, 4, h.shape[-1]) for h in hx) if isinstance(hx, tuple) else hx.expand(4, 4, 6)
    compare(km, tm, x, hx)
    km, tm = pair(kind, input_size=5, hidden_size=6, batch_first=True)
    compare(km, tm, torch.randn(5, 4, 3, dtype=torch.float64).permute(1, 2, 0))  # (4, 3, 5) permuted


@pytest.mark.parametrize("kind", list(KINDS))
def test_empty_batch(kind):
    km, tm = pair(kind, input_size=5, hidden_size=6, num_layers=2)
    compare(km, tm, torch.randn(3, 0, 5, dtype=torch.float64))


# ---- float32 (the vectorised pointwise path, hidden sizes that leave a tail) -----------------------
@pytest.mark.parametrize("hidden", [8, 20, 37, 32, 48])
@pytest.mark.parametrize("kind", list(KINDS))
def test_float32_matches_torch(kind, hidden):
    km, tm = pair(kind, torch.float32, input_size=11, hidden_size=hidden, num_layers=2, bidirectional=True)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(30, 5, 11, generator=g) * 2
    compare(km, tm, x, states(kind, 2, 2, 5, hidden, dtype=torch.float32), tol=1e-4)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_relu"])
def test_two_threads(kind):
    """Threads split the hidden units (and their slices of the bias gradient) in blocks of 8."""
    km, tm = pair(kind, torch.float32, input_size=9, hidden_size=96, bidirectional=True)
    x = torch.randn(5, 32, 9, generator=torch.Generator().manual_seed(7))
    kiln.set_num_threads(2)
    try:
        compare(km, tm, x, tol=1e-4)
    finally:
        kiln.set_num_threads(1)


@pytest.mark.parametrize("batch", [1, 2, 4, 6, 7, 8, 13, 14, 20])
def test_lstm_row_tiles(batch):
    """The fused float32 LSTM step works on tiles of 3 (forward, 8 units: avx2) or 6 (forward, 16 units:
    avx512; backward) rows, then 2 and 1: every tail (6 + 2 rows at the end run as 4 + 4: 8, 14, 20)."""
    km, tm = pair("lstm", torch.float32, input_size=5, hidden_size=16, bidirectional=True)
    compare(km, tm, torch.randn(3, batch, 5, generator=torch.Generator().manual_seed(8)), tol=1e-5)


def test_float32_large_preactivations():
    # saturated gates: exp over/underflow in the vector sigmoid/tanh must stay finite and exact
    km, tm = pair("lstm", torch.float32, input_size=4, hidden_size=16)
    compare(km, tm, torch.linspace(-120, 120, 10 * 3 * 4).reshape(10, 3, 4), tol=1e-5)
    km, tm = pair("gru", torch.float32, input_size=4, hidden_size=16)
    compare(km, tm, torch.linspace(-120, 120, 10 * 3 * 4).reshape(10, 3, 4), tol=1e-5)


def test_portable_float32_path_matches_torch():
    """KILN_CPU_ISA=base selects the scalar float32 pointwise code: same results."""
    code = (
        "import torch, kiln, kiln.nn.rnn as krnn, sys\n"
        "sys.path.insert(0, %r)\n"
        "from helpers import to_kiln, to_torch\n"
        "for kind in ('LSTM', 'GRU', 'RNN'):\n"
        "    torch.manual_seed(0)\n"
        "    tm = getattr(torch.nn, kind)(7, 19, num_layers=2, bidirectional=True)\n"
        "    km = getattr(krnn, kind)(7, 19, num_layers=2, bidirectional=True)\n"
        "    with kiln.no_grad():\n"
        "        for (n, k), (_, t) in zip(km.named_parameters(), tm.named_parameters()):\n"
        "            k.copy_(to_kiln(t.detach()))\n"
        "    x = torch.randn(9, 3, 7)\n"
        "    kx = to_kiln(x).requires_grad_(); tx = x.clone().requires_grad_()\n"
        "    ko, tout = km(kx)[0], tm(tx)[0]\n"
        "    torch.testing.assert_close(to_torch(ko.detach()), tout.detach(), rtol=1e-5, atol=1e-5)\n"
        "    ko.sum().backward(); tout.sum().backward()\n"
        "    torch.testing.assert_close(to_torch(kx.grad), tx.grad, rtol=1e-4, atol=1e-5)\n"
        "print('ok')\n" % os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, KILN_CPU_ISA="base", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_low_precision_runs_in_float32(kind):
    tcls, kcls, _ = KINDS[kind]
    torch.manual_seed(0)
    tm = tcls(6, 8, num_layers=2).bfloat16()
    km = kcls(6, 8, num_layers=2).to(kiln.bfloat16)
    copy_params(km, tm)
    x = torch.randn(5, 2, 6).bfloat16()
    ko, to = km(to_kiln(x))[0], tm(x)[0]
    assert ko.dtype == kiln.bfloat16
    torch.testing.assert_close(to_torch(ko).float(), to.float(), rtol=0.05, atol=0.03)


# ---- dropout ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
def test_dropout(kind):
    km, tm = pair(kind, input_size=5, hidden_size=6, num_layers=3, dropout=0.5)
    km.eval(), tm.eval()
    x = torch.randn(4, 3, 5, dtype=torch.float64)
    compare(km, tm, x)  # eval: no dropout, equal to torch
    km, tm = pair(kind, input_size=5, hidden_size=6, num_layers=2, dropout=1.0)
    compare(km, tm, x)  # training with p=1: the second layer sees zeros, deterministic
    km, _ = pair(kind, input_size=5, hidden_size=6, num_layers=2, dropout=0.5)
    kx = to_kiln(x).requires_grad_()
    a, b = km(kx)[0], km(kx)[0]
    assert not torch.equal(to_torch(a.detach()), to_torch(b.detach()))  # random masks in training
    a.sum().backward()
    assert kx.grad is not None and torch.isfinite(to_torch(kx.grad)).all()
    km.eval()
    torch.testing.assert_close(to_torch(km(kx)[0].detach()), to_torch(km(kx)[0].detach()))


def test_dropout_warning_matches_torch():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        krnn.LSTM(3, 4, dropout=0.3)
    assert any("num_layers greater than 1" in str(x.message) for x in w)


# ---- cells --------------------------------------------------------------------------------------
CELLS = {
    "rnn_tanh": (torch.nn.RNNCell, krnn.RNNCell, {}),
    "rnn_relu": (torch.nn.RNNCell, krnn.RNNCell, {"nonlinearity": "relu"}),
    "lstm": (torch.nn.LSTMCell, krnn.LSTMCell, {}),
    "gru": (torch.nn.GRUCell, krnn.GRUCell, {}),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("given_h", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kind", list(CELLS))
def test_cells_match_torch(kind, bias, given_h, batched, dtype):
    tcls, kcls, extra = CELLS[kind]
    torch.manual_seed(0)
    tm = tcls(5, 10, bias=bias, **extra).to(dtype)
    km = kcls(5, 10, bias=bias, **extra, dtype=KDT[dtype])
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
    copy_params(km, tm)
    lead = (3,) if batched else ()
    x = torch.randn(*lead, 5, dtype=dtype)
    kx, tx = leaf(x)
    hs = [torch.randn(*lead, 10, dtype=dtype) for _ in range(2 if kind == "lstm" else 1)]
    kh = [leaf(h) for h in hs] if given_h else None
    if kind == "lstm":
        kr = km(kx, None if kh is None else (kh[0][0], kh[1][0]))
        tr = tm(tx, None if kh is None else (kh[0][1], kh[1][1]))
    else:
        kr, tr = (km(kx, None if kh is None else kh[0][0]),), (tm(tx, None if kh is None else kh[0][1]),)
    tol = 1e-10 if dtype == torch.float64 else 1e-5
    for k, t in zip(kr, tr):
        close(k, t, tol, kind)
    sum((t * (i + 1.5)).sum() for i, t in enumerate(tr)).backward()
    kloss = None
    for i, k in enumerate(kr):
        kloss = (k * (i + 1.5)).sum() if kloss is None else kloss + (k * (i + 1.5)).sum()
    kloss.backward()
    close(kx.grad, tx.grad, tol, "input grad")
    for a, b in kh or []:
        close(a.grad, b.grad, tol, "state grad")
    kp = dict(km.named_parameters())
    for name, p in tm.named_parameters():
        close(kp[name].grad, p.grad, tol, name)


def test_cell_functions_match_torch():
    g = torch.Generator().manual_seed(4)
    x, h, c = (torch.randn(3, n, dtype=torch.float64, generator=g) for n in (5, 4, 4))

    def r(*shape):
        return torch.randn(*shape, dtype=torch.float64, generator=g)

    w3, u3, b3 = r(12, 5), r(12, 4), r(12)
    w4, u4, b4 = r(16, 5), r(16, 4), r(16)
    w1, u1 = r(4, 5), r(4, 4)
    K = to_kiln
    for kr, tr in [
        (kiln.lstm_cell(K(x), (K(h), K(c)), K(w4), K(u4), K(b4), K(b4)),
         torch.lstm_cell(x, (h, c), w4, u4, b4, b4)),
        ((kiln.gru_cell(K(x), K(h), K(w3), K(u3), K(b3), None),), (torch.gru_cell(x, h, w3, u3, b3, None),)),
        ((kiln.rnn_tanh_cell(K(x), K(h), K(w1), K(u1)),), (torch.rnn_tanh_cell(x, h, w1, u1),)),
        ((kiln.rnn_relu_cell(K(x), K(h), K(w1), K(u1)),), (torch.rnn_relu_cell(x, h, w1, u1),)),
    ]:
        for k, t in zip(kr, tr):
            close(k, t, 1e-12)


# ---- the fused layer ops ------------------------------------------------------------------------
def test_layer_ops_are_table_ops_with_fused_backward():
    ops = set(kiln.registered_ops())
    for name in ("lstm_layer", "lstm_layer_backward", "gru_layer", "gru_layer_backward",
                 "rnn_layer", "rnn_layer_backward"):
        assert name in ops
    km, _ = pair("lstm", input_size=5, hidden_size=6)
    out, (h, c) = km(to_kiln(torch.randn(3, 2, 5, dtype=torch.float64)))
    assert out.grad_fn.name() == "LstmLayerBackward0"


@pytest.mark.parametrize("reverse", [False, True])
def test_layer_ops_vs_torch_single_layer(reverse):
    """_nn.lstm_layer / gru_layer / rnn_layer: one direction; reverse = torch on the flipped sequence."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 3, 4, dtype=torch.float64, generator=g)
    xs = x.flip(0) if reverse else x
    fix = (lambda y: y.flip(0)) if reverse else (lambda y: y)
    for kind in ("lstm", "lstm_proj", "gru", "rnn_tanh", "rnn_relu"):
        km, tm = pair(kind, input_size=4, hidden_size=5)
        hx = states(kind, 1, 1, 3, 5)
        ps = [to_kiln(p.detach()) for p in tm.parameters()]
        if kind.startswith("lstm"):
            ty, (th, tc) = tm(xs, hx)
            w_hr = ps[4] if kind == "lstm_proj" else None
            ky, kh, kc = kiln._C._nn.lstm_layer(to_kiln(x), to_kiln(hx[0][0]), to_kiln(hx[1][0]), *ps[:4],
                                                w_hr, reverse)
            close(kc, tc[0], 1e-12)
        elif kind == "gru":
            ty, th = tm(xs, hx)
            ky, kh = kiln._C._nn.gru_layer(to_kiln(x), to_kiln(hx[0]), *ps, reverse)
        else:
            ty, th = tm(xs, hx)
            ky, kh = kiln._C._nn.rnn_layer(to_kiln(x), to_kiln(hx[0]), *ps, kind == "rnn_relu", reverse)
        close(ky, fix(ty), 1e-12, kind)
        close(kh, th[0], 1e-12, kind)


@pytest.mark.parametrize("kind", ["lstm", "lstm_proj", "gru", "rnn_tanh", "rnn_relu"])
def test_gradcheck_layer_ops(kind):
    g = torch.Generator().manual_seed(6)
    H, R = 3, (2 if kind == "lstm_proj" else 3)
    chunks = {"lstm": 4, "lstm_proj": 4, "gru": 3}.get(kind, 1)

    def t(*shape):
        return to_kiln(torch.randn(*shape, dtype=torch.float64, generator=g) * 0.8).requires_grad_()

    x, h0, c0 = t(3, 2, 2), t(2, R), t(2, H)
    w_ih, w_hh, b_ih, b_hh = t(chunks * H, 2), t(chunks * H, R), t(chunks * H), t(chunks * H)
    w_hr = t(R, H)
    for reverse in (False, True):
        if kind.startswith("lstm"):
            wr = w_hr if kind == "lstm_proj" else None
            def fn(x, h0, c0, a, b, c, d, e=None):
                return kiln._C._nn.lstm_layer(x, h0, c0, a, b, c, d, e, reverse)
            args = (x, h0, c0, w_ih, w_hh, b_ih, b_hh) + ((wr,) if wr is not None else ())
        elif kind == "gru":
            def fn(x, h0, a, b, c, d):
                return kiln._C._nn.gru_layer(x, h0, a, b, c, d, reverse)
            args = (x, h0, w_ih, w_hh, b_ih, b_hh)
        else:
            relu = kind == "rnn_relu"
            def fn(x, h0, a, b, c, d):
                return kiln._C._nn.rnn_layer(x, h0, a, b, c, d, relu, reverse)
            args = (x, h0, w_ih, w_hh, b_ih, b_hh)
        assert kiln.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-6)


def test_double_backward_is_not_implemented():
    km, _ = pair("lstm", input_size=3, hidden_size=4)
    x = to_kiln(torch.randn(2, 2, 3, dtype=torch.float64)).requires_grad_()
    (gx,) = kiln.autograd.grad(km(x)[0].sum(), [x], create_graph=True)
    with pytest.raises(NotImplementedError):
        gx.sum().backward()


def test_backward_twice_needs_retain_graph_and_partial_grads():
    km, tm = pair("gru", input_size=3, hidden_size=4, num_layers=2)
    x = torch.randn(3, 2, 3, dtype=torch.float64)
    out = km(to_kiln(x))[0]
    out.sum().backward(retain_graph=True)
    first = to_torch(km.weight_hh_l0.grad).clone()
    out.sum().backward()
    torch.testing.assert_close(to_torch(km.weight_hh_l0.grad), 2 * first)
    # only some parameters need a gradient: the others stay None
    km.zero_grad()
    for name, p in km.named_parameters():
        if name != "weight_ih_l1":
            p.requires_grad_(False)
    km(to_kiln(x))[0].sum().backward()
    assert km.weight_ih_l1.grad is not None and km.weight_hh_l0.grad is None


# ---- construction, parameters, repr, errors -----------------------------------------------------
@pytest.mark.parametrize("kw", [
    dict(input_size=3, hidden_size=4),
    dict(input_size=3, hidden_size=4, num_layers=2, bias=False, batch_first=True, dropout=0.5,
         bidirectional=True),
    dict(input_size=3, hidden_size=4, num_layers=3, proj_size=2, bidirectional=True),
])
def test_parameters_init_and_repr(kw):
    for kind, (tcls, kcls, extra) in KINDS.items():
        if "proj_size" in kw and not kind.startswith("lstm"):
            continue
        args = {**kw, **({k: v for k, v in extra.items() if k != "proj_size"})}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tm, km = tcls(**args), kcls(**args)
        assert repr(km) == repr(tm)
        tp, kp = list(tm.named_parameters()), list(km.named_parameters())
        assert [n for n, _ in kp] == [n for n, _ in tp]
        assert [tuple(p.shape) for _, p in kp] == [tuple(p.shape) for _, p in tp]
        bound = 1 / kw["hidden_size"] ** 0.5
        for _, p in kp:
            v = to_torch(p.detach())
            assert v.abs().max() <= bound and v.std() > 0
        assert km._flat_weights_names == tm._flat_weights_names
        assert [[tuple(p.shape) for p in ws] for ws in km.all_weights] == \
               [[tuple(p.shape) for p in ws] for ws in tm.all_weights]
        for attr in ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
                     "bidirectional", "proj_size", "mode"):
            assert getattr(km, attr) == getattr(tm, attr), attr


def test_cell_repr_and_parameters():
    for tm, km in [(torch.nn.RNNCell(3, 4), krnn.RNNCell(3, 4)),
                   (torch.nn.RNNCell(3, 4, bias=False, nonlinearity="relu"),
                    krnn.RNNCell(3, 4, bias=False, nonlinearity="relu")),
                   (torch.nn.LSTMCell(3, 4), krnn.LSTMCell(3, 4)),
                   (torch.nn.GRUCell(3, 4, bias=False), krnn.GRUCell(3, 4, bias=False))]:
        assert repr(km) == repr(tm)
        assert [(n, tuple(p.shape)) for n, p in km.named_parameters()] == \
               [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
        assert km.bias_ih is None if not tm.bias else km.bias_ih is not None


def test_module_parameters_are_shared_with_cpp():
    km, tm = pair("lstm", input_size=3, hidden_size=4)
    x = torch.randn(2, 2, 3, dtype=torch.float64)
    with kiln.no_grad():
        km.weight_hh_l0.mul_(2)
    with torch.no_grad():
        tm.weight_hh_l0.mul_(2)
    compare(km, tm, x, grads=False)
    # .double() converts the parameters in place: the C++ layer computes in float64 afterwards
    torch.manual_seed(0)
    tm32, km32 = torch.nn.GRU(3, 4, num_layers=2), krnn.GRU(3, 4, num_layers=2)
    copy_params(km32, tm32)
    km32.double(), tm32.double()
    assert km32.weight_ih_l1.dtype == kiln.float64
    compare(km32, tm32, x)
    # load_state_dict with torch's values
    km2 = krnn.GRU(3, 4, num_layers=2, dtype=kiln.float64)
    km2.load_state_dict({k: to_kiln(v) for k, v in tm32.state_dict().items()})
    compare(km2, tm32, x, grads=False)


def raises_like(tfn, kfn, prefix=None):
    with pytest.raises(Exception) as te:
        tfn()
    with pytest.raises(Exception) as ke:
        kfn()
    assert isinstance(ke.value, type(te.value)), f"torch {te.value!r} vs kiln {ke.value!r}"
    if prefix:
        assert str(ke.value).startswith(prefix), str(ke.value)


@pytest.mark.parametrize("kw", [
    dict(dropout=1.5), dict(dropout=-0.1), dict(dropout=True), dict(proj_size=4), dict(proj_size=-1),
    dict(num_layers=0), dict(input_size=0), dict(hidden_size=0), dict(bias=1), dict(batch_first=None),
    dict(hidden_size=4.0), dict(num_layers=2.0),
])
def test_constructor_errors(kw):
    args = {"input_size": 3, "hidden_size": 4, **kw}
    raises_like(lambda: torch.nn.LSTM(**args), lambda: krnn.LSTM(**args))


def test_constructor_errors_rnn_gru():
    raises_like(lambda: torch.nn.GRU(3, 4, proj_size=2), lambda: krnn.GRU(3, 4, proj_size=2))
    raises_like(lambda: torch.nn.RNN(3, 4, nonlinearity="gelu"), lambda: krnn.RNN(3, 4, nonlinearity="gelu"))
    raises_like(lambda: torch.nn.RNN(3, 4, 1, "sigmoid"), lambda: krnn.RNN(3, 4, 1, "sigmoid"))
    tm, km = torch.nn.RNN(3, 4, 2, "relu"), krnn.RNN(3, 4, 2, "relu")  # positional nonlinearity
    assert km.nonlinearity == tm.nonlinearity == "relu" and km.num_layers == 2
    with pytest.raises(ValueError, match=r"^\[LSTM\] proj_size has to be smaller"):
        kiln._C._nn.RNNBase("LSTM", 3, 4, proj_size=4)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
def test_forward_errors(kind):
    km, tm = pair(kind, input_size=3, hidden_size=4, num_layers=2)
    name = {"lstm": "[LSTM]", "gru": "[GRU]", "rnn_tanh": "[RNN]"}[kind]
    K = to_kiln

    def both(x, hx=None, prefix=None):
        khx = None if hx is None else (tuple(K(h) for h in hx) if isinstance(hx, tuple) else K(hx))
        raises_like(lambda: tm(x, hx), lambda: km(K(x), khx), prefix)

    d = torch.float64
    both(torch.randn(2, 3, 4, 3, dtype=d), prefix=name)           # 4-D input
    both(torch.randn(5, 2, 4, dtype=d), prefix=name)              # wrong input size
    both(torch.randn(5, 2, 3), prefix=name)                       # dtype differs from the weights
    both(torch.randn(0, 2, 3, dtype=d))                           # empty sequence
    if kind == "lstm":
        both(torch.randn(5, 2, 3, dtype=d), (torch.randn(2, 2, 4, dtype=d), torch.randn(2, 4, dtype=d)), name)
        both(torch.randn(5, 2, 3, dtype=d), (torch.randn(2, 3, 4, dtype=d), torch.randn(2, 2, 4, dtype=d)), name)
        both(torch.randn(5, 2, 3, dtype=d), (torch.randn(2, 2, 4, dtype=d), torch.randn(1, 2, 4, dtype=d)), name)
        both(torch.randn(5, 3, dtype=d), (torch.randn(2, 1, 4, dtype=d), torch.randn(2, 1, 4, dtype=d)), name)
    else:
        both(torch.randn(5, 2, 3, dtype=d), torch.randn(2, 4, dtype=d), name)     # 2-D hx, batched input
        both(torch.randn(5, 2, 3, dtype=d), torch.randn(1, 2, 4, dtype=d), name)  # wrong layer count
        both(torch.randn(5, 2, 3, dtype=d), torch.randn(2, 2, 5, dtype=d), name)  # wrong hidden size
        both(torch.randn(5, 3, dtype=d), torch.randn(2, 1, 4, dtype=d), name)     # 3-D hx, unbatched
    with pytest.raises(RuntimeError, match=r"^\[" + name[1:-1] + r"\] Expected hidden"):
        km(K(torch.randn(5, 2, 3, dtype=d)),
           (K(torch.randn(2, 3, 4, dtype=d)), K(torch.randn(2, 3, 4, dtype=d))) if kind == "lstm"
           else K(torch.randn(2, 3, 4, dtype=d)))


@pytest.mark.parametrize("kind", list(CELLS))
def test_cell_errors(kind):
    tcls, kcls, extra = CELLS[kind]
    tm, km = tcls(3, 4, **extra), kcls(3, 4, **extra)
    K = to_kiln
    lstm = kind == "lstm"

    def both(x, h=None):
        th = (h, h) if lstm and h is not None else h
        kh = None if h is None else ((K(h), K(h)) if lstm else K(h))
        raises_like(lambda: tm(x, th), lambda: km(K(x), kh))

    both(torch.randn(2, 5))                       # inconsistent input size
    both(torch.randn(2, 3, 4))                    # 3-D input
    both(torch.randn(2, 3), torch.randn(3, 4))    # batch mismatch
    both(torch.randn(2, 3), torch.randn(2, 5))    # hidden size mismatch
    both(torch.randn(2, 3), torch.randn(2, 4, 1))  # 3-D hidden
    both(torch.randn(3), torch.randn(2, 4))       # unbatched input, batched hidden
    both(torch.randn(2, 3).double())              # dtype differs from the weights
    if kind == "rnn_tanh":
        raises_like(lambda: torch.nn.RNNCell(3, 4, nonlinearity="x")(torch.randn(2, 3)),
                    lambda: krnn.RNNCell(3, 4, nonlinearity="x")(K(torch.randn(2, 3))))


@pytest.mark.parametrize("wname,steps,batch", [("weight_hh_l0", 4, 2), ("weight_hh_l0", 1, 2), ("weight_ih_l0", 1, 2),
                                               ("weight_ih_l0", 4, 8), ("weight_ih_l0", 4, 2)])
def test_lstm_weight_changes_reach_the_cached_panels(wname, steps, batch):
    # the fused LSTM keeps packed W_hh panels between calls (rnn.cpp), and W_ih's: as panels for the
    # calls whose steps take the input projection inside (one step, or 8 rows and more), as the GEMM's
    # packed B for the others (one projection of all steps first): every way of changing the weight
    # must show in the next call, compared with torch on the same weights
    km, tm = pair("lstm", dtype=torch.float32, input_size=5, hidden_size=16)
    x = torch.randn(steps, batch, 5)
    shape = tuple(getattr(tm, wname).shape)
    hx = states("lstm", 1, 1, batch, 16, dtype=torch.float32)  # a nonzero state: W_hh's product runs
    kh = tuple(to_kiln(t) for t in hx)
    kept = None
    for change in ["none", "inplace", "copy", "load_state_dict", "numpy", "numpy kept", "numpy kept again",
                   "numpy dropped", "replace"]:
        if change == "inplace":
            with torch.no_grad():
                getattr(tm, wname).mul_(0.5)
            with kiln.no_grad():
                getattr(km, wname).mul_(0.5)
        elif change == "copy":
            w = torch.randn(*shape)
            with torch.no_grad():
                getattr(tm, wname).copy_(w)
            with kiln.no_grad():
                getattr(km, wname).copy_(to_kiln(w))
        elif change == "load_state_dict":
            w = torch.randn(*shape)
            with torch.no_grad():
                getattr(tm, wname).copy_(w)
            km.load_state_dict({**km.state_dict(), wname: to_kiln(w)})
        elif change == "numpy":
            w = torch.randn(*shape)
            with torch.no_grad():
                getattr(tm, wname).copy_(w)
            getattr(km, wname).detach().numpy()[...] = w.numpy()  # shared memory: no version bump
        elif change.startswith("numpy kept"):  # an array alive across calls, written between them
            w = torch.randn(*shape)
            with torch.no_grad():
                getattr(tm, wname).copy_(w)
            if kept is None:
                kept = getattr(km, wname).detach().numpy()
            kept[...] = w.numpy()
        elif change == "numpy dropped":  # the array is gone: the panels may be cached again
            kept = None
        elif change == "replace":
            w = torch.randn(*shape)
            with torch.no_grad():
                getattr(tm, wname).copy_(w)
            setattr(km, wname, kiln.nn.Parameter(to_kiln(w)))
        out, _ = km(to_kiln(x), kh)
        close(out, tm(x, hx)[0], 1e-5, change)


def test_lstm_step_and_sequence_calls_share_w_ih():
    """A one-step call (W_ih packed as the steps' panels) and a sequence call (W_ih packed as the GEMM's
    B) on the same weight, alternately, with an in-place change between: both packings are cached side
    by side and both follow the change (against torch on the same weights)."""
    km, tm = pair("lstm", dtype=torch.float32, input_size=24, hidden_size=32)
    x = torch.randn(5, 2, 24)
    for round_ in range(3):
        if round_ == 2:
            with torch.no_grad():
                tm.weight_ih_l0.mul_(-0.5)
            with kiln.no_grad():
                km.weight_ih_l0.mul_(-0.5)
        for xs in (x[:1], x, x[:1], x):
            close(km(to_kiln(xs))[0], tm(xs)[0], 1e-5, f"round {round_} steps {xs.shape[0]}")


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("given_state", [False, True])
@pytest.mark.parametrize("batch", [1, 7])
def test_lstm_one_step_and_zero_state(steps, given_state, batch):
    """The fused float32 LSTM: a one-step call runs the input projection inside the step (W_ih's panels
    cached), and a zero initial state skips step 0's recurrent product; two layers, both directions,
    gradients too, against torch."""
    km, tm = pair("lstm", torch.float32, input_size=24, hidden_size=32, num_layers=2, bidirectional=True)
    x = torch.randn(steps, batch, 24, generator=torch.Generator().manual_seed(9))
    hx = states("lstm", 2, 2, batch, 32, dtype=torch.float32) if given_state else None
    compare(km, tm, x, hx, tol=2e-5)


@pytest.mark.parametrize("bad", [math.inf, math.nan])
@pytest.mark.parametrize("steps", [1, 3])
def test_lstm_zero_state_with_nonfinite_w_hh(bad, steps):
    """0 * inf is NaN: with a non-finite W_hh the zero state's product is not skipped, as in torch."""
    km, tm = pair("lstm", torch.float32, input_size=4, hidden_size=16)
    x = torch.randn(steps, 2, 4, generator=torch.Generator().manual_seed(4))
    close(km(to_kiln(x))[0], tm(x)[0], 1e-5, "finite W_hh")  # its panels cached, marked finite
    with torch.no_grad():
        tm.weight_hh_l0[3, 5] = bad
    with kiln.no_grad():
        km.weight_hh_l0[3, 5] = bad  # in place: the cached panels and their finite mark are stale
    kout, tout = to_torch(km(to_kiln(x))[0]), tm(x)[0].detach()
    assert torch.equal(torch.isnan(kout), torch.isnan(tout))
    assert bool(torch.isnan(tout).any())
    fin = ~torch.isnan(tout)
    close(to_kiln(kout[fin]), tout[fin], 1e-5, "finite part")


def _cell_activation(kind, w, xs, steps=1):
    """sigmoid or tanh of every w * x (x: each row's input) read out exactly through an LSTM: with the
    other gates' input weights at +-inf, i (or g) is 1 and f is 0, so c = sigmoid(w x) (or tanh(w x))
    with no rounding of its own. W_hh = 0 and no bias."""
    import numpy as np
    H, inf = len(w), np.float32(np.inf)
    wi, wf = np.full(H, inf, np.float32), np.full(H, -inf, np.float32)
    wg, wo = np.full(H, inf, np.float32), np.zeros(H, np.float32)
    if kind == "tanh":
        wg = w
    else:
        wi = w
    m = kiln.nn.LSTM(1, H).eval()
    with kiln.no_grad():
        m.weight_ih_l0.copy_(kiln.from_numpy(np.concatenate([wi, wf, wg, wo])[:, None].copy()))
        m.weight_hh_l0.zero_(), m.bias_ih_l0.zero_(), m.bias_hh_l0.zero_()
        x = np.broadcast_to(xs.reshape(1, -1, 1), (steps, len(xs), 1)).copy()
        return m(kiln.from_numpy(x))[1][1].numpy()[0]


@pytest.mark.parametrize("kind", ["sigmoid", "tanh"])
@pytest.mark.parametrize("hidden,batch,steps", [(1024, 64, 1), (1024, 64, 2), (1024, 3, 1), (1024, 3, 2), (1016, 8, 1)])
def test_lstm_activation_accuracy(kind, hidden, batch, steps):
    """The steps' vector sigmoid and tanh (cheaper than vec.h's: the pointwise part was a third of a
    fused step) within 3 ulp of the float64 value wherever that is a normal float32, on inputs from
    1e-10 to 800 of either sign. Covers the fused step with the input projection inside (batch 64, one
    and two steps, or 3 rows on one step), with the projection by GEMM first (3 rows, 2 steps) and the
    unfused step (1016 units). Below 2^-126, sigmoid gives 0 or a subnormal within 4.2e-39 of the value
    (0 from -88.38 down, where 2^n overflows)."""
    import numpy as np
    rng = np.random.default_rng(1)
    w = (rng.uniform(-1, 1, hidden) * 10.0 ** rng.uniform(-3, 1.3, hidden)).astype(np.float32)
    xs = (2.0 ** np.round(np.linspace(-24, 4, batch))).astype(np.float32)  # exact products w x
    got = _cell_activation(kind, w, xs, steps).astype(np.float64)
    v = xs[:, None].astype(np.float64) * w[None, :].astype(np.float64)
    ref = np.tanh(v) if kind == "tanh" else 1 / (1 + np.exp(-v))
    normal = np.abs(ref) >= 2.0 ** -126
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    err = np.abs(got - ref) / ulp
    assert err[normal].max() <= 3, (err[normal].max(), v[normal][err[normal].argmax()])
    assert np.abs(got - ref)[~normal].max(initial=0) <= 4.2e-39


@pytest.mark.parametrize("hidden,batch", [(32, 8), (32, 1), (28, 2)])
def test_lstm_activation_special_values(hidden, batch):
    """sigmoid and tanh of +-inf, NaN, +-0, subnormals, the overflow edges of exp and huge values in
    the fused steps (32 units) and the unfused ones (28: vectors, then a scalar tail of 4 units on
    the C library), against the C library's values in float64. (A -0 gate sum cannot be made here:
    the products and the zero bias add up to +0.)"""
    import numpy as np
    vals = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -1e-40, 1e-30, -1e-30, 9.0, -9.0, 9.5, 44.36, -44.36,
            87.3, -87.3, 88.7, -88.7, 89.5, -89.5, 104.0, -104.0, 3e38, -3e38, 88.3763, -88.3763, -87.34,
            -88.0]
    vals = [float(np.float32(v)) for v in (vals * 2)[:hidden]]
    w = np.array(vals, np.float32)
    for kind in ("sigmoid", "tanh"):
        got = _cell_activation(kind, w, np.ones(batch, np.float32))
        for k, v in enumerate(vals):
            ref = math.tanh(v) if kind == "tanh" else (1 / (1 + math.exp(-v)) if v > -700 else 0.0)
            g = float(got[0, k])
            if math.isnan(v):
                assert math.isnan(g), (kind, v, g)
            elif ref == 0 or abs(ref) >= 2.0 ** -126:
                assert g == pytest.approx(ref, rel=3 * 2.0 ** -24, abs=0), (kind, v, g)
            else:
                assert abs(g - ref) <= 4.2e-39, (kind, v, g)


@pytest.mark.parametrize("batch", [9, 3])
def test_lstm_fused_past_one_k_chunk(batch):
    """The fused step's K runs in chunks of 128 columns per source (x's, then h's): input 200 and hidden
    160 cross a chunk in both, with the input projection inside the step (9 rows) and by GEMM first (3),
    two layers, bidirectional, gradients too."""
    km, tm = pair("lstm", torch.float32, input_size=200, hidden_size=160, num_layers=2, bidirectional=True)
    x = torch.randn(3, batch, 200, generator=torch.Generator().manual_seed(11))
    hx = states("lstm", 2, 2, batch, 160, dtype=torch.float32)
    compare(km, tm, x, hx, tol=5e-5)


# ---- lstm_layer's train flag (as _cudnn_rnn's): inference keeps nothing for a backward -----------
def _lstm_layer_args(I, H, B, T, dtype, proj, seed=3):
    g = torch.Generator().manual_seed(seed)

    def t(*shape):
        return to_kiln(torch.randn(*shape, dtype=dtype, generator=g) * 0.5)

    R = 8 if proj else H
    return (t(T, B, I), t(B, R), t(B, H), t(4 * H, I), t(4 * H, R), t(4 * H), t(4 * H),
            t(R, H) if proj else None)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("I,H,B,T,dtype,proj", [
    (24, 32, 1, 5, torch.float32, False),   # fused, the projection one GEMM first
    (24, 32, 8, 4, torch.float32, False),   # fused, the projection inside the steps
    (24, 32, 3, 1, torch.float32, False),   # fused, one step
    (0, 16, 2, 3, torch.float32, False),    # fused, no input columns
    (5, 20, 3, 4, torch.float32, False),    # H % 16 != 0: per-step GEMMs
    (5, 16, 3, 4, torch.float32, True),     # projection
    (5, 6, 3, 4, torch.float64, False),
])
def test_lstm_layer_train_false_gives_the_same_bits_and_no_reserve(I, H, B, T, dtype, proj, reverse):
    """train=False (what the front end passes when autograd will not record the call) skips every
    store the backward alone reads; y, h_n and c_n are bit for bit those of train=True."""
    args = _lstm_layer_args(I, H, B, T, dtype, proj)
    y1, h1, c1, r1 = kiln.ops.lstm_layer(*args, reverse, train=True)
    y0, h0, c0, r0 = kiln.ops.lstm_layer(*args, reverse, train=False)
    assert r0.numel() == 0 and r1.numel() == T * B * (5 * H + (H if proj else 0)) * (8 if dtype == torch.float64 else 4)
    for a, b in ((y0, y1), (h0, h1), (c0, c1)):
        assert torch.equal(to_torch(a), to_torch(b))
    if T == 1 or I == 0:
        return
    # and the same as torch (one layer, one direction: the flipped sequence for reverse)
    tm = torch.nn.LSTM(I, H, proj_size=8 if proj else 0).to(dtype)
    with torch.no_grad():
        for p, a in zip(tm.parameters(), [args[3], args[4], args[5], args[6]] + ([args[7]] if proj else [])):
            p.copy_(to_torch(a))
    x = to_torch(args[0])
    ty, (th, tc) = tm(x.flip(0) if reverse else x, (to_torch(args[1])[None], to_torch(args[2])[None]))
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    close(y0, ty.flip(0) if reverse else ty, tol)
    close(c0, tc[0], tol)


def test_lstm_front_end_passes_train_only_when_autograd_records():
    """The module under no_grad (or with nothing requiring grad) runs with train=False, else True: the
    same results either way, and a backward after the recorded call."""
    km, tm = pair("lstm", torch.float32, input_size=24, hidden_size=32, num_layers=2)
    x = torch.randn(6, 8, 24, generator=torch.Generator().manual_seed(1))
    with kiln.no_grad():
        ref = to_torch(km(to_kiln(x))[0])
    out = km(to_kiln(x))[0]
    assert out.requires_grad and torch.equal(to_torch(out.detach()), ref)
    out.sum().backward()
    assert km.weight_hh_l0.grad is not None
    # export traces with grad off itself: the program's layers run with train=False whatever the
    # caller's grad mode (the parameters require grad here)
    ep = kiln.export.export(km, (to_kiln(x),))
    layers = [n for n in ep.graph.nodes if n.op == "lstm_layer"]
    assert len(layers) == 2 and all(n.attrs[-1] == "False" for n in layers)
    # inputs and parameters that require nothing: train=False too, the same bits
    for p in km.parameters():
        p.requires_grad_(False)
    out = km(to_kiln(x))[0]
    assert not out.requires_grad and torch.equal(to_torch(out), ref)


@pytest.mark.parametrize("batch,steps", [(1, 7), (8, 5), (3, 1)])
def test_lstm_layer_train_false_on_two_threads(batch, steps):
    """The fused steps split the unit blocks between two threads; with train=False the cell states
    alternate between two buffers: the same bits as train=True, on one thread and on two. (The base
    table has no fused steps: its recurrent product is OpenBLAS's, whose bits may change with the
    thread count, as on Zen 3's kernels: there only train=False against train=True is pinned.)"""
    fused = kiln.cpu_isa() != "base"
    args = _lstm_layer_args(256, 256, batch, steps, torch.float32, False, seed=8)
    want = kiln.ops.lstm_layer(*args, False, train=True)[:3]
    kiln.set_num_threads(2)
    try:
        for reverse in (False, True):
            ref = kiln.ops.lstm_layer(*args, reverse, train=True)[:3]
            got = kiln.ops.lstm_layer(*args, reverse, train=False)[:3]
            for a, b in zip(got, ref):
                assert torch.equal(to_torch(a), to_torch(b))
            if not reverse and fused:
                for a, b in zip(got, want):
                    assert torch.equal(to_torch(a), to_torch(b))
    finally:
        kiln.set_num_threads(1)


def test_lstm_layer_backward_of_an_inference_call_raises():
    args = [a.requires_grad_() if a is not None else None for a in _lstm_layer_args(4, 16, 2, 3, torch.float32, False)]
    y, _, _, _ = kiln.ops.lstm_layer(*args, False, train=False)
    with pytest.raises(RuntimeError, match="train=False"):
        y.sum().backward()


def test_layer_backward_ops_check_their_inputs_and_take_missing_gradients_as_zeros():
    """The fused backward ops are public (kiln.ops): a reserve of the wrong size (an empty one from a
    train=False call included) or a wrong output raises; a left-out incoming gradient is zeros."""
    x, h, c = kiln.randn(3, 2, 4), kiln.zeros(2, 16), kiln.zeros(2, 16)
    wi, wh = kiln.randn(64, 4), kiln.randn(64, 16)
    y, _, _, r0 = kiln.ops.lstm_layer(x, h, c, wi, wh, None, None, None, False, train=False)
    with pytest.raises(RuntimeError, match="train=False"):
        kiln.ops.lstm_layer_backward(x, h, c, wi, wh, None, y, r0, kiln.ones_like(y), None, None, False, 31)
    y, _, _, r = kiln.ops.lstm_layer(x, h, c, wi, wh, None, None, None, False)
    with pytest.raises(RuntimeError, match="reserve has shape"):
        kiln.ops.lstm_layer_backward(x, h, c, wi, wh, None, y, r[:10], kiln.ones_like(y), None, None, False, 31)
    with pytest.raises(RuntimeError, match="uint8"):
        kiln.ops.lstm_layer_backward(x, h, c, wi, wh, None, y, kiln.zeros(r.numel()), kiln.ones_like(y), None, None,
                                     False, 31)
    with pytest.raises(RuntimeError, match="output has shape"):
        kiln.ops.lstm_layer_backward(x, h, c, wi, wh, None, y[:1], r, kiln.ones_like(y), None, None, False, 31)
    left_out = kiln.ops.lstm_layer_backward(x, h, c, wi, wh, None, y, r, kiln.ones_like(y), None, None, False, 31)
    zeros = kiln.ops.lstm_layer_backward(x, h, c, wi, wh, None, y, r, kiln.ones_like(y), kiln.zeros(2, 16),
                                         kiln.zeros(2, 16), False, 31)
    for a, b in zip(left_out[:5], zeros[:5]):
        assert torch.equal(to_torch(a), to_torch(b))
    wg, whg = kiln.randn(48, 4), kiln.randn(48, 16)
    y, hn, r = kiln.ops.gru_layer(x, h, wg, whg, None, None, False)
    a = kiln.ops.gru_layer_backward(x, h, wg, whg, y, r, None, kiln.ones_like(hn), False, 15)
    b = kiln.ops.gru_layer_backward(x, h, wg, whg, y, r, kiln.zeros_like(y), kiln.ones_like(hn), False, 15)
    for u, v in zip(a[:4], b[:4]):
        assert torch.equal(to_torch(u), to_torch(v))
    with pytest.raises(RuntimeError, match="reserve has shape"):
        kiln.ops.gru_layer_backward(x, h, wg, whg, y, r[:5], None, None, False, 15)
    wr, whr = kiln.randn(16, 4), kiln.randn(16, 16)
    y, hn = kiln.ops.rnn_layer(x, h, wr, whr, None, None, False, False)
    a = kiln.ops.rnn_layer_backward(x, h, wr, whr, y, None, kiln.ones_like(hn), False, False, 31)
    b = kiln.ops.rnn_layer_backward(x, h, wr, whr, y, kiln.zeros_like(y), kiln.ones_like(hn), False, False, 31)
    for u, v in zip(a[:4], b[:4]):
        assert torch.equal(to_torch(u), to_torch(v))
    with pytest.raises(RuntimeError, match="output has shape"):
        kiln.ops.rnn_layer_backward(x, h, wr, whr, y[:1], None, None, False, False, 31)
