"""The autograd engine vs torch: every case runs the same code on torch and on kiln (fn(m, ...) with m
the module) and compares values, .grad, flags and exception types.

Names of grad_fn nodes are compared only where kiln's are meaningful: an op's node is named after its
table op ("MulBackward0" from mul), so ops torch decomposes differently (sum(dim) is torch's
SumBackward1, matmul of 2-D tensors its MmBackward0, a view's history after an in-place op its
AsStridedBackward0) have other names in kiln."""
import warnings

import pytest
import torch

import kiln
from autograd_helpers import R, both, name
from helpers import make


# ---- backward -----------------------------------------------------------------------------------
def test_backward_broadcast_and_strided_leaves():
    def f(m, x, w, b):
        for t in (x, w, b):
            t.requires_grad_()
        y = (x * w + b).exp().sum()
        y.backward()
        return y, x.grad, w.grad, b.grad, x.is_leaf, y.is_leaf, y.requires_grad

    both(f, R(5, 4).t(), R(1, 5, seed=1), R(5, seed=2))  # transposed x, broadcast w and b
    both(f, R(8, 6)[::2, 1::2], R(3, seed=1).unsqueeze(0).expand(4, 3), R(1, seed=2))


def test_backward_gradient_argument():
    def f(m, x, g):
        x.requires_grad_()
        y = x * x + 1
        y.backward(g)
        return x.grad

    both(f, R(3, 4), R(3, 4, seed=1))
    both(f, R(3, 4), R(4, 3, seed=1).t())  # a strided gradient
    both(f, R(3, 4), R(4, 3, seed=1), exc="Mismatch in shape")
    both(f, R(3, 4), R(1, seed=1), exc="Mismatch in shape")  # even when broadcastable


def test_backward_errors():
    def nonscalar(m, x):
        x.requires_grad_()
        (x * 2).backward()

    both(nonscalar, R(3), exc="implicitly created only for scalar outputs")

    def no_grad_tensor(m, x):
        (x * 2).sum().backward()

    both(no_grad_tensor, R(3), exc="does not require grad")

    def twice(m, x):
        x.requires_grad_()
        y = (x.exp() * x).sum()
        y.backward()
        y.backward()

    both(twice, R(3), exc="backward through the graph a second time")

    def twice_no_saved(m, x):  # nothing saved: a second backward is allowed (torch too)
        x.requires_grad_()
        y = (x + 1).sum()
        y.backward()
        y.backward()
        return x.grad

    both(twice_no_saved, R(3))

    def out_arg(m, x, o):
        x.requires_grad_()
        m.add(x, x, out=o)

    both(out_arg, R(3), R(3, seed=1), exc="don't support automatic differentiation")

    def out_arg_no_grad(m, x, o):
        x.requires_grad_()
        with m.no_grad():
            m.mul(x, x, out=o)
        return o, o.requires_grad

    both(out_arg_no_grad, R(3), R(3, seed=1))

    def complex_implicit(m, x):
        x.requires_grad_()
        (x * x).sum().backward()

    both(complex_implicit, make((3,), "complex128"), exc="real scalar outputs")


def test_retain_graph_and_accumulation():
    def f(m, x, w):
        x.requires_grad_()
        w.requires_grad_()
        y = (x.sin() * w).sum()
        y.backward(retain_graph=True)
        g1 = x.grad.clone()
        y.backward()  # accumulates
        z = (x * w).pow(2).sum()
        z.backward()  # a second graph, accumulates again
        return g1, x.grad, w.grad

    both(f, R(4), R(4, seed=1))

    def reset(m, x):
        x.requires_grad_()
        (x * 3).sum().backward()
        x.grad = None
        (x * x).sum().backward()
        g = x.grad.clone()
        x.grad.zero_()
        (x * 2).sum().backward()
        return g, x.grad

    both(reset, R(4))


