"""kiln.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp) vs torch.autograd.functional (torch 2.13
is the oracle: every test body is written once, takes the library module `lib`, runs on torch and on kiln
copies of the same float64 data, and kiln's answer is compared with torch's, never with kiln's own).

Compared:
- values (rtol 1e-10, atol 1e-12) and the exact structure of every result: a Tensor where the inputs /
  outputs were a Tensor, a tuple where they were a tuple (a tuple of one element stays a tuple), a tuple
  of tuples for jacobian with tuple inputs and outputs and for hessian with tuple inputs, shapes
  out.shape + in.shape (jacobian) and in.shape + in.shape (hessian), 0-dim and matrix inputs, 0-dim and
  single-element non-0-dim outputs; the functions use sin / exp / tanh / pow, `@`, indexing, sum(dim);
- v=None: allowed for vjp only when the function returns one Tensor of one element (any shape), for jvp /
  vhp / hvp only when the input is one Tensor of one element; RuntimeError otherwise;
- v of the wrong shape (also a broadcastable one, also one with the right numel), a tuple v of the wrong
  length: RuntimeError; a v that is neither a Tensor nor a tuple of Tensors: TypeError;
- inputs that are not a Tensor or a tuple of Tensors (a float, a list, a tuple holding a float): TypeError;
  integer inputs: RuntimeError (they cannot require grad);
- a function returning something other than a Tensor or a tuple of Tensors: TypeError; hessian / vhp / hvp
  of a function returning a tuple or a Tensor of more than one element: RuntimeError;
- functions with integer outputs: zeros (and the integer output itself) for vjp, jacobian, hessian, vhp,
  hvp; RuntimeError from jvp (torch cannot make an integer grad_output that requires grad); RuntimeError
  with strict=True;
- create_graph=False: results (the function's output included) do not require grad, even for inputs that
  require grad, and the caller's leaves get no .grad; create_graph=True: results require grad and a
  second (for hessian a third) derivative through them w.r.t. the inputs and v matches torch's; also
  inside no_grad;
- strict=True: RuntimeError for an output independent of an input, for an output that does not require
  grad, for a linear function with create_graph=True (vjp / jvp / jacobian: the derivative does not
  depend on the input), for a linear function in hessian / vhp / hvp; strict=False: zeros there;
- jacobian's `vectorize` and `strategy` and hessian's `vectorize` and `outer_jacobian_strategy`: the
  whole grid of (vectorize, strategy, create_graph, strict) — torch raises RuntimeError for strict with
  vectorize or with forward-mode, NotImplementedError for forward-mode with create_graph or without
  vectorize, AssertionError for an unknown strategy; where it does not raise, the values match (for
  forward-mode only the values: torch returns lists there and leaks requires_grad, so neither the
  list-vs-tuple container nor the flags are compared).
"""
import pytest
import torch

import kiln
from helpers import make, to_kiln_tree, to_torch

RTOL, ATOL = 1e-10, 1e-12


def F(lib):
    """The functional namespace of a library (looked up at call time)."""
    return lib.autograd.functional


def D(*shape, seed=0, low=-1.5, high=1.5, grad=False):
    t = make(shape, "float64", low=low, high=high, seed=seed)
    return t.requires_grad_() if grad else t


# ---- harness --------------------------------------------------------------------------------------
def _copies(datas):
    """Fresh torch copies (requires_grad kept) and kiln copies of the data tensors."""
    tdata = [d.detach().clone().requires_grad_(d.requires_grad) for d in datas]
    kdata = [to_kiln_tree(d) for d in datas]
    return tdata, kdata


def _same(k, t, flags, lists, path):
    if isinstance(t, (tuple, list)):
        if lists:  # forward-mode jacobian: torch returns lists, compare the elements only
            assert isinstance(k, (tuple, list)), f"{path}: expected a sequence, kiln gave {type(k).__name__}"
        else:
            assert type(k) is type(t), f"{path}: expected a {type(t).__name__}, kiln gave {type(k).__name__}"
        assert len(k) == len(t), f"{path}: length {len(k)} != {len(t)}"
        for i, (a, b) in enumerate(zip(k, t)):
            _same(a, b, flags, lists, f"{path}[{i}]")
    elif isinstance(t, torch.Tensor):
        assert isinstance(k, kiln.Tensor), f"{path}: expected a Tensor, kiln gave {type(k).__name__}"
        assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], f"{path}: dtype {k.dtype} != {t.dtype}"
        assert tuple(k.shape) == tuple(t.shape), f"{path}: shape {tuple(k.shape)} != {tuple(t.shape)}"
        if flags:
            assert k.requires_grad == t.requires_grad, \
                f"{path}: requires_grad {k.requires_grad} (kiln) != {t.requires_grad} (torch)"
        torch.testing.assert_close(to_torch(k.detach()), t.detach(), rtol=RTOL, atol=ATOL, msg=path)
    else:
        assert k == t, f"{path}: kiln {k!r} != torch {t!r}"


