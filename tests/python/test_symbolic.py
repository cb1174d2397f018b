"""Symbolic sizes (DESIGN.md section 2, docs/decisions.md 20): kiln.ShapeEnv, kiln.SymInt, meta tensors
whose sizes are expressions over named symbols, and the guards a trace records.

The oracle for a symbolic run is the concrete one: an output's symbolic shape, evaluated at the
symbols' values, must equal the shape a CPU run with inputs of those sizes produces; and a guard-free
trace must hold for every value in the symbols' ranges."""

import pytest

import kiln
from helpers import load_quickstart
import kiln.nn.functional as F


def meta(*sizes, dtype=kiln.float32):
    return kiln.empty(tuple(sizes), dtype=dtype, device="meta")


def evaluate(env, shape, values):
    return tuple(env.evaluate(s, values) for s in shape)


def test_symint_arithmetic_and_printing():
    with kiln.ShapeEnv() as env:
        B = env.create_symbol("batch", 4)
        T = env.create_symbol("seq", 5)
        assert isinstance(B, kiln.SymInt)
        assert str(B * T * 3) == "3*batch*seq"
        assert str(T - B) == "seq - batch"
        assert (B * T) // T is not None and str((B * T) // T) == "batch"  # exact division simplifies
        assert (B * 64) % 64 == 0
        assert isinstance(B - B, int) and B - B == 0  # concrete results are plain ints
        assert B.hint == 4 and (B * T).hint == 20
        assert str(T // 2) == "(seq//2)" and (T // 2).hint == 2
        assert not (B == 1) and B > 1  # decided by the range (sizes are >= 2): no guard
        assert repr(B == T) == "SymBool(undecided)"  # printing a comparison asks nothing
        assert env.guards == []


def test_guards_record_the_python_line():
    with kiln.ShapeEnv() as env:
        T = env.create_symbol("seq", 5)
        n = int(T)  # specialises
        assert n == 5
        text, where, spec = env.guards[0]
        assert text == "seq == 5" and spec
        assert where.endswith(f"test_symbolic.py:{test_guards_record_the_python_line.__code__.co_firstlineno + 3}")
        assert env.check([5]) is None
        assert "seq == 5" in env.check([6])
        S = env.create_symbol("other", 7, 1, 16)
        if S != 1:  # may be 1: a guard
            pass
        assert env.guards[-1][0] == "other != 1"
        assert "other != 1" in env.check([5, 1])
        assert "outside its range" in env.check([5, 17])


def test_symbolic_meta_ops_keep_sizes_symbolic():
    with kiln.ShapeEnv() as env:
        B, T = env.create_symbol("batch", 4), env.create_symbol("seq", 5)
        x = meta(B, T, 8)
        assert str(tuple(x.shape)) == "(batch, seq, 8)"
        w = meta(8, 16)
        y = F.relu(x @ w + 1)
        assert str(tuple(y.shape)) == "(batch, seq, 16)"
        assert str(tuple(y.view(B * T, 16).shape)) == "(batch*seq, 16)"
        assert str(tuple(y.reshape(-1, 16).shape)) == "(batch*seq, 16)"
        assert str(tuple(y.transpose(0, 1).reshape(-1, 16).shape)) == "(batch*seq, 16)"
        assert str(tuple(kiln.cat([x, x], 1).shape)) == "(batch, 2*seq, 8)"
        assert str(tuple(y.sum(1).shape)) == "(batch, 16)"
        assert str(tuple(y.softmax(-1).shape)) == "(batch, seq, 16)"
        assert str(y.numel()) == "16*batch*seq"
        assert str(tuple(kiln.arange(T, device="meta").shape)) == "(seq,)"
        assert env.guards == [], env.guards


def _quickstart():
    return load_quickstart()


def test_quickstart_forward_and_loss_trace_with_symbolic_batch_and_sequence():
    qs = _quickstart()
    kiln.manual_seed(0)
    vocab, context = 13, 32
    model = qs.CharTransformer(vocab, context, d_model=32, n_layers=2, n_heads=4)
    model.eval()
    real = {}
    for b, t in [(2, 3), (5, 9)]:  # the oracle: concrete runs at two sizes
        idx = kiln.randint(0, vocab, (b, t))
        real[(b, t)] = (tuple(model(idx).shape), tuple(qs.loss_fn(model, idx, idx).shape))
    model.to("meta")
    with kiln.ShapeEnv() as env:
        B = env.create_symbol("batch", 4)
        T = env.create_symbol("seq", 7, 2, context)
        idx = meta(B, T, dtype=kiln.int64)
        logits = model(idx)
        loss = qs.loss_fn(model, idx, idx)
        assert str(tuple(logits.shape)) == f"(batch, seq, {vocab})"
        assert tuple(loss.shape) == ()
        assert env.guards == [], env.guards  # nothing pinned the batch or the sequence length
        for (b, t), (lshape, loss_shape) in real.items():
            assert env.check([b, t]) is None
            assert evaluate(env, logits.shape, [b, t]) == lshape
            assert loss_shape == ()
        assert "outside its range" in env.check([2, context + 1])


def test_quickstart_backward_trace_with_symbolic_batch_and_sequence():
    # forward, loss AND loss.backward() on meta tensors: the derivatives and the engine compute in
    # SymInts, so nothing pins the batch or the sequence length, and each gradient is shaped like its
    # parameter
    qs = _quickstart()
    kiln.manual_seed(0)
    vocab, context = 13, 32
    model = qs.CharTransformer(vocab, context, d_model=32, n_layers=2, n_heads=4)
    model.to("meta")
    with kiln.ShapeEnv() as env:
        B = env.create_symbol("batch", 4)
        T = env.create_symbol("seq", 7, 2, context)
        idx = meta(B, T, dtype=kiln.int64)
        loss = qs.loss_fn(model, idx, idx)
        loss.backward()
        assert env.guards == [], env.guards
        params = list(model.named_parameters())
        assert params
        for name, p in params:
            assert p.grad is not None, name
            assert p.grad.device.type == "meta"
            assert tuple(p.grad.shape) == tuple(p.shape), name
        assert env.check([2, 3]) is None and env.check([5, context]) is None


_leaves = []


def _leaf(*sizes):
    t = meta(*sizes).requires_grad_(True)
    _leaves.append(t)
    return t


_BACKWARD_CASES = {
    "broadcast_add": lambda B, T: _leaf(B, T, 4) + _leaf(T, 4),
    "expand": lambda B, T: _leaf(B, 1, 4).expand(B, T, 4),
    "mean_last": lambda B, T: _leaf(B, T, 4).mean(-1),
    "mean_seq": lambda B, T: _leaf(B, T, 4).mean(1),
    "mean_all": lambda B, T: _leaf(B, T).mean(),
    "log_softmax": lambda B, T: _leaf(B, T, 4).log_softmax(-1),
    "sort": lambda B, T: _leaf(B, T).sort(1)[0],
    "max_dim": lambda B, T: _leaf(B, T).max(1)[0],
    "cat": lambda B, T: kiln.cat([_leaf(B, T), _leaf(B, 3), _leaf(B, T)], 1),
    "split": lambda B, T: _leaf(B, T, 6).split(2, dim=2)[1],
    "gather": lambda B, T: _leaf(B, T).gather(1, kiln.zeros(B, T, dtype=kiln.int64, device="meta")),
    "nll_loss": lambda B, T: F.nll_loss(_leaf(B, 5), kiln.zeros(B, dtype=kiln.int64, device="meta")),
    "repeat": lambda B, T: _leaf(B, T).repeat(2, 1),
    "permute": lambda B, T: _leaf(B, T, 4).permute(2, 0, 1),
    "max_pool2d": lambda B, T: F.max_pool2d(_leaf(B, 3, T, 8), 2),
    "avg_pool2d": lambda B, T: F.avg_pool2d(_leaf(B, 3, T, 8), 2),
    "conv2d": lambda B, T: F.conv2d(_leaf(B, 3, 10, 10), _leaf(5, 3, 3, 3), _leaf(5), stride=2, padding=1),
    "conv_transpose1d": lambda B, T: F.conv_transpose1d(_leaf(B, 3, 10), _leaf(3, 5, 3), stride=2),
    "diagonal": lambda B, T: _leaf(B, T, T).diagonal(0, 1, 2),
    "diagonal_offset": lambda B, T: _leaf(B, T, T + 2).diagonal(1, 1, 2),
    "diag": lambda B, T: kiln.diag(_leaf(T, T)),
    "diag_1d": lambda B, T: kiln.diag(_leaf(T), 1),
    "unfold": lambda B, T: _leaf(B, T).unfold(1, 2, 1),
    "pad_reflect": lambda B, T: F.pad(_leaf(B, 3, T), (1, 1), mode="reflect"),
    "pad_replicate": lambda B, T: F.pad(_leaf(B, 3, T), (1, 2), mode="replicate"),
    "pad_circular": lambda B, T: F.pad(_leaf(B, 3, T), (1, 2), mode="circular"),
    "masked_scatter": lambda B, T: _leaf(B, T).masked_scatter(kiln.zeros(B, T, dtype=kiln.bool, device="meta"),
                                                              _leaf(B, T)),
    "take": lambda B, T: kiln.take(_leaf(B, T), kiln.zeros(3, dtype=kiln.int64, device="meta")),
    "slice_setitem": lambda B, T: _setitem(_leaf(B, T), _leaf(B)),
}


def _setitem(x, v):
    y = x * 2
    y[:, 0] = v * 3  # an in-place write into a view: the base's history becomes a CopySlices
    return y


@pytest.mark.parametrize("name", sorted(_BACKWARD_CASES))
def test_derivatives_keep_sizes_symbolic(name):
    with kiln.ShapeEnv() as env:
        B, T = env.create_symbol("batch", 4), env.create_symbol("seq", 6, 4)  # seq >= 4: a pooled seq > 1
        _leaves.clear()
        y = _BACKWARD_CASES[name](B, T)
        y.sum().backward()
        assert env.guards == [], env.guards
        for x in _leaves:  # each gradient has its input's symbolic shape
            assert x.grad is not None and str(tuple(x.grad.shape)) == str(tuple(x.shape))
        _leaves.clear()


def test_in_place_write_into_a_view_under_create_graph_stays_symbolic():
    # the double-backward form of CopySlices (an index_put on the flat base) is built in SymInts
    with kiln.ShapeEnv() as env:
        B, T = env.create_symbol("batch", 4), env.create_symbol("seq", 6, 4)
        x, v = meta(B, T).requires_grad_(True), meta(B).requires_grad_(True)
        y = _setitem(x, v)
        (gx, gv) = kiln.autograd.grad(y.sum(), [x, v], create_graph=True)
        assert env.guards == [], env.guards
        assert str(tuple(gx.shape)) == str(tuple(x.shape)) and str(tuple(gv.shape)) == str(tuple(v.shape))


def test_ranges_decide_comparisons_of_correlated_terms():
    # 2*b*s - 2*b against 2*s - 2 (a reshape of a (b, s - 1, 2) tensor): term-by-term intervals are
    # unbounded; the common factor and monotonicity in each symbol decide it without a guard
    with kiln.ShapeEnv() as env:
        b, s = env.create_symbol("b", 4), env.create_symbol("s", 6, 4)
        n = 2 * b * s - 2 * b
        assert n != 0 and n > 1 and 2 * s - 2 < n
        assert (b - 1) * (s - 1) >= 3 and not (b * s - b - s + 1 < 3)
        assert env.guards == []
        assert repr(b * s - 3 * b == 5) == "SymBool(undecided)"  # b = 5, s = 4 gives 5: it stays a question
        assert repr(b - s == 0) == "SymBool(undecided)"


def test_a_plain_int_pins_the_dimension_and_says_where():
    with kiln.ShapeEnv() as env:
        B, T = env.create_symbol("batch", 4), env.create_symbol("seq", 5)
        x = meta(B, T, 8)
        n = x.shape[1] * 2
        y = x.view(B, int(n) // 2, 8)  # int() specialises seq
        assert str(tuple(y.shape)) == "(batch, 5, 8)"
        assert env.guards[0][0] == "2*seq == 10"  # (view's size check adds one implied by it)
        assert "test_symbolic.py" in env.guards[0][1]
        assert env.check([7, 5]) is None and "2*seq == 10" in env.check([7, 6])


def test_symbolic_sizes_only_on_meta_and_only_inside_their_env():
    with kiln.ShapeEnv() as env:
        B = env.create_symbol("batch", 4)
        with pytest.raises(RuntimeError, match="meta"):
            kiln.empty(B, 3)  # a CPU tensor needs numbers
    with pytest.raises(RuntimeError, match="ShapeEnv"):
        str(B)  # the env is no longer active
    with pytest.raises(ValueError, match="outside its range"):
        kiln.ShapeEnv().create_symbol("x", 1)  # sizes 0 and 1 need an explicit min


def test_data_dependent_sizes_are_unbacked_symbols():
    with kiln.ShapeEnv() as env:
        B = env.create_symbol("batch", 4)
        x = meta(B, 3)
        nz = kiln.nonzero(x)
        n = nz.shape[0]
        assert str(tuple(nz.shape)) == "(u0, 2)" and nz.dtype == kiln.int64
        assert n.range() == (0, None)  # at most numel, which is symbolic here
        m = kiln.masked_select(meta(2, 3), meta(2, 3, dtype=kiln.bool))
        assert str(tuple(m.shape)) == "(u1,)" and m.shape[0].range() == (0, 6)
        r = kiln.repeat_interleave(meta(5, dtype=kiln.int64), output_size=B * 2)
        assert str(tuple(r.shape)) == "(2*batch,)"
        assert str(tuple(kiln.repeat_interleave(meta(5, dtype=kiln.int64)).shape)) == "(u2,)"
        assert (n >= 0) is True  # decided by the range
        with pytest.raises(RuntimeError, match="depends on a tensor's data"):
            bool(n == 3)  # no example value to decide it with
        with pytest.raises(RuntimeError, match="depends on a tensor's data"):
            int(n)
        assert str(tuple((nz + 1).shape)) == "(u0, 2)"  # ops on it stay symbolic
    with pytest.raises(NotImplementedError):  # outside a trace a meta tensor cannot say
        kiln.nonzero(meta(3))