def test_backward_inputs_argument():
    def leaf_inputs(m, x, w):
        x.requires_grad_()
        w.requires_grad_()
        (x * w).sum().backward(inputs=[x])
        return x.grad, w.grad

    both(leaf_inputs, R(3), R(3, seed=1))

    def nonleaf_inputs(m, x, w):
        x.requires_grad_()
        w.requires_grad_()
        y = x * w
        z = (y * y).sum()
        z.backward(inputs=[y, w])
        return x.grad, w.grad, y.grad, y.is_leaf

    both(nonleaf_inputs, R(3), R(3, seed=1))

    def nonleaf_retained(m, x):
        x.requires_grad_()
        y = x.exp()
        y.retain_grad()
        (y * 2).sum().backward(inputs=[y])
        return y.grad, x.grad

    both(nonleaf_retained, R(3))

    def tensor_method(m, x):
        x.requires_grad_()
        y = x * 2
        m.autograd.backward([(y * y).sum()], inputs=x)
        return x.grad

    both(tensor_method, R(3))

    def empty(m, x):
        x.requires_grad_()
        (x * 2).sum().backward(inputs=[])

    both(empty, R(3), exc="cannot be empty")

    def not_requiring(m, x, w):
        x.requires_grad_()
        (x * w).sum().backward(inputs=[w])

    both(not_requiring, R(3), R(3, seed=1), exc="grad")


# ---- autograd.grad ------------------------------------------------------------------------------
def test_grad_several_outputs_and_inputs():
    def f(m, x, w, g):
        x.requires_grad_()
        w.requires_grad_()
        y1 = (x * w).tanh()
        y2 = x.exp().sum()
        gx, gw = m.autograd.grad([y1, y2], [x, w], grad_outputs=[g, None])
        return gx, gw, x.grad, gx.requires_grad

    both(f, R(2, 3), R(3, seed=1), R(2, 3, seed=2))

    def single(m, x):
        x.requires_grad_()
        return m.autograd.grad((x ** 3).sum(), x)

    both(single, R(4))

    def nonleaf_input(m, x):
        x.requires_grad_()
        y = x * 2
        z = (y.sin() * y).sum()
        return m.autograd.grad(z, [y, x])

    both(nonleaf_input, R(4))


def test_grad_unused_and_materialize():
    def unused(m, x, w, allow):
        x.requires_grad_()
        w.requires_grad_()
        return m.autograd.grad((x * 2).sum(), [x, w], allow_unused=allow)

    both(lambda m, x, w: unused(m, x, w, True), R(3), R(2, seed=1))
    both(lambda m, x, w: unused(m, x, w, False), R(3), R(2, seed=1), exc="appears to not have been used")

    def materialize(m, x, w):
        x.requires_grad_()
        w.requires_grad_()
        return m.autograd.grad((x * 2).sum(), [x, w], materialize_grads=True)

    both(materialize, R(3), R(2, seed=1))

    def not_requiring(m, x, w):
        x.requires_grad_()
        m.autograd.grad((x * w).sum(), [w])

    both(not_requiring, R(3), R(3, seed=1), exc="does not require grad")

    def output_not_requiring(m, x):
        x.requires_grad_()
        m.autograd.grad([(x * 2).sum(), x.detach().sum()], [x])

    both(output_not_requiring, R(3), exc="does not require grad")


def test_grad_retain_graph_default_and_no_accumulation():
    def f(m, x):
        x.requires_grad_()
        y = (x.exp() * x).sum()
        g1 = m.autograd.grad(y, x, retain_graph=True)[0]
        g2 = m.autograd.grad(y, x)[0]
        return g1, g2, x.grad  # grad() never touches .grad

    both(f, R(3))

    def freed(m, x):
        x.requires_grad_()
        y = (x.exp() * x).sum()
        m.autograd.grad(y, x)
        m.autograd.grad(y, x)

    both(freed, R(3), exc="second time")


# ---- tensor state -------------------------------------------------------------------------------
def test_retain_grad():
    def f(m, x):
        x.requires_grad_()
        y = x * 3
        y.retain_grad()
        y.retain_grad()  # twice: one retained gradient
        z = y.sin()
        w = z * 1  # no retain: grad stays None
        w.sum().backward(retain_graph=True)
        g1 = y.grad.clone()
        w.sum().backward()
        x.retain_grad()  # a leaf: no-op
        return g1, y.grad, x.grad, y.retains_grad, z.retains_grad, x.retains_grad

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        both(f, R(4))

    def no_grad_tensor(m, x):
        x.retain_grad()

    both(no_grad_tensor, R(2), exc="requires_grad=False")

    def nonleaf_grad_is_none(m, x):
        x.requires_grad_()
        y = x * 2
        y.sum().backward()
        return y.grad

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        both(nonleaf_grad_is_none, R(2))