def check(body, *datas, flags=True, lists=False):
    """body(torch, *torch_copies) and body(kiln, *kiln_copies) give the same structure, dtypes, shapes,
    values and (with flags) requires_grad."""
    tdata, kdata = _copies(datas)
    tres = body(torch, *tdata)
    kres = body(kiln, *kdata)
    _same(kres, tres, flags, lists, "result")
    return kres


def raises(cls, body, *datas):
    """torch raises exactly cls (pinned here); kiln raises cls too: exactly cls when kiln's class is a
    built-in one (NotImplementedError, a RuntimeError subclass, does not pass for RuntimeError), else a
    kiln-defined subclass of cls."""
    tdata, kdata = _copies(datas)
    with pytest.raises(cls) as te:
        body(torch, *tdata)
    assert type(te.value) is cls, f"torch raised {type(te.value).__name__}: {te.value}"
    with pytest.raises(cls) as ke:
        body(kiln, *kdata)
    kcls = type(ke.value)
    assert kcls is cls or kcls.__module__ != "builtins", \
        f"torch raised {cls.__name__}, kiln {kcls.__name__}: {ke.value}"


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [t for x in r for t in _flat(x)]
    return [r]


def _second(lib, res, wrt):
    """Gradient of sum(sin(t).sum()) over the result tensors w.r.t. `wrt` (a second derivative)."""
    s = sum(lib.sin(t).sum() for t in _flat(res))
    return lib.autograd.grad(s, wrt)


# ---- the functions differentiated (each runs on either library) -----------------------------------
def f_scalar(lib):  # (3,) -> ()
    return lambda x: (lib.sin(x) * x).sum() + lib.exp(x).pow(2).sum() * 0.25


def f_vec(lib):  # (4,) -> (2,): indexing, exp, sum
    return lambda x: lib.exp(x[:2]) * x.sum() + lib.tanh(x[1:3])


def f_mat(lib):  # (x (3,), w (2, 3)) -> (2,): matmul, tanh
    return lambda x, w: lib.tanh(w @ x) * x[0]


def f_two(lib):  # (x (3,), w (2, 3)) -> ((2,), ()): sum(dim)
    return lambda x, w: (lib.exp(w @ x), (w.pow(3).sum(1) * x[:2]).sum())


def f_multi(lib):  # (3,) -> ((3,), ())
    return lambda x: (lib.sin(x) * x, lib.tanh(x).pow(2).sum())


def f_row(lib):  # (2, 3) -> (2,): sum(dim)
    return lambda w: (w.pow(2) * lib.sin(w)).sum(1)


def f_0d(lib):  # () -> ()
    return lambda s: lib.exp(s) * lib.sin(s)


def f_0d_vec(lib):  # () -> (2,)
    return lambda s: lib.stack((lib.sin(s), s * s * s))


def f_hs2(lib):  # (x (3,), w (2, 3)) -> (): couples x and w
    return lambda x, w: (lib.tanh(w @ x) * lib.exp(x[:2])).sum() + w.pow(2).sum(1).pow(2).sum()


def f_hmat(lib):  # (2, 3) -> ()
    return lambda w: (lib.sin(w).sum(1) * w.pow(3).sum(1)).sum()


X, X4, W, S = D(3), D(4, seed=1), D(2, 3, seed=2), D(seed=3)
V2, V3, VW, VS, C2 = D(2, seed=4), D(3, seed=5), D(2, 3, seed=6), D(seed=7), D(2, seed=8)
X1 = D(1, seed=9)


