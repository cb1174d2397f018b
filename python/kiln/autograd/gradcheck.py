"""gradcheck / gradgradcheck: analytical gradients against central finite differences (float64 and
complex128 inputs). For complex tensors a perturbation is applied to the real and the imaginary part;
the reference gradient is that of the real function L = Re(sum(conj(v) * f)) for a random v, which is
the convention kiln shares with torch (grad = dL/dx + i dL/dy)."""
import itertools

from .. import _C
from .._C import Tensor


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _diff_inputs(inputs):
    return [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]


def _flat_view(t):
    return _C.view_as_real(t).reshape(-1) if t.is_complex() else t.reshape(-1)


class GradcheckError(RuntimeError):
    pass


def _check(func, inputs, eps, atol, rtol, raise_exception, check_undefined_grad=False, nondet_tol=0.0,
           seed=0):
    inputs = _as_tuple(inputs)
    for t in inputs:
        if isinstance(t, Tensor) and t.requires_grad and t.dtype not in (_C.float64, _C.complex128):
            import warnings
            warnings.warn(f"Input #{inputs.index(t)} requires gradient and is not a double precision "
                          "floating point or complex. This check will likely fail if all the inputs are "
                          "not of double precision floating point or complex.")
    diff = _diff_inputs(inputs)
    outputs = [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor) and o.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of "
                         "the them have requires_grad=True.")
    _C.manual_seed(seed)
    # random projections v for each output: L = sum Re(conj(v) * out)
    vs = []
    for o in outputs:
        if o.is_complex():
            vs.append(_C.complex(_C.randn(o.shape, dtype=_C.float64), _C.randn(o.shape, dtype=_C.float64)).to(o.dtype))
        else:
            vs.append(_C.randn(o.shape, dtype=_C.float64).to(o.dtype))

    def loss(outs):
        total = 0.0
        for o, v in zip(outs, vs):
            p = (o.conj() * v) if o.is_complex() else o * v
            total += float(p.real.sum().item()) if p.is_complex() else float(p.sum().item())
        return total

    analytic = _C._grad(outputs, [inputs[i] for i in diff], vs, True, False, True) if outputs else []
    ok = True
    for k, i in enumerate(diff):
        x = inputs[i]
        a = analytic[k] if outputs else None
        base = _C.view_as_real(x.data) if x.is_complex() else x.data
        numeric = _C.zeros([base.numel()], dtype=_C.float64)
        for j, idx in enumerate(itertools.product(*[range(n) for n in base.shape])):
            orig = float(base[idx].item())
            base[idx] = orig + eps
            fp = loss(_outs(func, inputs, len(outputs)))
            base[idx] = orig - eps
            fm = loss(_outs(func, inputs, len(outputs)))
            base[idx] = orig
            numeric[j] = (fp - fm) / (2 * eps)
        if a is None:
            a_flat = _C.zeros([base.numel()], dtype=_C.float64)
        else:
            a_flat = _flat_view(a.detach()).to(_C.float64)
        if not _C.allclose(a_flat, numeric, rtol, atol):
            ok = False
            if raise_exception:
                raise GradcheckError(f"Jacobian mismatch for output 0 with respect to input {i},\n"
                                     f"numerical:{numeric}\nanalytical:{a_flat}\n")
    return ok


def _outs(func, inputs, n):
    outs = [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]
    floating = [o for o in outs if o.is_floating_point() or o.is_complex()]
    return floating[:n]


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True,
              fast_mode=False, masked=None):
    """Checks gradients computed by backward against finite differences (torch.autograd.gradcheck)."""
    return _check(func, inputs, eps, atol, rtol, raise_exception)


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False, masked=False):
    """Checks second derivatives: gradcheck of the function (inputs, v) -> vjp(func)(v), computed with
    create_graph=True."""
    inputs = _as_tuple(inputs)
    outs = [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor) and o.requires_grad]
    if grad_outputs is None:
        _C.manual_seed(1)
        grad_outputs = []
        for o in outs:
            g = _C.randn(o.shape, dtype=_C.float64).to(o.dtype) if not o.is_complex() else \
                _C.complex(_C.randn(o.shape, dtype=_C.float64), _C.randn(o.shape, dtype=_C.float64)).to(o.dtype)
            grad_outputs.append(g.requires_grad_())
    grad_outputs = list(grad_outputs) if isinstance(grad_outputs, (list, tuple)) else [grad_outputs]
    n_in = len(inputs)
    diff = _diff_inputs(inputs)

    def first_order(*args):
        xs, gs = args[:n_in], args[n_in:]
        os_ = [o for o in _as_tuple(func(*xs)) if isinstance(o, Tensor) and o.requires_grad]
        grads = _C._grad(os_, [xs[i] for i in diff], list(gs), True, True, True)
        return tuple(g for g in grads if g is not None)

    return _check(first_order, tuple(inputs) + tuple(grad_outputs), eps, atol, rtol, raise_exception)
