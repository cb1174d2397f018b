"""Autograd vs torch: in-place ops and saved-tensor versions, in-place ops on views (torch's
CopySlices), double backward, deep graphs and the memory a graph holds."""
import gc

import pytest

import kiln
from autograd_helpers import P, R, both, name
from helpers import make


# ---- in-place ops and saved-tensor versions -----------------------------------------------------
def test_inplace_version_errors():
    def saved_output(m, x):
        x.requires_grad_()
        y = x.exp()
        y.add_(1)
        y.sum().backward()

    both(saved_output, R(3), exc="modified by an inplace operation")

    def saved_input(m, x):
        x.requires_grad_()
        y = x * 1
        z = y * y
        y.mul_(2)
        z.sum().backward()

    both(saved_input, R(3), exc="is at version")

    def through_view(m, x):
        x.requires_grad_()
        y = x.sin()
        z = y.cos()  # saves y
        y[1:].zero_()
        z.sum().backward()

    both(through_view, R(3), exc="modified by an inplace operation")

    def not_saved_ok(m, x):
        x.requires_grad_()
        y = x * 2
        z = y + 1  # add saves nothing
        y.mul_(3)
        (z + y).sum().backward()
        return x.grad, y, z

    both(not_saved_ok, R(3))

    def inplace_chain(m, x, w):
        x.requires_grad_()
        w.requires_grad_()
        y = x * 1
        y.mul_(w)
        y.add_(w, alpha=2)
        y.sub_(x)
        y.exp_()  # saves its output: the last in-place op
        y.sum().backward()
        return x.grad, w.grad, y

    both(inplace_chain, R(3), R(3, seed=1))

    def on_leaf(m, x):
        x.requires_grad_()
        x.add_(1)

    both(on_leaf, R(3), exc="leaf Variable that requires grad")

    def on_leaf_no_grad(m, x):
        x.requires_grad_()
        with m.no_grad():
            x.add_(1)
            x[0] = 7.0
        (x * x).sum().backward()
        return x, x.grad, x.is_leaf

    both(on_leaf_no_grad, R(3))

    def into_plain(m, x, a):  # a tensor without history gets one from an in-place op
        x.requires_grad_()
        a.mul_(x)
        a.sum().backward()
        return x.grad, a.requires_grad, a.is_leaf, name(a)

    both(into_plain, R(3), R(3, seed=1))


# ---- in-place ops on views (CopySlices) ---------------------------------------------------------
def test_inplace_on_view_rebases_base():
    def select_mul(m, x):
        x.requires_grad_()
        y = x * 1
        y[0].mul_(2)
        y.sum().backward()
        return x.grad, y, name(y)

    both(select_mul, R(3))

    def setitem_column(m, x):
        x.requires_grad_()
        y = x * x
        y[:, 1] = 0
        (y * 3).sum().backward()
        return x.grad, y

    both(setitem_column, R(2, 3))

    def setitem_from_grad_tensor(m, x, w):
        x.requires_grad_()
        w.requires_grad_()
        y = x.sin()
        y[1:, ::2] = w  # w receives the gradient of the region, x the rest
        (y * y).sum().backward()
        return x.grad, w.grad

    both(setitem_from_grad_tensor, R(3, 4), R(2, 2, seed=1))

    def view_of_view(m, x, w):
        x.requires_grad_()
        w.requires_grad_()
        y = x.sin()
        v = y.t()[1:3].unsqueeze(0)
        v.mul_(w)  # broadcast w
        v.add_(1)
        y.pow(2).sum().backward()
        return x.grad, w.grad, y

    both(view_of_view, R(4, 3), R(1, 4, seed=1))

    def view_used_after(m, x):
        x.requires_grad_()
        y = x * 2
        v = y[1:]
        v.exp_()
        (v * 3).sum().backward()  # through the view's rebuilt history
        return x.grad, v

    both(view_used_after, R(4))

    def other_view_sees_change(m, x):
        x.requires_grad_()
        y = x * 1
        a = y[:2]
        b = y[1:]  # overlaps a
        a.mul_(5)
        (b * b).sum().backward()  # b's history is rebuilt from y's new history
        return x.grad

    both(other_view_sees_change, R(3))

    def base_inplace_then_view(m, x):
        x.requires_grad_()
        y = x * 1
        v = y[0:2]
        y.mul_(3)
        v.sum().backward()
        return x.grad

    both(base_inplace_then_view, R(3))

    def index_put_view(m, x, w):
        x.requires_grad_()
        w.requires_grad_()
        y = x * 1
        y[1][m.tensor([0, 2])] = w
        y.sum().backward()
        return x.grad, w.grad

    both(index_put_view, R(2, 3), R(2, seed=1))

    def retained_base(m, x):
        x.requires_grad_()
        y = x * 2
        y.retain_grad()
        y[1].mul_(3)
        y.sum().backward()
        return y.grad, x.grad

    both(retained_base, R(3))

    def view_of_leaf(m, x):
        x.requires_grad_()
        x[0].mul_(2)

    both(view_of_leaf, R(3), exc="view of a leaf Variable")

    def view_of_leaf_setitem(m, x):
        x.requires_grad_()
        x[1:] = 0

    both(view_of_leaf_setitem, R(3), exc="leaf Variable")

    def double_backward(m, x):
        x.requires_grad_()
        y = x * x
        y[1:].mul_(x[1:])
        g, = m.autograd.grad(y.sum(), x, create_graph=True)
        g.sum().backward()
        return g, x.grad

    both(double_backward, R(3))

    def twice_without_retain(m, x):
        x.requires_grad_()
        y = x * 1
        y[0].exp_()
        s = y.sum()
        s.backward()
        s.backward()

    both(twice_without_retain, R(3), exc="second time")