# ---- vjp -----------------------------------------------------------------------------------------
VJP_CASES = {
    "tensor_in_scalar_out_v_none": (lambda lib, x: F(lib).vjp(f_scalar(lib), x), [X]),
    "scalar_out_explicit_v": (lambda lib, x, s: F(lib).vjp(f_scalar(lib), x, s), [X, VS]),
    "single_element_1x1_out_v_none": (lambda lib, x: F(lib).vjp(lambda a: f_scalar(lib)(a).reshape(1, 1), x), [X]),
    "tensor_in_vector_out": (lambda lib, x, v: F(lib).vjp(f_vec(lib), x, v), [X4, V2]),
    "v_as_one_tuple": (lambda lib, x, v: F(lib).vjp(f_vec(lib), x, (v,)), [X4, V2]),
    "tuple_in": (lambda lib, x, w, v: F(lib).vjp(f_mat(lib), (x, w), v), [X, W, V2]),
    "one_tuple_in": (lambda lib, x: F(lib).vjp(f_scalar(lib), (x,)), [X]),
    "tuple_out": (lambda lib, x, v, s: F(lib).vjp(f_multi(lib), x, (v, s)), [X, V3, VS]),
    "tuple_in_tuple_out": (lambda lib, x, w, v, s: F(lib).vjp(f_two(lib), (x, w), (v, s)), [X, W, V2, VS]),
    "one_tuple_out": (lambda lib, x, v: F(lib).vjp(lambda a: (f_vec(lib)(a),), x, (v,)), [X4, V2]),
    "zero_dim_in": (lambda lib, s: F(lib).vjp(f_0d(lib), s), [S]),
    "matrix_in": (lambda lib, w, v: F(lib).vjp(f_row(lib), w, v), [W, V2]),
    "returns_its_input": (lambda lib, x, v: F(lib).vjp(lambda a: a, x, v), [X, V3]),
}


@pytest.mark.parametrize("case", list(VJP_CASES))
def test_vjp_values_and_structure(case):
    body, datas = VJP_CASES[case]
    check(body, *datas)


@pytest.mark.parametrize("fn", ["vector_out", "tuple_of_scalars"])
def test_vjp_v_none_needs_single_element_output(fn):
    def body(lib, x):
        f = f_vec(lib) if fn == "vector_out" else (lambda a: (a.sum(), lib.exp(a).sum()))
        return F(lib).vjp(f, x)

    raises(RuntimeError, body, X4)


# ---- jvp -----------------------------------------------------------------------------------------
JVP_CASES = {
    "zero_dim_in_v_none": (lambda lib, s: F(lib).jvp(f_0d(lib), s), [S]),
    "single_element_in_v_none": (lambda lib, x: F(lib).jvp(lambda a: lib.exp(a) * 2 + a.pow(3), x), [X1]),
    "one_tuple_single_element_in_v_none": (lambda lib, s: F(lib).jvp(f_0d_vec(lib), (s,)), [S]),
    "zero_dim_in_vector_out": (lambda lib, s, v: F(lib).jvp(f_0d_vec(lib), s, v), [S, VS]),
    "tensor_in_vector_out": (lambda lib, x, v: F(lib).jvp(f_vec(lib), x, v), [X4, D(4, seed=10)]),
    "tensor_in_scalar_out": (lambda lib, x, v: F(lib).jvp(f_scalar(lib), x, v), [X, V3]),
    "v_as_one_tuple": (lambda lib, x, v: F(lib).jvp(f_scalar(lib), x, (v,)), [X, V3]),
    "tuple_in": (lambda lib, x, w, vx, vw: F(lib).jvp(f_mat(lib), (x, w), (vx, vw)), [X, W, V3, VW]),
    "tuple_out": (lambda lib, x, v: F(lib).jvp(f_multi(lib), x, v), [X, V3]),
    "tuple_in_tuple_out": (lambda lib, x, w, vx, vw: F(lib).jvp(f_two(lib), (x, w), (vx, vw)), [X, W, V3, VW]),
    "one_tuple_out": (lambda lib, x, v: F(lib).jvp(lambda a: (f_vec(lib)(a),), x, v), [X4, D(4, seed=10)]),
    "matrix_in": (lambda lib, w, v: F(lib).jvp(f_row(lib), w, v), [W, VW]),
}


@pytest.mark.parametrize("case", list(JVP_CASES))
def test_jvp_values_and_structure(case):
    body, datas = JVP_CASES[case]
    check(body, *datas)


