"""kiln.onnx: ONNX export of kiln programs (issue 12), written with the `onnx` package.

    kiln.onnx.export(model, (x,), "model.onnx", dynamic_shapes={"input": {0: Dim("seq"), 1: Dim("batch")}})

The model is exported with kiln.export first (or an ExportedProgram is given); each node of its graph
becomes ONNX operators. LSTM, GRU and RNN layers map to ONNX LSTM / GRU / RNN (gate order converted,
layout 0 with transposes for batch_first, GRU linear_before_reset=1, one ONNX op per layer and
direction); attention becomes MatMul / Softmax. Sizes that are symbols stay dynamic: a symbol is read
from its input's Shape and size expressions ("batch*seq") are computed with integer operators, so the
model runs at any size in its range, in onnxruntime as in kiln.
"""
import re

import numpy as np

from .. import _C
from ..export import Dim, ExportedProgram, export as _kiln_export

__all__ = ["export", "UnsupportedOperatorError"]


class UnsupportedOperatorError(RuntimeError):
    """A kiln op (or a use of it) that has no ONNX equivalent here."""


def _onnx():
    try:
        import onnx
        from onnx import helper, numpy_helper, TensorProto
    except ImportError as e:  # pragma: no cover - the test suite installs it
        raise ImportError("kiln.onnx needs the `onnx` package (pip install onnx)") from e
    return onnx, helper, numpy_helper, TensorProto


def export(model, args=(), f=None, *, kwargs=None, dynamic_shapes=None, opset_version=18, input_names=None,
           output_names=None, dynamic_axes=None, **unused):
    """Writes `model` (a kiln.nn.Module, a callable, or an ExportedProgram) as ONNX to `f` (a path or a
    binary file) and returns the onnx.ModelProto. `dynamic_axes` (torch's legacy form,
    {"input": {0: "batch"}}) is taken as dynamic_shapes with Dims of those names."""
    if isinstance(model, ExportedProgram):
        ep = model
    else:
        if not isinstance(args, tuple):
            args = (args,)
        if dynamic_shapes is None and dynamic_axes:
            def dims(key, axes):
                pairs = axes.items() if isinstance(axes, dict) else [(i, None) for i in axes]
                return {d: Dim(n if isinstance(n, str) else f"{key}_{d}") for d, n in pairs}
            if input_names:  # torch's form: keys are input_names, one per positional argument
                dynamic_shapes = tuple(dims(n, dynamic_axes[n]) if n in dynamic_axes else None
                                       for n in list(input_names)[:len(args)])
                dynamic_shapes += (None,) * (len(args) - len(dynamic_shapes))
            else:
                dynamic_shapes = {k: dims(k, v) for k, v in dynamic_axes.items() if k not in (output_names or [])}
        ep = _kiln_export(model, args, kwargs, dynamic_shapes=dynamic_shapes)
    proto = _Converter(ep._prog, opset_version, input_names, output_names).run()
    if f is not None:
        data = proto.SerializeToString()
        if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__"):
            with open(f, "wb") as fh:
                fh.write(data)
        else:
            f.write(data)
    return proto


# ---- size expressions ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(\d+|[A-Za-z_]\w*\(?|//|[-+*%(),])")


def _tokens(text):
    pos, out = 0, []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            if text[pos:].strip() == "":
                break
            raise UnsupportedOperatorError(f"kiln.onnx: cannot read the size expression '{text}'")
        out.append(m.group(1))
        pos = m.end()
    return out


