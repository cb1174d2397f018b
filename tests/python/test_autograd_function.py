"""Custom autograd Functions (kiln.autograd.Function) and gradcheck / gradgradcheck vs torch."""
import pytest

import kiln
from autograd_helpers import R, both, name
from helpers import to_kiln


# ---- custom Functions ---------------------------------------------------------------------------
def _functions(m):
    class MulScale(m.autograd.Function):
        """x * y * k with a non-tensor k; saves inputs, reports needs_input_grad."""

        @staticmethod
        def forward(ctx, x, k, y):
            ctx.save_for_backward(x, y)
            ctx.k = k
            ctx.seen = (ctx.needs_input_grad, m.is_grad_enabled())
            return x * y * k

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            gx = g * y * ctx.k if ctx.needs_input_grad[0] else None
            gy = g * x * ctx.k if ctx.needs_input_grad[2] else None
            return gx, None, gy

    class ExpOut(m.autograd.Function):
        """saves its output."""

        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class SortLike(m.autograd.Function):
        """two outputs, one non-differentiable (indices) and one float marked non-differentiable."""

        @staticmethod
        def forward(ctx, x):
            v, i = x.sort()
            mask = (v > 0).to(x.dtype)
            ctx.mark_non_differentiable(i, mask)
            ctx.save_for_backward(i)
            return v, i, mask

        @staticmethod
        def backward(ctx, gv, gi, gmask):
            (i,) = ctx.saved_tensors
            return m.zeros_like(gv).scatter(-1, i, gv)

    class Split(m.autograd.Function):
        """several differentiable outputs; one may get no gradient."""

        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    class Identity(m.autograd.Function):
        """returns its input (a fresh alias gets the grad_fn)."""

        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5

    return MulScale, ExpOut, SortLike, Split, Identity


def test_custom_function_basics():
    def f(m, x, y):
        MulScale, *_ = _functions(m)
        x.requires_grad_()
        z = MulScale.apply(x, 3.0, y)  # y does not require grad
        z2 = MulScale.apply(x, 0.5, z)  # the same Function used twice, on its own output
        z2.sum().backward()
        return z2, x.grad, y.grad, name(z2), z2.requires_grad, z2.is_leaf

    both(f, R(3), R(3, seed=1))

    def needs(m, x, y):
        MulScale, *_ = _functions(m)
        x.requires_grad_()
        seen = []
        for a, b in ((x, y), (y, x), (y, y)):
            out = MulScale.apply(a, 2.0, b)
            seen.append((out.requires_grad, out.grad_fn is None))
        with m.no_grad():
            out = MulScale.apply(x, 2.0, y)
            seen.append((out.requires_grad, out.grad_fn is None))
        return seen

    both(needs, R(3), R(3, seed=1))


def test_custom_function_ctx_state():
    def f(m, x, y):
        MulScale, *_ = _functions(m)
        x.requires_grad_()
        y.requires_grad_()
        seen = []
        for a, b in ((x, y), (x, y.detach())):
            ctxs = []

            class Probe(MulScale):
                @staticmethod
                def forward(ctx, a, k, b):
                    ctxs.append(ctx)
                    return MulScale.forward(ctx, a, k, b)

            Probe.apply(a, 1.0, b)
            seen.append(ctxs[0].seen)
        return seen

    both(f, R(3), R(3, seed=1))


