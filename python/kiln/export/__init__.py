"""kiln.export: torch.export's API over kiln's tracer (kiln/export/program.h) and runtime.

    ep = kiln.export.export(model, (x,), dynamic_shapes={"input": {0: Dim("batch"), 1: Dim("seq")}})
    y = ep.module()(x)                      # the standalone runtime, from Python
    kiln.export.save(ep, "model.kiln")      # a checked archive; kiln-run and kiln::runtime load it
    ep2 = kiln.export.load("model.kiln")

The model runs once on meta tensors whose sizes are symbols; every op it dispatches becomes a node.
LSTM, GRU, RNN and attention are single ops, so the batch and the sequence length stay dynamic.
"""
import inspect
import json
import os

from .. import _C
from ..nn.module import Module

__all__ = ["Dim", "dims", "export", "save", "load", "ExportedProgram", "ExportGraphSignature",
           "InputSpec", "OutputSpec", "InputKind", "OutputKind"]

_NAMED, _DYNAMIC, _AUTO, _STATIC = 0, 1, 2, 3


class _DimHint:
    def __init__(self, kind, name):
        self._kind, self._name = kind, name

    def __repr__(self):
        return f"Dim.{self._name}"


class Dim:
    """A symbolic dimension: Dim("seq", min=1, max=512). Dim.AUTO, Dim.DYNAMIC and Dim.STATIC are the
    hints torch.export takes (AUTO: dynamic where the model allows, silently static otherwise;
    DYNAMIC: dynamic, an error if the model pins it; STATIC: the example's size)."""

    AUTO = _DimHint(_AUTO, "AUTO")
    DYNAMIC = _DimHint(_DYNAMIC, "DYNAMIC")
    STATIC = _DimHint(_STATIC, "STATIC")

    def __init__(self, name, *, min=None, max=None):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"Dim name must be a valid identifier, got {name!r}")
        lo = 0 if min is None else min
        hi = max
        if not isinstance(lo, int) or (hi is not None and not isinstance(hi, int)):
            raise TypeError("Dim min and max must be ints")
        if lo < 0 or (hi is not None and hi < lo):
            raise ValueError(f"Dim('{name}') has an invalid range [{lo}, {hi}]")
        self.__name__, self.min, self.max = name, lo, hi

    def __repr__(self):
        args = [repr(self.__name__)]
        if self.min:
            args.append(f"min={self.min}")
        if self.max is not None:
            args.append(f"max={self.max}")
        return f"Dim({', '.join(args)})"


def dims(*names, min=None, max=None):
    """Several Dims with one range: batch, seq = dims("batch", "seq", max=512)."""
    return tuple(Dim(n, min=min, max=max) for n in names)


# ---- argument and result structure (a small pytree) -------------------------------------------------

def _flatten(obj, leaves):
    if isinstance(obj, _C.Tensor):
        leaves.append(obj)
        return {"t": "tensor"}
    if isinstance(obj, (tuple, list)):
        return {"t": type(obj).__name__, "c": [_flatten(o, leaves) for o in obj]}
    if isinstance(obj, dict):
        keys = list(obj)
        if not all(isinstance(k, str) for k in keys):
            raise TypeError("kiln.export: dict arguments and results need str keys")
        return {"t": "dict", "k": keys, "c": [_flatten(obj[k], leaves) for k in keys]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"t": "const", "v": obj}
    raise TypeError(f"kiln.export: cannot export an argument or result of type {type(obj).__name__}")


def _unflatten(spec, leaves):
    t = spec["t"]
    if t == "tensor":
        return next(leaves)
    if t == "const":
        return spec["v"]
    if t == "dict":
        return {k: _unflatten(c, leaves) for k, c in zip(spec["k"], spec["c"])}
    items = [_unflatten(c, leaves) for c in spec["c"]]
    return tuple(items) if t == "tuple" else items


