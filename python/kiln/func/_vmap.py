"""kiln.func.vmap: torch.func.vmap over kiln::func::vmap (C++: one traced example replayed over the
batch through the op table's batching rules, kiln/func/vmap.h). This file is the pytree and
argument glue: in_dims / out_dims structures, non-tensor arguments, chunk_size, torch's errors."""
import functools

from .. import _C
from .._C import Tensor

__all__ = ["vmap"]


def _flatten(obj):
    """Leaves (anything but a tuple / list / dict) and a function rebuilding the structure."""
    if isinstance(obj, (tuple, list)):
        parts = [_flatten(o) for o in obj]
        sizes = [len(p[0]) for p in parts]

        def rebuild(leaves, parts=parts, sizes=sizes, obj=obj):
            out, i = [], 0
            for (_, rb), n in zip(parts, sizes):
                out.append(rb(leaves[i:i + n]))
                i += n
            if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
                return type(obj)(*out)
            return type(obj)(out)
        return [x for p in parts for x in p[0]], rebuild
    if isinstance(obj, dict):
        keys = list(obj)
        flat, rb = _flatten([obj[k] for k in keys])
        return flat, lambda leaves: dict(zip(keys, rb(leaves)))
    return [obj], lambda leaves: leaves[0]


def _same_structure(spec, value):
    """Whether spec (ints / None at the leaves) has value's containers: same types, lengths and keys."""
    if spec is None or isinstance(spec, int):
        return True
    if isinstance(spec, (tuple, list)):
        return (isinstance(value, (tuple, list)) and isinstance(value, tuple) == isinstance(spec, tuple)
                and len(spec) == len(value) and all(_same_structure(s, v) for s, v in zip(spec, value)))
    if isinstance(spec, dict):
        return isinstance(value, dict) and set(spec) == set(value) and all(_same_structure(spec[k], value[k])
                                                                           for k in spec)
    return False


def _dims_for(spec, value, what):
    """One in/out dim per leaf of value, from spec (an int or None for all of them, or a structure
    matching value's, containers and keys alike: torch's rule)."""
    leaves, _ = _flatten(value)
    if spec is None or isinstance(spec, int):
        return [spec] * len(leaves)
    if not _same_structure(spec, value):
        raise ValueError(f"vmap(f, {what}={spec}, ...): {what} is not compatible with the structure of the "
                         f"{'inputs' if what == 'in_dims' else 'outputs'}")
    out = []
    if isinstance(spec, dict):
        for k in value:
            out += _dims_for(spec[k], value[k], what)
    else:
        for s, v in zip(spec, value):
            out += _dims_for(s, v, what)
    return out


def _check_dims_arg(dims, what):
    if dims is None or isinstance(dims, int):
        return
    if not isinstance(dims, (tuple, list, dict)):
        raise ValueError(f"vmap(f, {what}={dims}, ...): expected `{what}` to be int or a (potentially nested) tuple "
                         f"matching the structure of {'inputs' if what == 'in_dims' else 'outputs'}, got: {type(dims)}.")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func over a batch: each input's in_dim is mapped over (None: shared by the whole batch), each
    output gets the batch at its out_dim. randomness: "error" (random ops raise), "same" (one draw
    for the batch), "different" (a draw per example). chunk_size: run the batch in chunks of that
    many examples (less memory, same results)."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    _check_dims_arg(in_dims, "in_dims")
    _check_dims_arg(out_dims, "out_dims")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        if isinstance(in_dims, (tuple, list)) and len(in_dims) != len(args):
            raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                             f"structure of `inputs`. in_dims has {len(in_dims)} entries but inputs has {len(args)}.")
        leaves, rebuild = _flatten(list(args))
        if isinstance(in_dims, (tuple, list)):
            dims = [d for spec, a in zip(in_dims, args) for d in _dims_for(spec, a, "in_dims")]
        else:
            dims = _dims_for(in_dims, list(args), "in_dims")
        tensor_pos = []
        for i, (leaf, d) in enumerate(zip(leaves, dims)):
            if d is not None and not isinstance(leaf, Tensor):
                raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but the "
                                 f"input is of type {type(leaf)}. We cannot vmap over non-Tensor arguments, please "
                                 "use None as the respective in_dim")
            if isinstance(leaf, Tensor):
                if d is not None and not -leaf.dim() <= d < leaf.dim():
                    raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some input, but "
                                     f"that input is a Tensor of dimensionality {leaf.dim()} so expected in_dim to "
                                     f"satisfy -{leaf.dim()} <= in_dim < {leaf.dim()}.")
                tensor_pos.append(i)
        mapped = [i for i in tensor_pos if dims[i] is not None]
        if not mapped:
            raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): At least one of the inputs must be a Tensor "
                             "mapped over (in_dims not all None)")
        sizes = {leaves[i].shape[dims[i]] for i in mapped}
        if len(sizes) > 1:
            raise ValueError("vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sorted(sizes)} for the mapped dimension")
        B = sizes.pop()
        structure = {}

        def flat_func(ts):
            lv = list(leaves)
            for i, t in zip(tensor_pos, ts):
                lv[i] = t
            out = func(*rebuild(lv), **kwargs)
            flat, rb = _flatten(out)
            for o in flat:
                if not isinstance(o, Tensor):
                    raise ValueError(f"vmap({getattr(func, '__name__', 'f')}, ...): `{getattr(func, '__name__', 'f')}` "
                                     f"must only return Tensors, got type {type(o)}. Did you mean to set out_dims= to "
                                     "None for output?")
            structure["rebuild"], structure["out"] = rb, out
            return flat

        def run(lo, hi):
            ts = [leaves[i] if dims[i] is None or (lo == 0 and hi == B) else leaves[i].narrow(dims[i], lo, hi - lo)
                  for i in tensor_pos]
            outs, batched, n = _C._vmap(flat_func, ts, [dims[i] for i in tensor_pos], randomness)
            od = _dims_for(out_dims, structure["out"], "out_dims")
            return [_C._vmap_place(o, b, n, d) for o, b, d in zip(outs, batched, od)], od

        if chunk_size is None or chunk_size >= B:
            flat_out, _ = run(0, B)
        else:
            # randomness="same": every chunk draws the numbers the first one did (torch restores the state)
            state = _C.get_rng_state() if randomness == "same" else None
            pieces = []
            for lo in range(0, B, chunk_size):
                if state is not None:
                    _C.set_rng_state(state)
                pieces.append(run(lo, min(lo + chunk_size, B)))
            od = pieces[0][1]
            flat_out = []
            for j in range(len(pieces[0][0])):
                parts = [p[0][j] for p in pieces]
                flat_out.append(parts[0] if od[j] is None else _C.cat(parts, od[j]))
        return structure["rebuild"](flat_out)
    return wrapped