def test_custom_function_saved_output_and_errors():
    def f(m, x):
        _, ExpOut, *_ = _functions(m)
        x.requires_grad_()
        y = ExpOut.apply(x)
        (y * 2).sum().backward(retain_graph=True)
        g = x.grad.clone()
        gg, = m.autograd.grad(y.sum(), x)
        return y, g, gg

    both(f, R(3))

    def modified(m, x):
        _, ExpOut, *_ = _functions(m)
        x.requires_grad_()
        y = ExpOut.apply(x)
        y.mul_(2)
        y.sum().backward()

    both(modified, R(3), exc="modified by an inplace operation")

    def twice(m, x):
        _, ExpOut, *_ = _functions(m)
        x.requires_grad_()
        s = ExpOut.apply(x).sum()
        s.backward()
        s.backward()

    both(twice, R(3), exc="second time")

    def wrong_count(m, x):
        class Bad(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g, g

        x.requires_grad_()
        Bad.apply(x).sum().backward()

    both(wrong_count, R(3), exc="incorrect number of gradients")

    def wrong_shape(m, x):
        class Bad(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g[:2]

        x.requires_grad_()
        Bad.apply(x).sum().backward()

    both(wrong_shape, R(3), exc="invalid gradient at index 0")

    def grad_for_nontensor(m, x):
        class Bad(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g, g

        x.requires_grad_()
        Bad.apply(x, 2.0).sum().backward()

    both(grad_for_nontensor, R(3), exc="was not a Variable")


def test_custom_function_several_outputs():
    def f(m, x):
        _, _, SortLike, Split, Identity = _functions(m)
        x.requires_grad_()
        v, i, mask = SortLike.apply(x)
        r = [v.requires_grad, i.requires_grad, mask.requires_grad, i.dtype == m.int64]
        (v * v).sum().backward()
        r.append(x.grad.clone())
        a, b = Split.apply(x)
        a.sum().backward()  # b gets no gradient: materialized as zeros for backward
        r.append(x.grad.clone())
        y = Identity.apply(x)
        r += [y.is_leaf, x.is_leaf]
        y.sum().backward()
        r.append(x.grad)
        return r

    both(f, R(2, 4))

    def no_materialize(m, x):
        seen = []

        class Split2(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, ga, gb):
                seen.append((ga is None, gb is None))
                return ga * 2 if gb is None else ga * 2 + gb * 3

        x.requires_grad_()
        a, b = Split2.apply(x)
        a.sum().backward()
        return seen, x.grad

    both(no_materialize, R(3))


def test_custom_function_mark_dirty():
    def f(m, x):
        class AddOne_(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2

        x.requires_grad_()
        y = x * 1
        z = AddOne_.apply(y)
        (y * 3).sum().backward()  # y itself now carries AddOne_'s history
        return z, y, x.grad, name(y)

    both(f, R(3))

    def leaf(m, x):
        class AddOne_(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g

        x.requires_grad_()
        AddOne_.apply(x)

    both(leaf, R(3), exc="leaf Variable that requires grad")


def test_custom_function_double_backward():
    def f(m, x):
        class Cube(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 3 * g * x * x  # written with differentiable ops: double backward works

        x.requires_grad_()
        g, = m.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
        gg, = m.autograd.grad(g.sum(), x)
        return g, gg

    both(f, R(3))


# ---- gradcheck ----------------------------------------------------------------------------------
def _check_fns(m):
    class Good(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y.sin()

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y.sin(), g * x * y.cos()

    class WrongBackward(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y.sin()

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y.sin(), g * x * y.sin()  # wrong: should be cos

    class WrongDouble(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x.detach()  # first order right, second order lost

    return Good, WrongBackward, WrongDouble


def test_gradcheck_custom_functions():
    def f(m, x, y):
        Good, WrongBackward, WrongDouble = _check_fns(m)
        x.requires_grad_()
        y.requires_grad_()
        ga = m.autograd.gradcheck
        r = [ga(Good.apply, (x, y)), m.autograd.gradgradcheck(Good.apply, (x, y)),
             ga(WrongBackward.apply, (x, y), raise_exception=False),
             ga(WrongDouble.apply, (x,)),
             m.autograd.gradgradcheck(WrongDouble.apply, (x,), raise_exception=False),
             ga(lambda a, b: (a * b).exp().sum(dim=0), (x, y))]
        return r

    both(f, R(2, 3), R(2, 3, seed=1))

    def raises(m, x, y):
        _, WrongBackward, _ = _check_fns(m)
        x.requires_grad_()
        y.requires_grad_()
        m.autograd.gradcheck(WrongBackward.apply, (x, y))

    both(raises, R(2, 3), R(2, 3, seed=1), exc="Jacobian mismatch")
    with pytest.raises(kiln.autograd.GradcheckError):
        raises(kiln, to_kiln(R(2, 3)), to_kiln(R(2, 3, seed=1)))

    def raises_double(m, x):
        _, _, WrongDouble = _check_fns(m)
        x.requires_grad_()
        m.autograd.gradgradcheck(WrongDouble.apply, (x,))

    both(raises_double, R(3), exc="Jacobian mismatch")
    assert issubclass(kiln.autograd.GradcheckError, RuntimeError)


def test_custom_function_reentrant_backward():
    def f(m, x):
        class Checkpoint(m.autograd.Function):
            """recomputes its forward in backward and runs a nested backward (activation checkpointing)."""

            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return (x.sin() * 2).exp()

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                with m.enable_grad():
                    xd = x.detach().requires_grad_()
                    y = (xd.sin() * 2).exp()
                m.autograd.backward(y, g)
                return xd.grad

        x.requires_grad_()
        (Checkpoint.apply(x) * 3).sum().backward()
        return x.grad

    both(f, R(4))