def test_requires_grad_flags():
    def f(m, x):
        a = x.requires_grad
        x.requires_grad_()
        y = x * 2
        y.requires_grad_()  # a non-leaf: no-op for True
        return a, x.requires_grad, x.is_leaf, y.requires_grad, y.is_leaf, (x.detach() * 2).requires_grad

    both(f, R(2))

    def nonleaf_false(m, x):
        x.requires_grad_()
        (x * 2).requires_grad_(False)

    both(nonleaf_false, R(2), exc="only change requires_grad flags of leaf")

    def nonleaf_attr(m, x):
        x.requires_grad_()
        y = x * 2
        y.requires_grad = True

    both(nonleaf_attr, R(2), exc="only change requires_grad flags of leaf")

    def integer(m, x):
        x.to(m.int64).requires_grad_()

    both(integer, R(2), exc="floating point and complex")

    def factory(m):
        return m.ones(2, requires_grad=True).requires_grad, m.zeros(2).requires_grad

    both(factory)

    def ints_from_ops(m, x):  # integer results do not require grad
        x.requires_grad_()
        return x.argmax().requires_grad, (x > 0).requires_grad, x.sum().requires_grad

    both(ints_from_ops, R(3))


def test_detach_and_data():
    def detach(m, x):
        x.requires_grad_()
        y = x * 2
        d = y.detach()
        d.add_(1)  # shares storage (and version counter) with y
        return y, d.requires_grad, d.is_leaf, d.grad_fn is None

    both(detach, R(3))

    def detach_version(m, x):
        x.requires_grad_()
        y = x.exp()
        y.detach().mul_(2)  # y is saved by exp's backward: the change is seen
        y.sum().backward()

    both(detach_version, R(3), exc="modified by an inplace operation")

    def data_no_version(m, x):
        x.requires_grad_()
        y = x.exp()
        y.data.mul_(2)  # .data has its own version counter: autograd does not notice
        y.sum().backward()
        return x.grad, y

    both(data_no_version, R(3))

    def data_props(m, x):
        x.requires_grad_()
        d = x.data
        d[0] = 5.0
        return x, d.requires_grad, d.is_leaf

    both(data_props, R(3))

    def data_assign(m, x, z):
        x.requires_grad_()
        x.data = z
        (x * x).sum().backward()
        return x, x.grad, x.requires_grad

    both(data_assign, R(3), R(3, seed=1))

    def detach_inplace(m, x):
        x.requires_grad_()
        y = x * 2
        y.detach_()
        return y.requires_grad, y.is_leaf, y.grad_fn is None

    both(detach_inplace, R(3))

    def detach_view_inplace(m, x):
        x.requires_grad_()
        y = x * 2
        y[0:2].detach_()

    both(detach_view_inplace, R(3), exc="Can't detach views in-place")


def test_grad_fn_names_and_next_functions():
    def f(m, x, w):
        x.requires_grad_()
        w.requires_grad_()
        c = x.detach()
        a = x * w
        b = a + c
        return [name(t) for t in (x, a, b, a - x, a / w, -a, a.exp(), a.sum(), a.permute(1, 0),
                                  a.sin(), a.tanh(), x.pow(2), x.mean())] + \
               [[(None if fn is None else fn.name().split("::")[-1], nr) for fn, nr in b.grad_fn.next_functions],
                [(None if fn is None else fn.name().split("::")[-1], nr) for fn, nr in a.grad_fn.next_functions]]

    both(f, R(2, 3), R(2, 3, seed=1))

    def assignment_copy_slices(m, x):
        x.requires_grad_()
        y = x * 1
        y[0] = 2.0
        return name(y)

    both(assignment_copy_slices, R(3))


def test_set_grad_checks():
    def f(m, x, g):
        x.requires_grad_()
        x.grad = g

    both(f, R(3), R(4), exc="different size")
    both(f, R(3), R(3, dtype="float32"), exc="different type")