@pytest.mark.parametrize("inp", ["multi_element", "tuple_of_single_elements"])
def test_jvp_v_none_needs_single_element_input(inp):
    def body(lib, x, s, s2):
        if inp == "multi_element":
            return F(lib).jvp(lib.sin, x)
        return F(lib).jvp(lambda a, b: a * b, (s, s2))

    raises(RuntimeError, body, X, S, VS)


# ---- v validation (vjp / jvp / vhp / hvp) ---------------------------------------------------------
def _with_v(lib, name, x, w, v):
    """name's product at (x, w) — w only when v is a tuple of two — with the given v."""
    fl = F(lib)
    if name == "vjp":
        f = f_multi(lib) if isinstance(v, tuple) and len(v) == 2 else (lambda a: lib.sin(a) * a)
        return fl.vjp(f, x, v)
    if name == "jvp":
        if isinstance(v, tuple) and len(v) == 1:  # a tuple too short for two inputs
            return fl.jvp(lambda a, b: lib.tanh(b @ a), (x, w), v)
        return fl.jvp(lambda a: lib.sin(a) * a, x, v)
    f = f_scalar(lib)
    if isinstance(v, tuple) and len(v) == 1:
        return getattr(fl, name)(f_hs2(lib), (x, w), v)
    return getattr(fl, name)(f, x, v)


BAD_V = {  # (kind, torch's class)
    "longer": RuntimeError,
    "broadcastable": RuntimeError,
    "same_numel_other_shape": RuntimeError,
    "tuple_too_short": RuntimeError,
    "list": TypeError,
    "float": TypeError,
}


@pytest.mark.parametrize("name", ["vjp", "jvp", "vhp", "hvp"])
@pytest.mark.parametrize("kind", list(BAD_V))
def test_bad_v(name, kind):
    def body(lib, x, w, v):
        bad = {"longer": lambda: lib.cat((v, v[:1])),
               "broadcastable": lambda: v[:1],
               "same_numel_other_shape": lambda: v.reshape(3, 1),
               "tuple_too_short": lambda: (v,),
               "list": lambda: [v],
               "float": lambda: 1.0}[kind]()
        if kind == "tuple_too_short" and name == "vjp":  # f_multi has two outputs, v has one
            return F(lib).vjp(f_multi(lib), x, bad)
        return _with_v(lib, name, x, w, bad)

    raises(BAD_V[kind], body, X, W, V3)


@pytest.mark.parametrize("name", ["vjp", "jvp", "vhp", "hvp"])
def test_right_v_after_bad_v(name):
    """The valid counterpart of test_bad_v: same functions, v of the right shape."""
    check(lambda lib, x, w, v: _with_v(lib, name, x, w, v), X, W, V3)


# ---- jacobian ------------------------------------------------------------------------------------
JAC_CASES = {
    "tensor_in_vector_out": (lambda lib: f_vec(lib), lambda x4, x, w, s: x4),
    "scalar_out": (lambda lib: f_scalar(lib), lambda x4, x, w, s: x),
    "zero_dim_in_out": (lambda lib: f_0d(lib), lambda x4, x, w, s: s),
    "zero_dim_in_vector_out": (lambda lib: f_0d_vec(lib), lambda x4, x, w, s: s),
    "matrix_in": (lambda lib: f_row(lib), lambda x4, x, w, s: w),
    "tuple_in": (lambda lib: f_mat(lib), lambda x4, x, w, s: (x, w)),
    "one_tuple_in": (lambda lib: f_vec(lib), lambda x4, x, w, s: (x4,)),
    "tuple_out": (lambda lib: f_multi(lib), lambda x4, x, w, s: x),
    "one_tuple_out": (lambda lib: (lambda a: (f_vec(lib)(a),)), lambda x4, x, w, s: x4),
    "tuple_in_tuple_out": (lambda lib: f_two(lib), lambda x4, x, w, s: (x, w)),
}
MODES = {"default": {}, "vectorize": {"vectorize": True},
         "forward_mode": {"vectorize": True, "strategy": "forward-mode"}}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", list(JAC_CASES))