def _dims_of(spec, leaf, path):
    """A tensor's dynamic-shape entry as {dim: (kind, name, min, max)}."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        items = spec.items()
    elif isinstance(spec, (tuple, list)):
        if len(spec) != leaf.dim():
            raise ValueError(f"kiln.export: dynamic_shapes{path} has {len(spec)} entries for a tensor with "
                             f"{leaf.dim()} dimensions")
        items = enumerate(spec)
    else:
        raise TypeError(f"kiln.export: dynamic_shapes{path} should be a dict or a tuple of Dims, got "
                        f"{type(spec).__name__}")
    out = {}
    for d, v in items:
        if not isinstance(d, int) or not -leaf.dim() <= d < leaf.dim():
            raise ValueError(f"kiln.export: dynamic_shapes{path} names dimension {d} of a tensor with "
                             f"{leaf.dim()} dimensions")
        d %= leaf.dim()
        if v is None or v is Dim.STATIC or isinstance(v, int):
            if isinstance(v, int) and not isinstance(v, bool) and v != leaf.shape[d]:
                raise ValueError(f"kiln.export: dynamic_shapes{path}[{d}] is {v}, the example has {leaf.shape[d]}")
            continue
        if isinstance(v, _DimHint):
            out[d] = (v._kind, "", 0, None)
        elif isinstance(v, Dim):
            out[d] = (_NAMED, v.__name__, v.min, v.max)
        else:
            raise TypeError(f"kiln.export: dynamic_shapes{path}[{d}] should be a Dim, got {type(v).__name__}")
    return out


def _match_dims(arg, spec, path, out):
    """Walks an argument and its dynamic_shapes entry together; appends one dims dict per tensor leaf."""
    if isinstance(arg, _C.Tensor):
        out.append(_dims_of(spec, arg, path))
    elif isinstance(arg, (tuple, list)):
        if spec is not None and (not isinstance(spec, (tuple, list)) or len(spec) != len(arg)):
            raise ValueError(f"kiln.export: dynamic_shapes{path} does not match the argument's structure")
        for i, a in enumerate(arg):
            _match_dims(a, None if spec is None else spec[i], f"{path}[{i}]", out)
    elif isinstance(arg, dict):
        for k, a in arg.items():
            _match_dims(a, None if spec is None else spec.get(k), f"{path}[{k!r}]", out)


def _leaf_dims(module, args, kwargs, dynamic_shapes):
    out = []
    if dynamic_shapes is None:
        _match_dims((tuple(args), kwargs), None, "", out)
        return out
    fn = getattr(module, "forward", module)
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
        names = list(bound.arguments)
    except (TypeError, ValueError):
        bound, names = None, None
    if isinstance(dynamic_shapes, dict):
        if bound is None:
            raise ValueError("kiln.export: dynamic_shapes is a dict but the arguments cannot be named")
        unknown = set(dynamic_shapes) - set(bound.arguments)
        if unknown:
            raise ValueError(f"kiln.export: dynamic_shapes names {sorted(unknown)}, which are not arguments of "
                             f"forward ({', '.join(names)})")
        for i, a in enumerate(args):
            _match_dims(a, dynamic_shapes.get(names[i]), f"[{names[i]!r}]", out)
        for k, a in kwargs.items():
            _match_dims(a, dynamic_shapes.get(k), f"[{k!r}]", out)
        return out
    if not isinstance(dynamic_shapes, (tuple, list)) or len(dynamic_shapes) != len(args) + len(kwargs):
        raise ValueError("kiln.export: dynamic_shapes should be a dict by argument name or a tuple with one "
                         "entry per argument")
    for i, a in enumerate(args):
        _match_dims(a, dynamic_shapes[i], f"[{i}]", out)
    for j, (k, a) in enumerate(kwargs.items()):
        _match_dims(a, dynamic_shapes[len(args) + j], f"[{k!r}]", out)
    return out


def _arg_names(module, args, kwargs):
    fn = getattr(module, "forward", module)
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        names.append(params[i] if i < len(params) and not params[i].startswith("*") else f"args_{i}")
    names += list(kwargs)
    return names


def _leaf_names(args, kwargs, arg_names):
    """One name per tensor leaf: the argument's name, with an index for nested leaves."""
    names = []

    def walk(obj, name):
        if isinstance(obj, _C.Tensor):
            names.append(name)
        elif isinstance(obj, (tuple, list)):
            for i, o in enumerate(obj):
                walk(o, f"{name}_{i}")
        elif isinstance(obj, dict):
            for k, o in obj.items():
                walk(o, f"{name}_{k}")

    for a, n in zip(list(args) + list(kwargs.values()), arg_names):
        walk(a, n)
    return names


# ---- export -------------------------------------------------------------------------------------------