class _Expr:
    """Parses kiln's size expressions (the grammar SymInt.str prints) into ONNX int64 operators."""

    def __init__(self, conv, text):
        self.c, self.t, self.i = conv, _tokens(text), 0

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, want=None):
        tok = self.peek()
        if want is not None and tok != want:
            raise UnsupportedOperatorError(f"kiln.onnx: malformed size expression near {tok!r}")
        self.i += 1
        return tok

    def sum(self):
        neg = self.peek() == "-"
        if neg:
            self.take()
        r = self.prod()
        if neg:
            r = self.c.op("Neg", [r])
        while self.peek() in ("+", "-"):
            op = "Add" if self.take() == "+" else "Sub"
            r = self.c.op(op, [r, self.prod()])
        return r

    def prod(self):
        r = self.factor()
        while self.peek() == "*":
            self.take()
            r = self.c.op("Mul", [r, self.factor()])
        return r

    def factor(self):
        tok = self.take()
        if tok is None:
            raise UnsupportedOperatorError("kiln.onnx: truncated size expression")
        if tok.isdigit():
            return self.c.int_const([int(tok)])
        if tok in ("max(", "min("):
            a = self.sum()
            self.take(",")
            b = self.sum()
            self.take(")")
            return self.c.op("Max" if tok == "max(" else "Min", [a, b])
        if tok == "(":
            a = self.sum()
            if self.peek() in ("//", "%"):
                op = self.take()
                b = self.sum()
                self.take(")")
                # sizes are >= 0: ONNX's truncating Div is floor division here; Mod with fmod=0 floors
                return self.c.op("Div" if op == "//" else "Mod", [a, b])
            self.take(")")
            return a
        return self.c.symbol(tok)


# ---- the converter ------------------------------------------------------------------------------------

_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "neg": "Neg", "abs": "Abs", "erf": "Erf", "floor": "Floor", "ceil": "Ceil", "reciprocal": "Reciprocal",
          "sin": "Sin", "cos": "Cos", "softplus": "Softplus", "clone": "Identity", "contiguous": "Identity",
          "alias": "Identity", "detach": "Identity"}
_BINARY = {"mul": "Mul", "mul.Tensor": "Mul", "div.Tensor": "Div", "pow.Tensor_Tensor": "Pow",
           "maximum": "Max", "minimum": "Min"}
_RESHAPES = {"view", "reshape", "_unsafe_view", "squeeze", "squeeze.dims", "squeeze.dim", "unsqueeze", "flatten",
             "unflatten", "view_as", "reshape_as"}