def test_jacobian_values_and_structure(case, mode):
    fn, pick = JAC_CASES[case]
    kw = MODES[mode]
    fwd = mode == "forward_mode"
    res = check(lambda lib, *d: F(lib).jacobian(fn(lib), pick(*d), **kw), X4, X, W, S, flags=not fwd, lists=fwd)
    if case == "tensor_in_vector_out":
        assert tuple(res.shape) == (2, 4)  # out.shape + in.shape
    if case == "tuple_in_tuple_out":  # ((d out0/d x, d out0/d w), (d out1/d x, d out1/d w))
        assert [[tuple(t.shape) for t in row] for row in res] == [[(2, 3), (2, 2, 3)], [(3,), (2, 3)]]


# (vectorize, strategy, create_graph, strict) -> torch's exception class, None where torch computes
JAC_GRID = {
    (False, "reverse-mode", False, False): None,
    (False, "reverse-mode", False, True): None,
    (False, "reverse-mode", True, False): None,
    (False, "reverse-mode", True, True): None,
    (False, "forward-mode", False, False): NotImplementedError,  # forward-mode needs vectorize=True
    (False, "forward-mode", False, True): RuntimeError,  # strict with forward-mode
    (False, "forward-mode", True, False): NotImplementedError,  # create_graph with forward-mode
    (False, "forward-mode", True, True): NotImplementedError,
    (True, "reverse-mode", False, False): None,
    (True, "reverse-mode", False, True): RuntimeError,  # strict with vectorize
    (True, "reverse-mode", True, False): None,
    (True, "reverse-mode", True, True): RuntimeError,
    (True, "forward-mode", False, False): None,
    (True, "forward-mode", False, True): RuntimeError,
    (True, "forward-mode", True, False): NotImplementedError,
    (True, "forward-mode", True, True): NotImplementedError,
}


def _grid_id(k):
    vec, st, cg, strict = k
    return f"vec{int(vec)}-{st.split('-')[0]}-cg{int(cg)}-strict{int(strict)}"


@pytest.mark.parametrize("combo", list(JAC_GRID), ids=_grid_id)
def test_jacobian_option_grid(combo):
    vec, st, cg, strict = combo

    def body(lib, x, w):
        return F(lib).jacobian(f_two(lib), (x, w), create_graph=cg, strict=strict, vectorize=vec, strategy=st)

    if JAC_GRID[combo] is not None:
        raises(JAC_GRID[combo], body, X, W)
    else:
        fwd = st == "forward-mode"
        check(body, X, W, flags=not fwd, lists=fwd)


@pytest.mark.parametrize("vec", [False, True])
def test_jacobian_unknown_strategy(vec):
    raises(AssertionError, lambda lib, x: F(lib).jacobian(f_vec(lib), x, vectorize=vec, strategy="sideways"), X4)


# ---- hessian -------------------------------------------------------------------------------------
HESS_CASES = {
    "vector_in": (lambda lib: f_scalar(lib), lambda x, w, s: x),
    "matrix_in": (lambda lib: f_hmat(lib), lambda x, w, s: w),  # (2, 3, 2, 3)
    "zero_dim_in": (lambda lib: f_0d(lib), lambda x, w, s: s),  # ()
    "tuple_in": (lambda lib: f_hs2(lib), lambda x, w, s: (x, w)),  # tuple of tuples
    "one_tuple_in": (lambda lib: f_scalar(lib), lambda x, w, s: (x,)),
    "single_element_1x1_out": (lambda lib: (lambda a: f_scalar(lib)(a).reshape(1, 1)), lambda x, w, s: x),
}
HMODES = {"default": {}, "vectorize": {"vectorize": True},
          "forward_mode": {"vectorize": True, "outer_jacobian_strategy": "forward-mode"}}


@pytest.mark.parametrize("mode", list(HMODES))
@pytest.mark.parametrize("case", list(HESS_CASES))
def test_hessian_values_and_structure(case, mode):
    fn, pick = HESS_CASES[case]
    kw = HMODES[mode]
    fwd = mode == "forward_mode"
    res = check(lambda lib, *d: F(lib).hessian(fn(lib), pick(*d), **kw), X, W, S, flags=not fwd, lists=fwd)
    if case == "matrix_in":
        assert tuple(res.shape) == (2, 3, 2, 3)  # in.shape + in.shape
    if case == "tuple_in":
        assert [[tuple(t.shape) for t in row] for row in res] == [[(3, 3), (3, 2, 3)], [(2, 3, 3), (2, 3, 2, 3)]]


