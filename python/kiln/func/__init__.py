"""kiln.func: torch.func's function transforms — grad, grad_and_value, vjp, jvp, jacrev, jacfwd,
hessian over the C++ engine (kiln.autograd.grad with create_graph where the inputs carry a graph, so
the transforms nest: grad(grad(f)), hessian = jacobian of the gradient), vmap over kiln::func::vmap
(batching rules from the op table; vmap(grad(f)) gives per-example gradients) — and
functional_call. jacfwd computes the same Jacobian as jacrev. Arguments, argnums / has_aux handling
and the returned structures are torch's."""
import contextlib

from .. import _C
from .._C import Tensor
from ..autograd import grad as _autograd_grad
from ..autograd.grad_mode import enable_grad
from ._vmap import _flatten as _tree  # leaves (any type) and rebuild of a tuple / list / dict structure
from ._vmap import vmap

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functional_call", "vmap"]


def _argnums(argnums, nargs, fn):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{fn}(f, argnums): Expected argnums to be a non-empty tuple of ints")
    for a in nums:
        if not isinstance(a, int):
            raise RuntimeError(f"{fn}(f, argnums): Expected argnums to be int or Tuple[int, ...], got {type(a)}")
        if not -nargs <= a < nargs:
            raise RuntimeError(f"Got argnums={a}, but only {nargs} positional inputs")
    return single, tuple(a % nargs for a in nums)


def _leaf(t):
    """A differentiable stand-in for an argument: on the caller's graph when it has one (nesting)."""
    if not isinstance(t, Tensor):
        raise RuntimeError(f"Expected tensors as the differentiated arguments, got {type(t)}")
    return t.view_as(t) if t.requires_grad else t.detach().requires_grad_()


def _flatten(obj):
    """The tensors of a pytree (tensor, or tuple / list / dict of them) and a function rebuilding it."""
    leaves, rebuild = _tree(obj)
    for t in leaves:
        if not isinstance(t, Tensor):
            raise RuntimeError(f"Expected tensors (or tuples, lists, dicts of them) as the differentiated arguments, "
                               f"got {type(t)}")
    return leaves, rebuild


def _split_aux(out, has_aux, fn):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{fn}(f, ...)(*args): output of function f should be a tuple: (output, aux) if has_aux "
                           "is True")
    return out


def _keep_graph(tensors):
    return any(isinstance(t, Tensor) and t.requires_grad for t in tensors) and _C.is_grad_enabled()


def _grads(outputs, inputs, cotangents, create_graph):
    """Gradients of the outputs (those that depend on something) with respect to the inputs; zeros
    where an input does not reach them (torch.func's convention)."""
    if cotangents is None:
        cotangents = [None] * len(outputs)
    pairs = [(o, c) for o, c in zip(outputs, cotangents) if o.requires_grad]
    if not pairs:
        return tuple(_C.zeros_like(i) for i in inputs)
    g = _autograd_grad([o for o, _ in pairs], inputs, [c if c is not None else _C.ones_like(o) for o, c in pairs],
                       create_graph=create_graph, allow_unused=True, retain_graph=True)
    return tuple(_C.zeros_like(i) if gi is None else gi for gi, i in zip(g, inputs))