# ---- hooks --------------------------------------------------------------------------------------
def test_hooks_on_leaves_and_nonleaves():
    def f(m, x):
        x.requires_grad_()
        seen = []
        hx = x.register_hook(lambda g: g * 10)
        y = x * x
        y.register_hook(lambda g: seen.append(g.clone()))  # returns None: keeps the gradient
        y.register_hook(lambda g: g + 1)  # runs after the first, its result flows on
        y.retain_grad()
        y.sum().backward()
        g1 = x.grad.clone()
        hx.remove()
        x.grad = None
        (x * x).sum().backward()
        return seen, g1, y.grad, x.grad

    both(f, R(3))

    def remove_nonleaf(m, x):
        x.requires_grad_()
        y = x * 2
        h = y.register_hook(lambda g: g * 100)
        h.remove()
        y.sum().backward()
        return x.grad

    both(remove_nonleaf, R(3))

    def in_grad(m, x):  # hooks run for autograd.grad too (a leaf's and a non-leaf's)
        x.requires_grad_()
        x.register_hook(lambda g: g * 3)
        y = x.exp()
        y.register_hook(lambda g: g * 2)
        return m.autograd.grad(y.sum(), x)

    both(in_grad, R(3))

    def not_requiring(m, x):
        x.register_hook(lambda g: g)

    both(not_requiring, R(3), exc="doesn't require gradient")


def test_hook_result_must_match_the_gradient():
    """A gradient a hook returns keeps the size and dtype of the one it got (torch's RuntimeError naming the
    hook), and is a tensor or None (TypeError); an expanded tensor of the right size is fine."""
    def run(hook, on_leaf=True):
        def f(m, x):
            x.requires_grad_()
            y = x * 2
            (x if on_leaf else y).register_hook(hook(m))
            (y * 1).sum().backward()
            return x.grad
        return f

    def named_hook(m):
        def my_hook(g):
            return m.ones(2, 2, dtype=g.dtype)
        return my_hook

    both(run(lambda m: lambda g: m.ones(4, dtype=g.dtype)), R(3), exc="hook '<lambda>' has changed the size of value")
    both(run(named_hook, on_leaf=False), R(3), exc="hook 'my_hook' has changed the size of value")
    both(run(lambda m: lambda g: g.float()), R(3), exc="hook '<lambda>' has changed the type of value")
    both(run(lambda m: lambda g: 3), R(3), exc="hook returned 'int'")
    both(run(lambda m: lambda g: m.full((1,), 5.0, dtype=g.dtype).expand(3), on_leaf=False), R(3))


# ---- grad modes ---------------------------------------------------------------------------------
def test_grad_mode_context_managers():
    def f(m, x):
        x.requires_grad_()
        r = []
        with m.no_grad():
            r.append((x * 2).requires_grad)
            r.append(m.is_grad_enabled())
            with m.enable_grad():
                r.append((x * 2).requires_grad)
                with m.set_grad_enabled(False):
                    r.append((x * 2).requires_grad)
                r.append(m.is_grad_enabled())
            r.append(m.is_grad_enabled())
        r.append(m.is_grad_enabled())
        m.set_grad_enabled(False)  # as a function
        r.append((x * 2).requires_grad)
        m.set_grad_enabled(True)
        r.append((x * 2).requires_grad)
        return r

    both(f, R(2))


def test_grad_mode_decorators():
    def f(m, x):
        x.requires_grad_()

        @m.no_grad()
        def a(t):
            return (t * 2).requires_grad, m.is_grad_enabled()

        @m.enable_grad()
        def b(t):
            return (t * 2).requires_grad

        @m.set_grad_enabled(False)
        def c(t):
            return (t * 2).requires_grad

        @m.inference_mode()
        def d(t):
            return (t * 2).requires_grad, m.is_inference_mode_enabled()

        @m.inference_mode
        def e(t):
            return m.is_inference_mode_enabled()

        r = [a(x), b(x), m.is_grad_enabled()]
        with m.no_grad():
            r.append(b(x))  # enable_grad inside no_grad
        r += [c(x), m.is_grad_enabled(), d(x), e(x), m.is_inference_mode_enabled(), a(x)]
        return r

    both(f, R(2))