@pytest.mark.parametrize("combo", list(JAC_GRID), ids=_grid_id)
def test_hessian_option_grid(combo):
    vec, st, cg, strict = combo  # torch's outcomes are jacobian's (hessian passes them to its jacobian)

    def body(lib, x, w):
        return F(lib).hessian(f_hs2(lib), (x, w), create_graph=cg, strict=strict, vectorize=vec,
                              outer_jacobian_strategy=st)

    if JAC_GRID[combo] is not None:
        raises(JAC_GRID[combo], body, X, W)
    else:
        fwd = st == "forward-mode"
        check(body, X, W, flags=not fwd, lists=fwd)


@pytest.mark.parametrize("vec", [False, True])
def test_hessian_unknown_strategy(vec):
    raises(AssertionError,
           lambda lib, x: F(lib).hessian(f_scalar(lib), x, vectorize=vec, outer_jacobian_strategy="sideways"), X)


# ---- vhp / hvp -----------------------------------------------------------------------------------
def _hv(lib, name):
    return getattr(F(lib), name)


HVP_CASES = {  # body(lib, name, x, w, s, vx, vw, vs)
    "vector_in": lambda lib, n, x, w, s, vx, vw, vs: _hv(lib, n)(f_scalar(lib), x, vx),
    "matrix_in": lambda lib, n, x, w, s, vx, vw, vs: _hv(lib, n)(f_hmat(lib), w, vw),
    "zero_dim_in_v_none": lambda lib, n, x, w, s, vx, vw, vs: _hv(lib, n)(f_0d(lib), s),
    "single_element_in_v_none": lambda lib, n, x, w, s, vx, vw, vs: _hv(lib, n)(
        lambda a: (lib.exp(a) * lib.sin(a)).sum(), s.reshape(1)),
    "zero_dim_in_explicit_v": lambda lib, n, x, w, s, vx, vw, vs: _hv(lib, n)(f_0d(lib), s, vs),
    "tuple_in": lambda lib, n, x, w, s, vx, vw, vs: _hv(lib, n)(f_hs2(lib), (x, w), (vx, vw)),
    "one_tuple_in": lambda lib, n, x, w, s, vx, vw, vs: _hv(lib, n)(f_scalar(lib), (x,), (vx,)),
    "v_as_one_tuple": lambda lib, n, x, w, s, vx, vw, vs: _hv(lib, n)(f_scalar(lib), x, (vx,)),
    "single_element_1x1_out": lambda lib, n, x, w, s, vx, vw, vs: _hv(lib, n)(
        lambda a: f_scalar(lib)(a).reshape(1, 1), x, vx),
}


@pytest.mark.parametrize("case", list(HVP_CASES))
@pytest.mark.parametrize("name", ["vhp", "hvp"])
def test_vhp_hvp_values_and_structure(name, case):
    body = HVP_CASES[case]
    check(lambda lib, *d: body(lib, name, *d), X, W, S, V3, VW, VS)


@pytest.mark.parametrize("name", ["vhp", "hvp"])
def test_vhp_hvp_v_none_needs_single_element_input(name):
    raises(RuntimeError, lambda lib, x: getattr(F(lib), name)(f_scalar(lib), x), X)


# ---- hessian / vhp / hvp need one single-element Tensor output ------------------------------------
def _second_order(lib, name, f, x, v):
    fl = F(lib)
    return fl.hessian(f, x) if name == "hessian" else getattr(fl, name)(f, x, v)


@pytest.mark.parametrize("out", ["vector", "one_tuple", "two_tuple"])
@pytest.mark.parametrize("name", ["hessian", "vhp", "hvp"])
def test_second_order_needs_single_tensor_single_element(name, out):
    def body(lib, x, v):
        f = {"vector": lambda a: lib.sin(a) * a,
             "one_tuple": lambda a: (f_scalar(lib)(a),),
             "two_tuple": lambda a: (f_scalar(lib)(a), a.pow(2).sum())}[out]
        return _second_order(lib, name, f, x, v)

    raises(RuntimeError, body, X, V3)


# ---- arguments that are not tensors ---------------------------------------------------------------
def _call(lib, name, f, inputs, x):
    """name(f, inputs) with a valid v (built from x) where name needs one."""
    fl = F(lib)
    if name in ("jacobian", "hessian"):
        return getattr(fl, name)(f, inputs)
    if name == "vjp":
        return fl.vjp(f, inputs)
    return getattr(fl, name)(f, inputs, x)


