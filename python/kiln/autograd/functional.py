"""kiln.autograd.functional: torch.autograd.functional's higher-level derivatives — vjp, jvp,
jacobian, hessian, vhp, hvp — over kiln.autograd.grad (the C++ engine; double backward gives the
forward-mode products through the "double vjp" identity). Arguments, return structures, the strict
and create_graph semantics and the error classes are torch's.

jacobian's `vectorize` and `strategy="forward-mode"` give the same values as the default (torch uses
them only to change how the rows are computed); here every Jacobian is built row by row in reverse mode.
"""
from .. import _C
from .._C import Tensor
from . import grad as _grad
from .grad_mode import enable_grad, set_grad_enabled

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


# ---- argument handling -------------------------------------------------------------------------
def _tupled(x, what, fn):
    """(was it a tuple, the tensors as a tuple); anything but tensors raises TypeError."""
    was_tuple = isinstance(x, tuple)
    items = x if was_tuple else (x,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = f"the value at index {i}" if was_tuple else f"the given {what}"
            raise TypeError(f"The {what} given to {fn} must be either a Tensor or a tuple of Tensors but "
                            f"{where} has type {type(el)}.")
    return was_tuple, items


def _untupled(res, was_tuple):
    return res if was_tuple else res[0]


def _leaves(inputs, create_graph, need_graph):
    """Fresh differentiable copies of the inputs: a differentiable view when the graph is kept and the
    input already requires grad (so higher derivatives reach the caller's graph), else detached."""
    return tuple(t.view_as(t) if create_graph and t.requires_grad else t.detach().requires_grad_(need_graph)
                 for t in inputs)


def _released(tensors, create_graph):
    if not tensors or isinstance(tensors[0], Tensor) or tensors[0] is None:
        return tuple(t if create_graph or t is None else t.detach() for t in tensors)
    return tuple(_released(t, create_graph) for t in tensors)


def _check_v(v, against, against_is_tuple):
    if len(v) != len(against):
        if against_is_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(against)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, against)):
        if a.shape != b.shape:
            where = f"Entry {i} in " if against_is_tuple else ""
            raise RuntimeError(f"{where}v has invalid size: should be {b.shape} but got {a.shape}.")


def _require_grad(tensors, kind, strict):
    """strict mode: every tensor must exist and require grad (what each kind means is in the message)."""
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise RuntimeError(f"The output of the user-provided function is independent of input {i}. "
                               "This is not allowed in strict mode.")
        if t.requires_grad:
            continue
        if kind == "outputs":
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                               "must be computed in a differentiable manner from the input when running in strict mode.")
        if kind == "grad_inputs":
            raise RuntimeError(f"The gradient with respect to input {i} is independent of the inputs of the "
                               "user-provided function. This is not allowed in strict mode.")
        if kind == "jacobian":
            raise RuntimeError(f"While computing the hessian, found that the jacobian of the user-provided function "
                               f"with respect to input {i} is independent of the input. This is not allowed in "
                               "strict mode.")
        raise RuntimeError(f"The hessian of the user-provided function with respect to input {i} is independent "
                           "of the input. This is not allowed in strict mode.")