def test_inplace_on_view_complex_and_reshape():
    def f(m, x):
        x.requires_grad_()
        y = x * 1
        v = y.view(2, 3)
        v[:, 0].pow_(2)
        m.view_as_real(y).sum().backward()
        return x.grad

    both(f, make((6,), "complex128", low=-1, high=1))

    def reshape_flat(m, x):
        x.requires_grad_()
        y = x.sin()
        y.view(-1)[::2].mul_(0.5)
        y.sum().backward()
        return x.grad

    both(reshape_flat, R(2, 3))


# ---- double backward ----------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["mul", "div", "exp", "tanh", "sigmoid", "pow", "matmul", "mean_bcast", "sin"])
def test_double_backward(op):
    fns = {
        "mul": lambda m, x, w: (x * w * x).sum(),
        "div": lambda m, x, w: (x / (w * w + 1)).sum(),
        "exp": lambda m, x, w: (x.exp() * w).sum(),
        "tanh": lambda m, x, w: (x * w).tanh().sum(),
        "sigmoid": lambda m, x, w: m.sigmoid(x * w).sum(),
        "pow": lambda m, x, w: (x * x + 1).pow(1.5).sum() + (w * x).pow(3).sum(),
        "matmul": lambda m, x, w: (x.reshape(2, 3) @ w.reshape(3, 2)).pow(2).sum(),
        "mean_bcast": lambda m, x, w: ((x.reshape(2, 3) - w[:3]) ** 2).mean(),
        "sin": lambda m, x, w: (x.sin() * w.cos()).sum(),
    }

    def f(m, x, w, v):
        x.requires_grad_()
        w.requires_grad_()
        y = fns[op](m, x, w)
        gx, gw = m.autograd.grad(y, [x, w], create_graph=True)
        hv = m.autograd.grad((gx * v).sum() + gw.sum(), [x, w], allow_unused=True, retain_graph=True)
        (gx * gx).sum().backward()  # backward through the first-order graph
        return gx, gw, hv, x.grad, w.grad

    both(f, R(6), P(6, seed=1), R(6, seed=2), rtol=1e-6, atol=1e-8)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_backward_create_graph_gives_differentiable_grad():
    def f(m, x):
        x.requires_grad_()
        (x ** 3).sum().backward(create_graph=True)
        g = x.grad
        r = [g.requires_grad, g.clone().detach()]
        x.grad = None
        g.sum().backward()
        r.append(x.grad)
        return r

    both(f, R(3))


# ---- deep graphs and memory ---------------------------------------------------------------------
def test_long_chain_no_stack_overflow():
    def f(m, x):
        x.requires_grad_()
        y = x
        for _ in range(100_000):
            y = y * 1.0
        y.sum().backward()
        del y  # freeing a 100k-node graph must not recurse either
        return x.grad

    both(f, R(3))


def test_saved_tensors_freed_after_backward():
    n = 1 << 18  # 2 MiB of float64

    def run(retain):
        x = kiln.rand(n, dtype=kiln.float64).requires_grad_()
        y = x.exp().exp().exp().sum()  # the inner exps' outputs live only in the graph
        gc.collect()
        before = kiln.memory_stats()["allocated_bytes.all.current"]
        y.backward(retain_graph=retain)
        gc.collect()
        after = kiln.memory_stats()["allocated_bytes.all.current"]
        del y, x
        return after - before

    freed, kept = run(False), run(True)
    # without retain_graph the three saved exp outputs (3 x 2 MiB) go; x.grad (2 MiB) comes
    assert freed <= -2 * 8 * n + 1024, freed
    assert kept >= 8 * n - 1024, kept
    assert kept - freed >= 3 * 8 * n - 1024

    # and nothing stays behind once the graph and its tensors are gone
    base = kiln.memory_stats()["allocated_bytes.all.current"]
    for retain in (False, True):
        x = kiln.rand(n, dtype=kiln.float64).requires_grad_()
        y = x.exp().exp().sum()
        y.backward(retain_graph=retain)
        del x, y
        gc.collect()
        assert kiln.memory_stats()["allocated_bytes.all.current"] <= base + 1024


def test_custom_function_frees_graph():
    class Sq(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * x
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return 2 * g * x

    n = 1 << 16
    gc.collect()
    base = kiln.memory_stats()["allocated_bytes.all.current"]
    x = kiln.rand(n, dtype=kiln.float64).requires_grad_()
    y = Sq.apply(x.exp())
    y.sum().backward()
    del x, y
    gc.collect()
    assert kiln.memory_stats()["allocated_bytes.all.current"] <= base + 1024  # no reference cycle