ALL = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


@pytest.mark.parametrize("inputs", ["float", "list", "tuple_with_float"])
@pytest.mark.parametrize("name", ALL)
def test_inputs_not_tensors(name, inputs):
    def body(lib, x, v):
        inp = {"float": 1.5, "list": [x], "tuple_with_float": (x, 2.0)}[inputs]
        return _call(lib, name, lambda *a: (a[0] * a[0]).sum(), inp, v)

    raises(TypeError, body, X, V3)


@pytest.mark.parametrize("ret", ["float", "list", "none", "tuple_with_float"])
@pytest.mark.parametrize("name", ALL)
def test_function_returns_non_tensor(name, ret):
    def body(lib, x, v):
        def f(a):
            s = (a * a).sum()
            return {"float": 1.5, "list": [s], "none": None, "tuple_with_float": (s, 2.0)}[ret]

        return _call(lib, name, f, x, v)

    raises(TypeError, body, X, V3)


@pytest.mark.parametrize("name", ALL)
def test_integer_inputs(name):
    def body(lib, n, v):
        return _call(lib, name, lambda a: (a * a).sum(), n, v)

    raises(RuntimeError, body, torch.arange(3), torch.ones(3, dtype=torch.int64))


# ---- integer outputs ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_integer_outputs(name):
    """torch: the output does not require grad -> zeros (jvp: RuntimeError, it needs a grad_output that
    requires grad, which an integer tensor cannot)."""
    def body(lib, x, v):
        return _call(lib, name, lambda a: (a > 0).long().sum(), x, v)

    if name == "jvp":
        raises(RuntimeError, body, X, V3)
    else:
        check(body, X, V3)


@pytest.mark.parametrize("vec", [False, True])
def test_jacobian_integer_vector_output(vec):
    check(lambda lib, x: F(lib).jacobian(lambda a: (a > 0).long(), x, vectorize=vec), X)


@pytest.mark.parametrize("name", ALL)
def test_integer_outputs_strict(name):
    def body(lib, x, v):
        fl = F(lib)
        f = lambda a: (a > 0).long().sum()  # noqa: E731
        if name in ("jacobian", "hessian"):
            return getattr(fl, name)(f, x, strict=True)
        if name == "vjp":
            return fl.vjp(f, x, strict=True)
        return getattr(fl, name)(f, x, v, strict=True)

    raises(RuntimeError, body, X, V3)


# ---- strict --------------------------------------------------------------------------------------
def _strict_call(lib, name, f, inputs, vs, strict, create_graph=False):
    fl = F(lib)
    kw = {"strict": strict, "create_graph": create_graph}
    if name in ("jacobian", "hessian"):
        return getattr(fl, name)(f, inputs, **kw)
    return getattr(fl, name)(f, inputs, vs, **kw)


def _indep_fn(lib, name):
    """A function of (x, w) that ignores w; scalar where name needs it, else with a vector output."""
    if name in ("vjp", "hessian", "vhp", "hvp"):
        return lambda a, b: f_scalar(lib)(a)
    return lambda a, b: lib.sin(a) * a


def _indep_v(name, vx, vw):
    return None if name in ("vjp", "jacobian", "hessian") else (vx, vw)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("name", ALL)
def test_strict_output_independent_of_an_input(name, strict):
    def body(lib, x, w, vx, vw):
        return _strict_call(lib, name, _indep_fn(lib, name), (x, w), _indep_v(name, vx, vw), strict)

    if strict:
        raises(RuntimeError, body, X, W, V3, VW)
    else:
        check(body, X, W, V3, VW)  # zeros for w


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("name", ALL)
def test_strict_output_not_requiring_grad(name, strict):
    """The output is a constant (does not depend on the input at all)."""
    def body(lib, x, c, v):
        scalar = name in ("vjp", "hessian", "vhp", "hvp")
        f = (lambda a: c.sum() * 2) if scalar else (lambda a: c * 2)
        return _strict_call(lib, name, f, x, None if name == "vjp" else v, strict)

    if strict:
        raises(RuntimeError, body, X, C2, V3)
    else:
        check(body, X, C2, V3)  # zeros


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("name", ALL)
def test_strict_linear_function(name, strict, create_graph):
    """A linear function: its Jacobian does not depend on the input. torch: strict + create_graph raises
    for vjp / jvp / jacobian; strict raises for hessian / vhp / hvp whatever create_graph is."""
    def body(lib, x, v):
        scalar = name in ("vjp", "hessian", "vhp", "hvp")
        f = (lambda a: (a * 2).sum()) if scalar else (lambda a: a * 2)
        return _strict_call(lib, name, f, x, None if name == "vjp" else v, strict, create_graph)

    second = name in ("hessian", "vhp", "hvp")
    if strict and (create_graph or second):
        raises(RuntimeError, body, X, V3)
    elif second or create_graph:
        check(body, X, V3, flags=False)  # (torch's flags for a constant derivative are an engine detail)
    else:
        check(body, X, V3)