def test_inference_mode():
    def f(m, x):
        x.requires_grad_()
        with m.inference_mode():
            t = x * 2
            r = [m.is_inference_mode_enabled(), m.is_grad_enabled(), t.requires_grad, t.is_inference()]
            with m.inference_mode(False):
                u = x * 3
                r += [m.is_inference_mode_enabled(), u.is_inference()]
        r += [m.is_inference_mode_enabled(), x.is_inference(), (t + 1).is_inference(), t]
        return r

    both(f, R(3))

    def saved(m, x):
        x.requires_grad_()
        with m.inference_mode():
            t = x * 2
        (t * x).sum().backward()

    both(saved, R(3), exc="Inference tensors cannot be saved for backward")

    def inplace_outside(m, x):
        with m.inference_mode():
            t = x * 2
        t.add_(1)

    both(inplace_outside, R(3), exc="Inplace update to inference tensor outside InferenceMode")

    def inplace_inside(m, x):
        with m.inference_mode():
            t = x * 2
            t.add_(1)
        return t

    both(inplace_inside, R(3))

    def requires_grad_outside(m, x):
        with m.inference_mode():
            t = x * 2
        t.requires_grad_()

    both(requires_grad_outside, R(3), exc="inference tensor outside InferenceMode")

    def not_saved_ok(m, x):  # an inference tensor an op does not save is fine
        x.requires_grad_()
        with m.inference_mode():
            t = x * 2
        (x + t).sum().backward()
        return x.grad

    both(not_saved_ok, R(3))


# ---- anomaly mode -------------------------------------------------------------------------------
def test_anomaly_mode():
    def f(m, x):
        x.requires_grad_()
        with m.autograd.detect_anomaly():
            y = x.sqrt()  # sqrt(-1) = nan: its backward yields nan
            y.sum().backward()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        both(f, torch.tensor([-1.0, 4.0], dtype=torch.float64), exc="SqrtBackward0")
        both(f, torch.tensor([1.0, 4.0], dtype=torch.float64))

    def as_function(m, x):
        x.requires_grad_()
        m.autograd.set_detect_anomaly(True)
        try:
            r = [m.is_anomaly_enabled()]
            y = (x * 0).log()  # -inf forward; backward 0 * inf = nan in MulBackward0
            try:
                y.sum().backward()
            except RuntimeError as e:
                r.append("returned nan values" in str(e) and "MulBackward0" in str(e))
        finally:
            m.autograd.set_detect_anomaly(False)
        r.append(m.is_anomaly_enabled())
        with m.autograd.set_detect_anomaly(True):
            r.append(m.is_anomaly_enabled())
        r.append(m.is_anomaly_enabled())
        return r

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        both(as_function, R(2))

    def off(m, x):  # without anomaly mode a nan gradient is just a value
        x.requires_grad_()
        x.sqrt().sum().backward()
        return x.grad

    both(off, torch.tensor([-1.0, 4.0], dtype=torch.float64))


def test_anomaly_message_names_forward_location():
    x = kiln.tensor([-1.0], dtype=kiln.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with kiln.autograd.detect_anomaly():
            y = x.sqrt()  # the line the message must point at
            with pytest.raises(RuntimeError, match="SqrtBackward0") as e:
                y.backward()
    assert "y = x.sqrt()" in str(e.value)


# ---- more engine cases --------------------------------------------------------------------------
def test_hook_then_inplace_and_leaf_root():
    def f(m, x):
        x.requires_grad_()
        y = x * 2
        y.register_hook(lambda g: g * 10)  # sees the gradient w.r.t. y's value before mul_
        y.mul_(3)
        y.sum().backward()
        return x.grad

    both(f, R(3))

    def leaf_root(m, x, g):
        x.requires_grad_()
        x.backward(g)
        x.backward(g)
        return x.grad

    both(leaf_root, R(3), R(3, seed=1))


def test_complex_and_grad_outputs_with_graph():
    def cplx(m, x, w):
        x.requires_grad_()
        w.requires_grad_()
        y = x * w.conj() + x.exp()
        m.view_as_real(y).pow(2).sum().backward()
        return x.grad, w.grad

    both(cplx, make((3,), "complex128", low=-1, high=1), make((3,), "complex128", low=-1, high=1, seed=1))

    def grad_outputs_need_grad(m, x, v):
        x.requires_grad_()
        v.requires_grad_()
        y = x.sin()
        gx, = m.autograd.grad(y, x, grad_outputs=v, create_graph=True)
        gv, gxx = m.autograd.grad(gx.pow(2).sum(), [v, x])
        return gx, gv, gxx

    both(grad_outputs_need_grad, R(3), R(3, seed=1))


def test_backward_dtype_promotion():
    def f(m, x, w):  # float32 leaf in a float64 computation: its gradient comes back as float32
        x.requires_grad_()
        w.requires_grad_()
        (x * w).sum().backward()
        return x.grad, w.grad

    both(f, R(3, dtype="float32"), R(3, seed=1))