def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict=False, preserve_module_call_signature=()):
    """torch.export.export: traces mod(*args, **kwargs) into an ExportedProgram. `strict` is accepted
    for torch's signature; kiln always traces through its dispatcher (torch's non-strict mode)."""
    if not isinstance(args, tuple):
        raise ValueError(f"Expecting `args` to be a tuple of example positional inputs, got {type(args)}")
    kwargs = dict(kwargs or {})
    leaves = []
    in_spec = _flatten((args, kwargs), leaves)
    leaf_dims = _leaf_dims(mod, args, kwargs, dynamic_shapes)
    names = _leaf_names(args, kwargs, _arg_names(mod, args, kwargs))
    tracer = _C._ExportTracer()
    params = mod.named_parameters(remove_duplicate=True) if isinstance(mod, Module) else []
    buffers = mod.named_buffers(remove_duplicate=True) if isinstance(mod, Module) else []
    for name, p in params:
        tracer.add_state(name, p, 0)
    for name, b in buffers:
        tracer.add_state(name, b, 1)
    metas = [tracer.add_input(n, t, d) for n, t, d in zip(names, leaves, leaf_dims)]
    it = iter(metas)
    margs, mkwargs = _unflatten(in_spec, it)
    tracer.begin()
    try:
        result = mod(*margs, **mkwargs)
    except RuntimeError as e:
        if "meta tensor" in str(e):
            raise type(e)(f"{e}\n[export] The model reads a tensor's value while it is traced (item(), "
                          "tolist(), bool() of a tensor, `if` on data). Export records shapes only: compute "
                          "both branches and select with kiln.where, or keep the value a tensor.") from e
        raise
    finally:
        tracer.end()
    out_leaves = []
    out_spec = _flatten(result, out_leaves)
    prog = tracer.finish(out_leaves)
    prog.in_spec = json.dumps(in_spec)
    prog.out_spec = json.dumps(out_spec)
    return ExportedProgram(prog)


# ---- the program ------------------------------------------------------------------------------------

class InputKind:
    USER_INPUT, PARAMETER, BUFFER, CONSTANT_TENSOR = ("USER_INPUT", "PARAMETER", "BUFFER", "CONSTANT_TENSOR")


class OutputKind:
    USER_OUTPUT = "USER_OUTPUT"


class InputSpec:
    def __init__(self, kind, name, target):
        self.kind, self.arg_name, self.target = kind, name, target

    def __repr__(self):
        return f"InputSpec(kind={self.kind}, arg={self.arg_name}, target={self.target!r})"


class OutputSpec:
    def __init__(self, name):
        self.kind, self.arg_name, self.target = OutputKind.USER_OUTPUT, name, None

    def __repr__(self):
        return f"OutputSpec(kind={self.kind}, arg={self.arg_name})"


class ExportGraphSignature:
    def __init__(self, prog):
        self.input_specs = [InputSpec(k, n, None if k == "USER_INPUT" else t) for k, t, n in prog.inputs]
        self.output_specs = [OutputSpec(n) for n in prog.outputs]

    @property
    def parameters(self):
        return [s.target for s in self.input_specs if s.kind == "PARAMETER"]

    @property
    def buffers(self):
        return [s.target for s in self.input_specs if s.kind == "BUFFER"]

    @property
    def user_inputs(self):
        return [s.arg_name for s in self.input_specs if s.kind == "USER_INPUT"]

    @property
    def user_outputs(self):
        return [s.arg_name for s in self.output_specs]


class ExportedProgram:
    """The traced program: .graph (nodes), .graph_signature, .state_dict, .constants,
    .range_constraints; .module() runs it with kiln's standalone runtime."""

    def __init__(self, prog):
        self._prog = prog
        self._runtime = None
        n_in = sum(1 for kind, _, _ in prog.inputs if kind == "USER_INPUT")
        self._in_spec = _load_spec(prog.in_spec, n_in, "argument")
        self._out_spec = _load_spec(prog.out_spec, len(prog.outputs), "result")

    def __str__(self):
        return str(self._prog)

    __repr__ = __str__

    @property
    def graph(self):
        return _Graph(self._prog)

    @property
    def graph_signature(self):
        return ExportGraphSignature(self._prog)

    @property
    def state_dict(self):
        kinds = {t: k for k, t, _ in self._prog.inputs}
        return {n: t for n, t in self._prog.state if kinds.get(n) in ("PARAMETER", "BUFFER")}

    @property
    def constants(self):
        kinds = {t: k for k, t, _ in self._prog.inputs}
        return {n: t for n, t in self._prog.state if kinds.get(n) == "CONSTANT_TENSOR"}

    @property
    def range_constraints(self):
        return {name: (lo, hi) for name, lo, hi, unbacked in self._prog.symbols if not unbacked}

    @property
    def guards(self):
        return [text for text, _ in self._prog.guards]

    def run_decompositions(self, decomp_table=None):
        """kiln's graph is already made of its table ops, the level torch decomposes to: a copy."""
        return ExportedProgram(self._prog)

    def _run(self, args, kwargs):
        if self._runtime is None:
            self._runtime = _C._Runtime(self._prog)
        leaves = []
        spec = _flatten((tuple(args), dict(kwargs)), leaves)
        if self._in_spec is not None and not _same_structure(spec, self._in_spec):
            raise TypeError("kiln.export: the arguments do not have the structure (or the non-tensor values) "
                            "the program was exported with")
        outs = self._runtime.run(leaves)
        if self._out_spec is None:
            return tuple(outs)
        return _unflatten(self._out_spec, iter(outs))

    def module(self):
        """A kiln.nn.Module that runs the program (kiln's runtime: planned memory, no autograd)."""
        return _ProgramModule(self)

    def runtime_stats(self):
        return dict(self._runtime.stats) if self._runtime is not None else {}