def _plain(t, keep):
    if isinstance(t, tuple):
        return tuple(_plain(x, keep) for x in t)
    return t if keep or not isinstance(t, Tensor) else t.detach()


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning (the gradient of func's scalar output with respect to args[argnums], its
    value) — with has_aux, (gradient, (value, aux))."""
    def wrapper(*args, **kwargs):
        single, nums = _argnums(argnums, len(args), "grad_and_value")
        args = list(args)
        flats = {i: _flatten(args[i]) for i in nums}  # each argument may be a pytree of tensors
        keep = _keep_graph([t for i in nums for t in flats[i][0]])
        with enable_grad():
            leaves = {i: [_leaf(t) for t in flats[i][0]] for i in nums}
            for i in nums:
                args[i] = flats[i][1](leaves[i])
            out, aux = _split_aux(func(*args, **kwargs), has_aux, "grad_and_value")
            if not isinstance(out, Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(out)}")
            if out.dim() != 0:
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor "
                                   f"with {out.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
            everything = [t for i in nums for t in leaves[i]]
            flat_g = _plain(_grads([out], everything, None, keep), keep)
        per_arg, k = [], 0
        for i in nums:
            n = len(leaves[i])
            per_arg.append(flats[i][1](list(flat_g[k:k + n])))
            k += n
        g = per_arg[0] if single else tuple(per_arg)
        value = _plain(out, keep)
        return (g, (value, aux)) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of func's scalar output with respect to args[argnums] (with
    has_aux, (gradient, aux))."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def _same_tree(a, b):
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (type(a) is type(b) and len(a) == len(b)) and all(_same_tree(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b) and all(_same_tree(a[k], b[k])
                                                                                       for k in a)
    return True


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn[, aux]): vjp_fn(cotangents) gives the gradients for every primal. Primals,
    outputs and cotangents may be pytrees (tuples, lists, dicts) of tensors."""
    keep = _keep_graph([t for p in primals for t in _tree(p)[0]])
    with enable_grad():
        trees = [_tree(p) for p in primals]
        leaf_lists = [[_leaf(t) for t in flat] for flat, _ in trees]
        args = [rb(ls) for (_, rb), ls in zip(trees, leaf_lists)]
        out, aux = _split_aux(func(*args), has_aux, "vjp")
    outs, _ = _tree(out)
    for o in outs:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"vjp(f, *primals): Expected f(*primals) to return only tensors, got unsupported type "
                               f"{type(o)}")
    leaves = [t for ls in leaf_lists for t in ls]

    def vjp_fn(cotangents):
        cots, _ = _tree(cotangents)
        if len(cots) != len(outs) or not (_same_tree(cotangents, out) or (not isinstance(out, (tuple, list, dict))
                                                                         and len(cots) == 1)):
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of outputs "
                               f"to the function: {len(outs)} outputs, {len(cots)} cotangents")
        for c, o in zip(cots, outs):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {tuple(c.shape)} and output[0] "
                                   f"has a shape of {tuple(o.shape)}.")
        with enable_grad():
            flat = _plain(_grads(list(outs), leaves, list(cots), keep or any(c.requires_grad for c in cots)), keep)
        res, k = [], 0
        for (_, rb), ls in zip(trees, leaf_lists):
            res.append(rb(list(flat[k:k + len(ls)])))
            k += len(ls)
        return tuple(res)
    res = (_plain(out, keep) if isinstance(out, Tensor) else _tree(out)[1]([_plain(o, keep) for o in outs]), vjp_fn)
    return res + (aux,) if has_aux else res


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J tangents): the vjp of the vjp (its cotangent is a free variable)."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be tuples")
    if len(primals) != len(tangents):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same python structure")
    keep = _keep_graph(primals + tangents)
    with enable_grad():
        leaves = tuple(_leaf(p) for p in primals)
        out, aux = _split_aux(func(*leaves), has_aux, "jvp")
        outs = out if isinstance(out, tuple) else (out,)
        cot = [_C.zeros_like(o).requires_grad_() for o in outs]
        g = _grads(list(outs), list(leaves), cot, True)
        t = _grads(list(g), cot, list(tangents), keep)
    t = _plain(t if isinstance(out, tuple) else t[0], keep)
    res = (_plain(out, keep), t)
    return res + (aux,) if has_aux else res


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """A function returning the Jacobian of func with respect to args[argnums]: out.shape + in.shape,
    a tuple per output and per argnum where those are tuples."""
    def wrapper(*args, **kwargs):
        single, nums = _argnums(argnums, len(args), "jacrev")
        keep = _keep_graph([args[i] for i in nums])
        with enable_grad():
            args = list(args)
            for i in nums:
                args[i] = _leaf(args[i])
            out, aux = _split_aux(func(*args, **kwargs), has_aux, "jacrev")
            outs, rebuild_out = _tree(out)  # a pytree of outputs: a Jacobian per leaf, in its place
            ins = [args[i] for i in nums]
            per_out = []
            for o in outs:
                flat = o.reshape(-1)
                rows = [_grads([flat[j]], ins, None, keep) for j in range(o.numel())]
                per_in = tuple(
                    (_C.stack([r[k] for r in rows], 0) if rows else _C.zeros((0,) + tuple(x.shape), dtype=x.dtype)
                     ).reshape(tuple(o.shape) + tuple(x.shape)) for k, x in enumerate(ins))
                per_out.append(per_in[0] if single else per_in)
        jac = _plain(per_out[0] if isinstance(out, Tensor) else rebuild_out(per_out), keep)
        return (jac, _plain(aux, keep)) if has_aux else jac
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the same Jacobian as jacrev (computed in reverse mode here)."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func, argnums=0):
    """The Hessian of a scalar func with respect to args[argnums]: the Jacobian of its gradient."""
    return jacfwd(jacrev(func, argnums), argnums)


def _put(owner, leaf, value, kind):
    """Sets a parameter or buffer slot directly (no Parameter check: any tensor, with its graph), in the
    C++ layer too where the module is one."""
    slots = owner._parameters if kind == "param" else owner._buffers
    slots[leaf] = value
    cpp = owner.__dict__.get("_cpp")
    if cpp is not None:
        if kind == "param":
            cpp._set_parameter(leaf, value)
        else:
            cpp._set_buffer(leaf, value, leaf not in owner._non_persistent_buffers_set)


@contextlib.contextmanager
def _swapped(module, tensors, strict):
    """module's parameters and buffers replaced by `tensors` (dotted names) for a scope."""
    params = dict(module.named_parameters(remove_duplicate=False))
    buffers = dict(module.named_buffers(remove_duplicate=False))
    if strict:
        missing = sorted((set(params) | set(buffers)) - set(tensors))
        unexpected = sorted(set(tensors) - set(params) - set(buffers))
        if missing or unexpected:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}: missing keys {missing}, "
                               f"unexpected keys {unexpected}")
    saved = []
    try:
        for name, t in tensors.items():
            *path, leaf = name.split(".")
            owner = module
            for p in path:
                owner = getattr(owner, p)
            if leaf in owner._parameters:
                kind = "param"
            elif leaf in owner._buffers:
                kind = "buffer"
            else:
                raise AttributeError(f"{type(owner).__name__} has no parameter or buffer named '{leaf}'")
            saved.append((owner, leaf, (owner._parameters if kind == "param" else owner._buffers)[leaf], kind))
            _put(owner, leaf, t, kind)
        yield
    finally:
        for owner, leaf, old, kind in reversed(saved):
            _put(owner, leaf, old, kind)


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with its parameters and buffers taken from the dict(s) for this call."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        tensors = dict(dicts)
    else:
        tensors = {}
        for d in dicts:
            dup = set(tensors) & set(d)
            if dup:
                raise ValueError(f"{sorted(dup)[0]} appeared in multiple dictionaries; behavior of functional call "
                                 "is ambiguous")
            tensors.update(d)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, tensors, strict):
        return module(*args, **(kwargs or {}))