class _Converter:
    def __init__(self, prog, opset, input_names, output_names):
        self.onnx, self.helper, self.nph, self.TP = _onnx()
        if opset < 17:
            raise ValueError("kiln.onnx writes opset 17 or later (LayerNormalization)")
        self.prog, self.opset = prog, opset
        self.values = prog.values  # name -> ([sizes], dtype)
        self.nodes, self.inits, self.n = [], [], 0
        self.syms, self.exprs, self.int_consts = {}, {}, {}
        self.state = dict(prog.state)
        self.const_of = {}  # value name -> numpy (parameters, buffers, constants)
        self.input_names, self.output_names = input_names, output_names
        self.renames = {}
        self.emitted = set()

    # -- helpers --
    def fresh(self, base):
        self.n += 1
        return f"{base}__{self.n}"

    def op(self, kind, inputs, outputs=None, **attrs):
        outs = outputs if outputs is not None else [self.fresh(kind.lower())]
        self.nodes.append(self.helper.make_node(kind, [i if i is not None else "" for i in inputs], outs, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def init(self, name, array):
        array = np.asarray(array)  # (np.ascontiguousarray would make a 0-d array 1-d)
        self.inits.append(self.nph.from_array(array if array.flags.c_contiguous else array.copy(order="C"), name))
        return name

    def int_const(self, vals, scalar=False):
        key = (tuple(vals), scalar)
        if key not in self.int_consts:
            arr = np.array(vals[0] if scalar else vals, dtype=np.int64)
            self.int_consts[key] = self.init(self.fresh("const"), arr)
        return self.int_consts[key]

    def const(self, value, dtype):
        return self.init(self.fresh("const"), np.array(value, dtype=_np_dtype(dtype)))

    def symbol(self, name):
        if name not in self.syms:
            for _, _, vname in (x for x in self.prog.inputs if x[0] == "USER_INPUT"):
                sizes = self.values[vname][0]
                if name in sizes:
                    d = sizes.index(name)
                    self.syms[name] = self.op("Shape", [self.name(vname)], start=d, end=d + 1)
                    break
            else:
                raise UnsupportedOperatorError(f"kiln.onnx: no input has the size '{name}'")
        return self.syms[name]

    def size(self, v):
        """A 1-element int64 tensor holding a size (int or expression)."""
        if isinstance(v, int):
            return self.int_const([v])
        if v not in self.exprs:
            e = _Expr(self, v)
            self.exprs[v] = e.sum()
            if e.peek() is not None:
                raise UnsupportedOperatorError(f"kiln.onnx: malformed size expression '{v}'")
        return self.exprs[v]

    def shape(self, sizes):
        if all(isinstance(s, int) for s in sizes):
            return self.int_const(list(sizes))
        return self.op("Concat", [self.size(s) for s in sizes], axis=0)

    def scalar(self, v):
        if isinstance(v, int):
            return self.int_const([v], scalar=True)
        return self.op("Squeeze", [self.size(v), self.int_const([0])])

    def name(self, v):
        if v in self.const_of and v not in self.emitted:
            self.emitted.add(v)
            self.init(v, self.const_of[v])
        return self.renames.get(v, v)

    def cast_to(self, x, vname_from, dtype):
        if x is None or self.values[vname_from][1] == dtype:
            return x
        return self.op("Cast", [x], to=_onnx_type(self.TP, dtype))

    def out_sizes(self, v):
        return self.values[v][0]

    def weight(self, vname):
        if vname not in self.const_of:
            raise UnsupportedOperatorError(f"kiln.onnx: {vname} must be a parameter to map to an ONNX RNN weight")
        return self.const_of[vname]

    # -- the model --
    def run(self):
        h, TP = self.helper, self.TP
        user_inputs = []
        for kind, target, vname in self.prog.inputs:
            if kind == "USER_INPUT":
                user_inputs.append(vname)
                continue
            self.const_of[vname] = _to_numpy(self.state[target])  # an initializer once an op reads it
        if self.input_names:
            if len(self.input_names) != len(user_inputs):
                raise ValueError(f"input_names has {len(self.input_names)} names for {len(user_inputs)} inputs")
            self.renames.update(zip(user_inputs, self.input_names))
        graph_inputs = []
        for vname in user_inputs:
            sizes, dt = self.values[vname]
            dims = [s if isinstance(s, int) else (s if re.fullmatch(r"[A-Za-z_]\w*", s) else None) for s in sizes]
            graph_inputs.append(h.make_tensor_value_info(self.name(vname), _onnx_type(TP, dt), dims))
        used = set()
        for _, ins, _, _, _ in self.prog.graph_nodes:
            used.update(i for i in ins if i)
        used.update(o for o in self.prog.outputs if o)
        self.used = used
        for opname, ins, attrs, outs, writes in self.prog.graph_nodes:
            if writes:
                raise UnsupportedOperatorError(f"kiln.onnx: {opname} writes in place; ONNX graphs are functional")
            handler = _HANDLERS.get(opname)
            if handler is None:
                if opname in _UNARY:
                    handler = _unary(_UNARY[opname])
                elif opname in _BINARY:
                    handler = _binary(_BINARY[opname])
                elif opname in _RESHAPES:
                    handler = _reshape
                else:
                    raise UnsupportedOperatorError(f"kiln.onnx: the op '{opname}' has no ONNX mapping")
            for k, o in enumerate(outs):  # outputs beyond what a mapping gives must be unused
                if o and k >= _PRODUCED.get(opname, 1) and o in used:
                    raise UnsupportedOperatorError(f"kiln.onnx: output {k} of {opname} ({o}) is used but has no "
                                                   "ONNX equivalent")
            handler(self, [self.name(i) if i else None for i in ins], attrs, outs, ins)
        graph_outputs, out_names = [], self.output_names or []
        for k, vname in enumerate(self.prog.outputs):
            if vname is None:
                continue
            name = out_names[k] if k < len(out_names) else vname
            src = self.name(vname)
            if name != src or src in [g.name for g in graph_inputs] or src in self.const_of:
                self.op("Identity", [src], [name])
            sizes, dt = self.values[vname]
            dims = [s if isinstance(s, int) else (s if re.fullmatch(r"[A-Za-z_]\w*", s) else None) for s in sizes]
            graph_outputs.append(h.make_tensor_value_info(name, _onnx_type(TP, dt), dims))
        graph = h.make_graph(self.nodes, "kiln_program", graph_inputs, graph_outputs, self.inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", self.opset)], producer_name="kiln",
                             producer_version=_C.__dict__.get("__version__", "0.1.0"))
        model.ir_version = min(model.ir_version, 10)
        self.onnx.checker.check_model(model)
        return model


def _np_dtype(dt):
    return {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
            "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}[str(dt).split(".")[-1]]


def _onnx_type(TP, dt):
    key = str(dt).split(".")[-1]
    table = {"float32": TP.FLOAT, "float64": TP.DOUBLE, "float16": TP.FLOAT16, "bfloat16": TP.BFLOAT16,
             "int64": TP.INT64, "int32": TP.INT32, "int16": TP.INT16, "int8": TP.INT8, "uint8": TP.UINT8,
             "bool": TP.BOOL, "uint16": TP.UINT16, "uint32": TP.UINT32, "uint64": TP.UINT64,
             "complex64": TP.COMPLEX64, "complex128": TP.COMPLEX128}
    if key not in table:
        raise UnsupportedOperatorError(f"kiln.onnx: dtype {key} has no ONNX type here")
    return table[key]


def _to_numpy(t):
    key = str(t.dtype).split(".")[-1]
    if key == "bfloat16":
        raise UnsupportedOperatorError("kiln.onnx: bfloat16 weights: convert the model to float32 first")
    return np.array(t.detach().contiguous().numpy(), copy=True)


# ---- handlers: (converter, input names, attrs, output value names, original input names) ----------------

_PRODUCED = {"native_layer_norm": 1, "max_pool": 1, "_sdpa_flash": 1, "lstm_layer": 3, "gru_layer": 2,
             "rnn_layer": 2}


def _unary(kind):
    def h(c, ins, attrs, outs, orig):
        c.op(kind, [ins[0]], [outs[0]])
    return h


def _binary(kind):
    def h(c, ins, attrs, outs, orig):
        dt = c.values[outs[0]][1]
        a, b = (c.cast_to(x, o, dt) for x, o in zip(ins[:2], orig[:2]))
        c.op(kind, [a, b], [outs[0]])
    return h


def _add_sub(kind):
    def h(c, ins, attrs, outs, orig):
        dt = c.values[outs[0]][1]
        a, b = (c.cast_to(x, o, dt) for x, o in zip(ins[:2], orig[:2]))
        alpha = attrs[0] if attrs else 1
        if alpha != 1:
            b = c.op("Mul", [b, c.const(alpha, dt)])
        c.op(kind, [a, b], [outs[0]])
    return h


def _reshape(c, ins, attrs, outs, orig):
    c.op("Reshape", [ins[0], c.shape(c.out_sizes(outs[0]))], [outs[0]], allowzero=1)


def _expand(c, ins, attrs, outs, orig):
    c.op("Expand", [ins[0], c.shape(c.out_sizes(outs[0]))], [outs[0]])


def _permute(c, ins, attrs, outs, orig):
    nd = len(c.out_sizes(outs[0]))
    c.op("Transpose", [ins[0]], [outs[0]], perm=[p % nd if nd else 0 for p in attrs[0]])


def _transpose(c, ins, attrs, outs, orig):
    nd = len(c.out_sizes(outs[0]))
    perm = list(range(nd))
    a, b = attrs[0] % nd, attrs[1] % nd
    perm[a], perm[b] = perm[b], perm[a]
    c.op("Transpose", [ins[0]], [outs[0]], perm=perm)


def _matmul(c, ins, attrs, outs, orig):
    c.op("MatMul", ins[:2], [outs[0]])


def _addmm(c, ins, attrs, outs, orig):
    beta, alpha = (attrs + [1, 1])[:2]
    dt = c.values[outs[0]][1]
    p = c.op("MatMul", ins[1:3])
    if alpha != 1:
        p = c.op("Mul", [p, c.const(alpha, dt)])
    if beta == 0:
        c.op("Identity", [p], [outs[0]])
        return
    b = ins[0] if beta == 1 else c.op("Mul", [ins[0], c.const(beta, dt)])
    c.op("Add", [b, p], [outs[0]])


def _slice(c, ins, attrs, outs, orig):
    dim, start, end, step = attrs
    c.op("Slice", [ins[0], c.size(start), c.size(end), c.int_const([dim]), c.int_const([step])], [outs[0]])


def _select(c, ins, attrs, outs, orig):
    dim, index = attrs
    c.op("Gather", [ins[0], c.scalar(index)], [outs[0]], axis=dim)


def _cat(c, ins, attrs, outs, orig):
    dt = c.values[outs[0]][1]
    parts = [c.cast_to(x, o, dt) for x, o in zip(ins, orig)]
    nd = len(c.out_sizes(outs[0]))
    c.op("Concat", parts, [outs[0]], axis=attrs[0] % nd)


def _full(c, ins, attrs, outs, orig):
    sizes, fill, dtype = attrs[0], attrs[1], attrs[2]
    value = c.helper.make_tensor("value", _onnx_type(c.TP, dtype), [1], [fill])
    c.op("ConstantOfShape", [c.shape(sizes)], [outs[0]], value=value)


def _to(c, ins, attrs, outs, orig):
    c.op("Cast", [ins[0]], [outs[0]], to=_onnx_type(c.TP, attrs[0]))


def _arange(c, ins, attrs, outs, orig):
    start, end, step, dtype = attrs[:4]
    if all(isinstance(v, (int, str)) for v in (start, end, step)):  # integers or size expressions
        r = c.op("Range", [c.scalar(start), c.scalar(end), c.scalar(step)])
        c.op("Cast", [r], [outs[0]], to=_onnx_type(c.TP, dtype))
    else:
        r = c.op("Range", [c.const(start, "float64"), c.const(end, "float64"), c.const(step, "float64")])
        c.op("Cast", [r], [outs[0]], to=_onnx_type(c.TP, dtype))


def _embedding(c, ins, attrs, outs, orig):
    c.op("Gather", ins[:2], [outs[0]], axis=0)


def _softmax(kind):
    def h(c, ins, attrs, outs, orig):
        x = ins[0]
        if len(attrs) > 1 and attrs[1] is not None:
            x = c.op("Cast", [x], to=_onnx_type(c.TP, attrs[1]))
        c.op(kind, [x], [outs[0]], axis=attrs[0])
    return h


def _gelu(c, ins, attrs, outs, orig):
    x, dt = ins[0], c.values[outs[0]][1]
    approx = attrs[0] if attrs else "none"
    half, one = c.const(0.5, dt), c.const(1.0, dt)
    if approx == "tanh":
        inner = c.op("Mul", [c.const(np.sqrt(2 / np.pi), dt),
                             c.op("Add", [x, c.op("Mul", [c.const(0.044715, dt), c.op("Mul", [x, c.op("Mul", [x, x])])])])])
        t = c.op("Tanh", [inner])
    else:
        t = c.op("Erf", [c.op("Mul", [x, c.const(1 / np.sqrt(2), dt)])])
    c.op("Mul", [c.op("Mul", [x, half]), c.op("Add", [t, one])], [outs[0]])


def _silu(c, ins, attrs, outs, orig):
    c.op("Mul", [ins[0], c.op("Sigmoid", [ins[0]])], [outs[0]])


def _rsqrt(c, ins, attrs, outs, orig):
    c.op("Reciprocal", [c.op("Sqrt", [ins[0]])], [outs[0]])


def _leaky_relu(c, ins, attrs, outs, orig):
    c.op("LeakyRelu", [ins[0]], [outs[0]], alpha=float(attrs[0] if attrs else 0.01))


def _hardtanh(c, ins, attrs, outs, orig):
    dt = c.values[outs[0]][1]
    lo, hi = (attrs + [-1, 1])[:2]
    c.op("Clip", [ins[0], c.const(lo, dt), c.const(hi, dt)], [outs[0]])


def _layer_norm(c, ins, attrs, outs, orig):
    nd, eps = attrs[0], attrs[1]
    x, w, b = ins[:3]
    if w is None:
        norm = c.out_sizes(outs[0])[-nd:]
        w = c.op("ConstantOfShape", [c.shape(norm)], value=c.helper.make_tensor("v", _onnx_type(c.TP, c.values[outs[0]][1]), [1], [1.0]))
    c.op("LayerNormalization", [x, w, b], [outs[0]], axis=-nd, epsilon=float(eps))


def _conv(c, ins, attrs, outs, orig):
    stride, padding, dilation, transposed, out_pad, groups = attrs
    kw = dict(strides=list(stride), pads=list(padding) * 2, dilations=list(dilation), group=groups)
    if transposed:
        c.op("ConvTranspose", ins[:3], [outs[0]], output_padding=list(out_pad), **kw)
    else:
        c.op("Conv", ins[:3], [outs[0]], **kw)


def _max_pool(c, ins, attrs, outs, orig):
    k, stride, padding, dilation, ceil = attrs
    c.op("MaxPool", [ins[0]], [outs[0]], kernel_shape=list(k), strides=list(stride) or list(k),
         pads=list(padding) * 2, dilations=list(dilation), ceil_mode=int(ceil))


def _avg_pool(c, ins, attrs, outs, orig):
    k, stride, padding, ceil, include_pad, divisor = attrs
    if divisor not in (0, None):
        raise UnsupportedOperatorError("kiln.onnx: avg_pool with divisor_override has no ONNX equivalent")
    c.op("AveragePool", [ins[0]], [outs[0]], kernel_shape=list(k), strides=list(stride) or list(k),
         pads=list(padding) * 2, ceil_mode=int(ceil), count_include_pad=int(include_pad))


def _reduce(kind):
    def h(c, ins, attrs, outs, orig):
        dims = attrs[0] if attrs and isinstance(attrs[0], list) else None
        keep = attrs[1] if len(attrs) > 1 and isinstance(attrs[1], bool) else False
        x = ins[0]
        if len(attrs) > 2 and attrs[2] is not None and not isinstance(attrs[2], bool):
            x = c.op("Cast", [x], to=_onnx_type(c.TP, attrs[2]))
        if dims:
            c.op(kind, [x, c.int_const(list(dims))], [outs[0]], keepdims=int(keep))
        else:
            c.op(kind, [x], [outs[0]], keepdims=int(keep))
    return h


def _sdpa(c, ins, attrs, outs, orig):
    q, k, v, mask = ins[:4]
    _, is_causal, scale, gqa = attrs[:4]
    if gqa and c.values[orig[0]][0][-3] != c.values[orig[1]][0][-3]:
        raise UnsupportedOperatorError("kiln.onnx: grouped-query attention (enable_gqa with fewer key heads)")
    dt = c.values[outs[0]][1]
    qs = c.values[orig[0]][0]
    e = qs[-1]
    if scale is None:
        if not isinstance(e, int):
            raise UnsupportedOperatorError("kiln.onnx: attention with a symbolic head size")
        scale = 1.0 / np.sqrt(e)
    nd = len(qs)
    perm = list(range(nd - 2)) + [nd - 1, nd - 2]
    scores = c.op("Mul", [c.op("MatMul", [q, c.op("Transpose", [k], perm=perm)]), c.const(scale, dt)])
    if is_causal:
        L, S = c.size(qs[-2]), c.size(c.values[orig[1]][0][-2])
        ones = c.op("ConstantOfShape", [c.op("Concat", [L, S], axis=0)],
                    value=c.helper.make_tensor("v", c.TP.BOOL, [1], [True]))
        keep = c.op("Trilu", [ones], upper=0)
        scores = c.op("Where", [keep, scores, c.const(-np.inf, dt)])
    if mask is not None:
        if str(c.values[orig[3]][1]).endswith("bool"):
            scores = c.op("Where", [mask, scores, c.const(-np.inf, dt)])
        else:
            scores = c.op("Add", [scores, mask])
    c.op("MatMul", [c.op("Softmax", [scores], axis=-1), v], [outs[0]])


def _gates(arr, order, n):
    """Reorders the row blocks of a (n*H, ...) array: torch's gate order to ONNX's."""
    blocks = np.split(arr, n, axis=0)
    return np.concatenate([blocks[i] for i in order], axis=0)


def _recurrent(c, ins, outs, orig, kind, n_gates, order, w_at, extra):
    x = ins[0]
    w_ih, w_hh = c.weight(orig[w_at]), c.weight(orig[w_at + 1])
    H = w_hh.shape[1]
    b_ih = c.weight(orig[w_at + 2]) if orig[w_at + 2] else np.zeros(n_gates * H, w_ih.dtype)
    b_hh = c.weight(orig[w_at + 3]) if orig[w_at + 3] else np.zeros(n_gates * H, w_ih.dtype)
    W = c.init(c.fresh("W"), _gates(w_ih, order, n_gates)[None])
    R = c.init(c.fresh("R"), _gates(w_hh, order, n_gates)[None])
    B = c.init(c.fresh("B"), np.concatenate([_gates(b_ih, order, n_gates), _gates(b_hh, order, n_gates)])[None])
    states = [c.op("Unsqueeze", [s, c.int_const([0])]) for s in extra["states"]]
    y = c.fresh("Y")
    results = [y] + [c.fresh(f"Y{i}") for i in range(len(states))]
    c.op(kind, [x, W, R, B, None] + states, results, hidden_size=int(H), direction=extra["direction"],
         **extra.get("attrs", {}))
    c.op("Squeeze", [y, c.int_const([1])], [outs[0]])  # (T, 1, B, H) -> (T, B, H)
    for r, o in zip(results[1:], outs[1:1 + len(states)]):
        if o:
            c.op("Squeeze", [r, c.int_const([0])], [o])


def _lstm(c, ins, attrs, outs, orig):
    if orig[7] is not None:
        raise UnsupportedOperatorError("kiln.onnx: an LSTM with proj_size has no ONNX LSTM equivalent")
    _recurrent(c, ins, outs, orig, "LSTM", 4, [0, 3, 1, 2], 3,
               {"states": [ins[1], ins[2]], "direction": "reverse" if attrs[0] else "forward"})


def _gru(c, ins, attrs, outs, orig):
    _recurrent(c, ins, outs, orig, "GRU", 3, [1, 0, 2], 2,
               {"states": [ins[1]], "direction": "reverse" if attrs[0] else "forward",
                "attrs": {"linear_before_reset": 1}})


def _rnn(c, ins, attrs, outs, orig):
    _recurrent(c, ins, outs, orig, "RNN", 1, [0], 2,
               {"states": [ins[1]], "direction": "reverse" if attrs[0] else "forward",
                "attrs": {"activations": ["Relu" if attrs[1] else "Tanh"]}})


_HANDLERS = {
    "add.Tensor": _add_sub("Add"), "sub.Tensor": _add_sub("Sub"), "expand": _expand, "permute": _permute,
    "transpose.int": _transpose, "bmm": _matmul, "mm": _matmul, "matmul": _matmul, "addmm": _addmm, "_fused_baddbmm": _addmm,
    "slice.Tensor": _slice, "select.int": _select, "cat": _cat, "full": _full, "to.dtype": _to,
    "arange.start_step": _arange, "embedding": _embedding, "softmax.int": _softmax("Softmax"),
    "log_softmax.int": _softmax("LogSoftmax"), "gelu": _gelu, "silu": _silu, "rsqrt": _rsqrt,
    "gelu_tanh": lambda c, ins, attrs, outs, orig: _gelu(c, ins, ["tanh"], outs, orig), "leaky_relu": _leaky_relu, "hardtanh": _hardtanh, "native_layer_norm": _layer_norm, "convolution": _conv,
    "max_pool": _max_pool, "avg_pool": _avg_pool, "_sdpa_flash": _sdpa, "lstm_layer": _lstm, "gru_layer": _gru,
    "rnn_layer": _rnn, "mean.dim": _reduce("ReduceMean"), "sum.dim_IntList": _reduce("ReduceSum"),
    "mean": _reduce("ReduceMean"), "sum": _reduce("ReduceSum"), "amax": _reduce("ReduceMax"),
}