def _load_spec(text, leaves, what):
    """An archive's argument / result structure, checked: node kinds, children, and as many tensor
    leaves as the program has inputs / outputs (a corrupt structure raises RuntimeError, as the rest
    of a corrupt archive does)."""
    if not text:
        return None
    count = [0]

    def check(node, depth):
        if depth > 64 or not isinstance(node, dict) or node.get("t") not in ("tensor", "const", "tuple", "list",
                                                                              "dict"):
            raise ValueError("bad node")
        t = node["t"]
        if t == "tensor":
            count[0] += 1
        elif t == "const":
            if "v" not in node or not (node["v"] is None or isinstance(node["v"], (bool, int, float, str))):
                raise ValueError("bad constant")
        else:
            children = node.get("c")
            if not isinstance(children, list):
                raise ValueError("bad children")
            if t == "dict" and (not isinstance(node.get("k"), list) or len(node["k"]) != len(children)
                                or not all(isinstance(k, str) for k in node["k"])):
                raise ValueError("bad keys")
            for c in children:
                check(c, depth + 1)

    try:
        spec = json.loads(text)
        check(spec, 0)
        if count[0] != leaves:
            raise ValueError(f"{count[0]} tensors for {leaves}")
        if what == "argument" and (spec["t"] != "tuple" or len(spec["c"]) != 2 or spec["c"][0]["t"] != "tuple"
                                   or spec["c"][1]["t"] != "dict"):
            raise ValueError("not (args, kwargs)")
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise RuntimeError(f"[export.load] the archive's {what} structure is malformed ({e})") from None
    return spec


def _same_structure(a, b):
    if a["t"] != b["t"]:
        return False
    if a["t"] == "const":
        return a["v"] == b["v"]
    if a["t"] == "tensor":
        return True
    if a["t"] == "dict" and a["k"] != b["k"]:
        return False
    return len(a["c"]) == len(b["c"]) and all(_same_structure(x, y) for x, y in zip(a["c"], b["c"]))


class _Node:
    def __init__(self, op, inputs, attrs, outputs, writes):
        self.op, self.target, self.args, self.attrs, self.outputs, self.writes = op, op, inputs, attrs, outputs, writes
        self.name = outputs[0] if outputs and outputs[0] else op

    def __repr__(self):
        return f"{', '.join(str(o) for o in self.outputs)} = {self.op}({', '.join(map(str, list(self.args) + list(self.attrs)))})"


class _Graph:
    def __init__(self, prog):
        self.nodes = [_Node(*n) for n in prog.nodes]
        self._prog = prog

    def __str__(self):
        return str(self._prog).split("\n\nGraph signature")[0]

    def __iter__(self):
        return iter(self.nodes)

    def __len__(self):
        return len(self.nodes)


class _ProgramModule(Module):
    def __init__(self, ep):
        super().__init__()
        self.__dict__["_ep"] = ep

    def forward(self, *args, **kwargs):
        return self._ep._run(args, kwargs)

    def __call__(self, *args, **kwargs):  # no hooks to run: straight to the runtime
        if self._forward_hooks or self._forward_pre_hooks:
            return super().__call__(*args, **kwargs)
        return self._ep._run(args, kwargs)


# ---- the archive ------------------------------------------------------------------------------------

def save(ep, f, *, extra_files=None):
    """Writes the program's archive (a zip: version record, graph JSON, 64-byte aligned raw weights,
    each member CRC-checked) to a path or a writable binary file."""
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"kiln.export.save() expects an ExportedProgram, got {type(ep).__name__}")
    if extra_files:
        raise ValueError("kiln.export.save: extra_files are not part of kiln's archive")
    if isinstance(f, (str, os.PathLike)):
        ep._prog.save(os.fspath(f))
    else:
        f.write(ep._prog.save_bytes())


def load(f, *, extra_files=None, expected_opset_version=None):
    """Reads an archive written by save (path or readable binary file); every member, size, dtype,
    op and index is checked, so a corrupt file raises instead of loading."""
    if isinstance(f, (str, os.PathLike)):
        return ExportedProgram(_C._export_load(os.fspath(f)))
    return ExportedProgram(_C._export_load_bytes(f.read()))