def _grads(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """kiln.autograd.grad over the outputs that require grad (None for every input when none does)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    outs = [o for o, _ in pairs]
    gos = [g if g is not None else _C.ones_like(o) for o, g in pairs]
    return _grad(outs, inputs, gos, retain_graph=retain_graph, create_graph=create_graph, allow_unused=True)


_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in "
            "strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when "
                  "using the double backward trick to compute forward mode gradients. This is not allowed in "
                  "strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed "
                   "in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the "
                         "grad_jacobian. This is not allowed in strict mode as it prevents from using the double "
                         "backward trick to replace forward mode AD.",
}


def _zeros_for_missing(grads, like, strict, create_graph, stage):
    out = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            g = _C.zeros_like(like[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of input {i}. This is "
                               "not allowed in strict mode when create_graph=True.")
        out.append(g)
    return tuple(out)


def _single_element_v(tensors, fn_what):
    if len(tensors) != 1 or tensors[0].numel() != 1:
        raise RuntimeError(f"The vector v can only be None if the {fn_what} a single Tensor with a single element.")


def _scalar_output(outputs, was_tuple, name):
    if was_tuple:
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {name} should contain a single element")


# ---- the functions -------------------------------------------------------------------------------
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at inputs."""
    with enable_grad():
        in_tuple, inputs = _tupled(inputs, "inputs", "vjp")
        inputs = _leaves(inputs, create_graph, True)
        out_tuple, outputs = _tupled(func(*inputs), "outputs of the user-provided function", "vjp")
        _require_grad(outputs, "outputs", strict)
        if v is None:
            _single_element_v(outputs, "user-provided function returns")
        else:
            v = _leaves(_tupled(v, "v", "vjp")[1], create_graph, False)
            _check_v(v, outputs, out_tuple)
    with set_grad_enabled(create_graph or _C.is_grad_enabled()):
        res = _zeros_for_missing(_grads(outputs, inputs, v, create_graph), inputs, strict, create_graph, "back")
    return (_untupled(_released(outputs, create_graph), out_tuple),
            _untupled(_released(res, create_graph), in_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, as the vjp of the vjp (its backward is linear in
    the cotangent, which may therefore be any value: zeros)."""
    with enable_grad():
        in_tuple, inputs = _tupled(inputs, "inputs", "jvp")
        inputs = _leaves(inputs, create_graph, True)
        if v is None:
            _single_element_v(inputs, "input to the user-provided function is")
        else:
            v = _leaves(_tupled(v, "v", "jvp")[1], create_graph, False)
            _check_v(v, inputs, in_tuple)
        out_tuple, outputs = _tupled(func(*inputs), "outputs of the user-provided function", "jvp")
        _require_grad(outputs, "outputs", strict)
        cot = tuple(_C.zeros_like(o).requires_grad_() for o in outputs)
        grad_inputs = _grads(outputs, inputs, cot, create_graph=True)
        _require_grad(grad_inputs, "grad_inputs", strict)
    with set_grad_enabled(create_graph or _C.is_grad_enabled()):
        res = _zeros_for_missing(_grads(grad_inputs, cot, v, create_graph), outputs, strict, create_graph,
                                 "back_trick")
    return (_untupled(_released(outputs, create_graph), out_tuple),
            _untupled(_released(res, create_graph), out_tuple))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at inputs: out.shape + in.shape per (output, input) pair, nested as torch
    nests it (a tensor, a tuple over inputs or outputs, or a tuple of tuples)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                             'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                             'Otherwise, prefer to use "reverse-mode".')
    # torch's order of refusals: create_graph with forward-mode, then strict with either option, then
    # forward-mode without vectorize
    if strategy == "forward-mode" and create_graph:
        raise NotImplementedError('torch.autograd.functional.jacobian: `create_graph=True` and '
                                  '`strategy="forward-mode"` are not supported together (yet). Please either '
                                  'set `create_graph=False` or `strategy="reverse-mode"`.')
    if strict and strategy == "forward-mode":
        raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are not '
                           'supported together (yet). Please either set `strict=False` or `strategy="reverse-mode"`.')
    if strict and vectorize:
        raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                           "supported together. Please either set `strict=False` or `vectorize=False`.")
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is only "
                                  "implemented for `vectorize=True`.")
    with enable_grad():
        in_tuple, inputs = _tupled(inputs, "inputs", "jacobian")
        inputs = _leaves(inputs, create_graph, True)
        out_tuple, outputs = _tupled(func(*inputs), "outputs of the user-provided function", "jacobian")
        _require_grad(outputs, "outputs", strict)
        result = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]
            flat = out.reshape(-1)
            for j in range(out.numel()):
                g = _grads((flat[j],), inputs, None, create_graph, retain_graph=True)
                for k, (gk, inp) in enumerate(zip(g, inputs)):
                    if gk is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of input "
                                               f"{k}. This is not allowed in strict mode.")
                        gk = _C.zeros_like(inp)
                    elif strict and create_graph and not gk.requires_grad:
                        raise RuntimeError(f"The jacobian of the user-provided function is independent of input "
                                           f"{i}. This is not allowed in strict mode when create_graph=True.")
                    rows[k].append(gk)
            result.append(tuple(
                (_C.stack(r, 0) if r else _C.zeros((0,) + tuple(inp.shape), dtype=inp.dtype)).reshape(
                    tuple(out.shape) + tuple(inp.shape))
                for r, inp in zip(rows, inputs)))
        result = _released(tuple(result), create_graph)
    per_output = [r if in_tuple else r[0] for r in result]
    return tuple(per_output) if out_tuple else per_output[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function: in.shape + in.shape per pair of inputs (a tuple of tuples for
    tuple inputs)."""
    in_tuple, inputs = _tupled(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar_func(*xs):
        out = func(*xs)
        out_tuple, outs = _tupled(out, "outputs of the user-provided function", "hessian")
        _require_grad(outs, "outputs", strict)
        _scalar_output(outs, out_tuple, "hessian")
        return outs[0].squeeze()

    def gradient(*xs):
        if outer_jacobian_strategy == "forward-mode":
            xs = tuple(x.requires_grad_(True) for x in xs)
        jac = jacobian(scalar_func, xs if in_tuple else xs[0], create_graph=True)
        _require_grad(jac if isinstance(jac, tuple) else (jac,), "jacobian", strict)
        return jac

    return jacobian(gradient, inputs if in_tuple else inputs[0], create_graph=create_graph, strict=strict,
                    vectorize=vectorize, strategy=outer_jacobian_strategy)


def _second_order(func, inputs, v, create_graph, strict, name):
    """Shared start of vhp and hvp: leaves, v checked, the scalar output and its gradient (with graph)."""
    in_tuple, inputs = _tupled(inputs, "inputs", name)
    inputs = _leaves(inputs, create_graph, True)
    if v is None:
        _single_element_v(inputs, "input to the user-provided function is")
    else:
        v = _leaves(_tupled(v, "v", name)[1], create_graph, False)
        _check_v(v, inputs, in_tuple)
    out_tuple, outputs = _tupled(func(*inputs), "outputs of the user-provided function", name)
    _require_grad(outputs, "outputs", strict)
    _scalar_output(outputs, out_tuple, name)
    jac = _grads(outputs, inputs, None, create_graph=True)
    _require_grad(jac, "jacobian", strict)
    return in_tuple, inputs, v, outputs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a scalar function."""
    with enable_grad():
        in_tuple, inputs, v, outputs, jac = _second_order(func, inputs, v, create_graph, strict, "vhp")
    with set_grad_enabled(create_graph or _C.is_grad_enabled()):
        res = _zeros_for_missing(_grads(jac, inputs, v, create_graph), inputs, strict, create_graph, "double_back")
    return _released(outputs, create_graph)[0], _untupled(_released(res, create_graph), in_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for a scalar function, through the double backward of the gradient."""
    with enable_grad():
        in_tuple, inputs, v, outputs, jac = _second_order(func, inputs, v, create_graph, strict, "hvp")
        cot = tuple(_C.zeros_like(x).requires_grad_() for x in inputs)
        double_back = _grads(jac, inputs, cot, create_graph=True)
        _require_grad(jac, "hessian", strict)
    with set_grad_enabled(create_graph or _C.is_grad_enabled()):
        res = _zeros_for_missing(_grads(double_back, cot, v, create_graph), inputs, strict, create_graph,
                                 "double_back_trick")
    return _released(outputs, create_graph)[0], _untupled(_released(res, create_graph), in_tuple)