# ---- create_graph --------------------------------------------------------------------------------
def _product(lib, name, x, w, vx, vw, **kw):
    """name on a tuple input (x, w), with tuple v where name takes one."""
    fl = F(lib)
    if name == "vjp":
        return fl.vjp(f_two(lib), (x, w), (vx[:2], vx[2]), **kw)
    if name == "jvp":
        return fl.jvp(f_two(lib), (x, w), (vx, vw), **kw)
    if name == "jacobian":
        return fl.jacobian(f_two(lib), (x, w), **kw)
    if name == "hessian":
        return fl.hessian(f_hs2(lib), (x, w), **kw)
    return getattr(fl, name)(f_hs2(lib), (x, w), (vx, vw), **kw)


@pytest.mark.parametrize("name", ALL)
def test_create_graph_false_detaches(name):
    """Inputs and v that require grad: nothing returned requires grad, the leaves get no .grad and keep
    requires_grad."""
    def body(lib, x, w, vx, vw):
        res = _product(lib, name, x, w, vx, vw, create_graph=False)
        return res, x.grad, w.grad, x.requires_grad, x.is_leaf

    check(body, D(3, grad=True), D(2, 3, seed=2, grad=True), D(3, seed=5, grad=True), D(2, 3, seed=6, grad=True))


@pytest.mark.parametrize("name", ALL)
def test_create_graph_false_plain_inputs(name):
    check(lambda lib, *d: _product(lib, name, *d), X, W, V3, VW)


@pytest.mark.parametrize("name", ALL)
def test_create_graph_true_differentiable(name):
    """Results require grad; the derivative of sum(sin(result)) w.r.t. the inputs (and v) is torch's."""
    def body(lib, x, w, vx, vw):
        res = _product(lib, name, x, w, vx, vw, create_graph=True)
        deriv = res if name in ("jacobian", "hessian") else res[1]
        wrt = (x, w) if name in ("jacobian", "hessian") else (x, w, vx)
        return res, _second(lib, deriv, wrt)

    check(body, D(3, grad=True), D(2, 3, seed=2, grad=True), D(3, seed=5, grad=True), D(2, 3, seed=6, grad=True))


@pytest.mark.parametrize("name", ALL)
def test_create_graph_true_plain_inputs(name):
    """Inputs that do not require grad: with create_graph the results still require grad."""
    check(lambda lib, *d: _product(lib, name, *d, create_graph=True), X, W, V3, VW)


@pytest.mark.parametrize("name", ["vectorize", "vectorize_hessian"])
def test_create_graph_true_vectorize(name):
    def body(lib, x, w):
        fl = F(lib)
        if name == "vectorize":
            res = fl.jacobian(f_two(lib), (x, w), create_graph=True, vectorize=True)
        else:
            res = fl.hessian(f_hs2(lib), (x, w), create_graph=True, vectorize=True)
        return res, _second(lib, res, (x, w))

    check(body, D(3, grad=True), D(2, 3, seed=2, grad=True))


def test_hessian_create_graph_third_order_single_input():
    def body(lib, x):
        h = F(lib).hessian(f_scalar(lib), x, create_graph=True)
        return h, lib.autograd.grad((h * h).sum(), x)

    check(body, D(3, grad=True))


# ---- grad mode -----------------------------------------------------------------------------------
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name", ALL)
def test_inside_no_grad(name, create_graph):
    def body(lib, *d):
        with lib.no_grad():
            return _product(lib, name, *d, create_graph=create_graph)

    check(body, X, W, V3, VW)
