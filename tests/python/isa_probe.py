"""Runs a fixed battery of kiln ops on fixed inputs and saves every result's raw bits to an .npz file.

test_isa.py runs this once per kernel table the machine can run (KILN_CPU_ISA=base / avx2 / the
native one) and compares the files: kiln's answers must not depend on the ISA beyond the ulp bounds
stated there. Usage: python isa_probe.py OUT.npz
"""
import sys

import numpy as np

import kiln
import kiln.nn.functional as F

SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e-30, -1e-30, 1e-40, 3.4e38, -3.4e38,
           0.5, -0.5, 88.7, -88.7, 104.0, -104.0, 1e-7, 2.0 ** -126]
FLOATS = ("float32", "bfloat16", "float16", "float64")

UNARY = ["neg", "abs", "sign", "reciprocal", "sqrt", "rsqrt", "square", "exp", "exp2", "expm1", "log", "log2",
         "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
         "atanh", "sigmoid", "erf", "erfc", "erfinv", "lgamma", "digamma", "floor", "ceil", "trunc", "frac", "round",
         "relu", "signbit", "isnan", "isinf", "isfinite"]
ACT = ["relu6", "silu", "mish", "softsign", "hardsigmoid", "hardswish", "logsigmoid", "selu", "celu", "elu",
       "gelu", "softplus", "hardtanh", "leaky_relu"]
BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2", "maximum", "minimum",
          "fmax", "fmin", "hypot", "copysign", "xlogy", "eq", "lt"]


def _inputs(n, seed, low=-6.0, high=6.0, special=True):
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, high, n)
    if special:
        x[:len(SPECIAL)] = SPECIAL
    return x


def _k(arr, dtype):
    return kiln.from_numpy(np.ascontiguousarray(arr)).to(getattr(kiln, dtype))


def _normal(*shape, seed=0):
    """Inputs for the composite cases, made with numpy: kiln's own randn differs by ulps between tables."""
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _bits(t):
    """A kiln tensor's values as a numpy array of the same width (bfloat16/float8 as integers)."""
    t = t.detach().contiguous()
    name = str(t.dtype).split(".")[-1]
    view = {"bfloat16": kiln.int16, "float16": kiln.int16, "float8_e4m3fn": kiln.uint8, "float8_e5m2": kiln.uint8}
    if name in view:
        return name, t.view(view[name]).numpy().copy()
    return name, t.numpy().copy()


def main(path):
    out = {}

    def put(key, t):
        if isinstance(t, (tuple, list)):
            for i, v in enumerate(t):
                put(f"{key}#{i}", v)
            return
        name, arr = _bits(t)
        out[f"{key}|{name}"] = arr

    # 1003 elements: many full vectors of every width plus a tail; strided copies take the scalar
    # path. Special values (NaN, inf, signed zeros, extremes) go separately ("special" keys), so that
    # a bound relative to a result's largest value means something for the ordinary ones.
    base, spec = _inputs(1003, 0, special=False), np.resize(np.array(SPECIAL), 41)
    for dt in FLOATS:
        y = _k(_inputs(1003, 1, special=False), dt)
        for tag, x in (("", _k(base, dt)), ("special-", _k(spec, dt))):
            for name in UNARY:
                put(f"{tag}unary:{name}:{dt}", getattr(kiln, name)(x))
                put(f"{tag}unary-strided:{name}:{dt}", getattr(kiln, name)(x.repeat_interleave(2)[::2]))
            for name in ACT:
                put(f"{tag}act:{name}:{dt}", getattr(F, name)(x))
            put(f"{tag}act:gelu-tanh:{dt}", F.gelu(x, approximate="tanh"))
            yy = y[:x.numel()]
            for name in BINARY:
                put(f"{tag}binary:{name}:{dt}", getattr(kiln, name)(x, yy))
                put(f"{tag}binary-bcast:{name}:{dt}", getattr(kiln, name)(x, yy[:1]))
            put(f"{tag}binary:add-alpha:{dt}", kiln.add(x, yy, alpha=0.3))
            put(f"{tag}binary:lerp:{dt}", kiln.lerp(x, yy, 0.25))
            put(f"{tag}binary:addcmul:{dt}", kiln.addcmul(x, x, yy, value=0.5))
            put(f"{tag}binary:clamp:{dt}", kiln.clamp(x, -1.0, 2.0))
        x = _k(base, dt)

        r = _k(_inputs(4096 * 3 + 77, 2, -3, 3, special=False), dt)
        m = r[:4096 * 3].view(48, 256)
        for name in ("sum", "mean", "prod", "amax", "amin", "nansum", "logsumexp", "std", "var", "norm"):
            f = getattr(kiln, name)
            if name == "prod":
                put(f"reduce:{name}:{dt}", f(kiln.div(m, 2.9) + 1.0, 1))
            elif name == "logsumexp":
                put(f"reduce:{name}:{dt}", f(m, 1))
            else:
                put(f"reduce-all:{name}:{dt}", f(r))
                put(f"reduce-inner:{name}:{dt}", f(m, 1))
                put(f"reduce-outer:{name}:{dt}", f(m, 0))
        put(f"reduce:softmax:{dt}", kiln.softmax(m, 1))
        put(f"reduce:softmax0:{dt}", kiln.softmax(m, 0))
        put(f"reduce:log_softmax:{dt}", kiln.log_softmax(m, 1))
        put(f"reduce:cumsum:{dt}", kiln.cumsum(m, 1))
        sx = _k(np.concatenate([spec, base[:59]]), dt).view(4, 25)
        put(f"special-reduce:sum:{dt}", kiln.sum(sx, 1))
        put(f"special-reduce:amax:{dt}", kiln.amax(sx, 1))
        put(f"special-reduce:softmax:{dt}", kiln.softmax(sx, 1))

        # GEMM: float64 and the float32 vector products go to OpenBLAS; float16/bfloat16 and small float32
        # products to kiln's packed GEMM (OpenBLAS on the base table)
        a = _k(_inputs(67 * 45, 3, -1, 1, special=False), dt).view(67, 45)
        b = _k(_inputs(45 * 131, 4, -1, 1, special=False), dt).view(45, 131)
        put(f"gemm:mm:{dt}", kiln.mm(a, b))
        put(f"gemm:mm-t:{dt}", kiln.mm(b.t(), a.t()))
        put(f"gemm:mv:{dt}", kiln.mv(a, b[:, 0]))
        put(f"gemm:bmm:{dt}", kiln.bmm(a[:64].reshape(4, 16, 45), b.expand(4, 45, 131)))

    # conversions: rounding ties, subnormals, overflow, NaN payloads
    conv = np.concatenate([_inputs(600, 5, -70000, 70000), _inputs(600, 6, -3, 3),
                           np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 65520.0, 65519.0, 448.0, 464.0, 57344.0,
                                     6e-8, 3e-8, 1e-45, 2 ** -133, -(2 ** -134), 255.5, 256.0, -1.5, 4e9, -4e9])])
    x32 = _k(conv, "float32")
    for dt in ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8", "uint8", "int16", "int32", "int64",
               "bool", "float64"):
        put(f"convert:float32->{dt}", x32.to(getattr(kiln, dt)))
        put(f"convert-strided:float32->{dt}", _k(np.repeat(conv, 2), "float32")[::2].to(getattr(kiln, dt)))
    put("convert:float64->bfloat16", _k(conv, "float64").to(kiln.bfloat16))
    put("convert:float64->float16", _k(conv, "float64").to(kiln.float16))
    put("convert:bfloat16->float32", x32.to(kiln.bfloat16).to(kiln.float32))
    put("convert:float16->float32", x32.to(kiln.float16).to(kiln.float32))
    # every float16 code, and float32 NaNs with payloads, as integers (bits compared exactly: the F16C
    # paths must keep the scalar conversion's NaN bits)
    codes = kiln.from_numpy(np.arange(65536, dtype=np.uint16).view(np.int16).copy()).view(kiln.float16)
    put("convert-bits:float16 codes->float32", codes.to(kiln.float32).view(kiln.int32))
    nans = np.array([0x7F800001, 0x7FC00001, 0xFFC01234, 0x7FFFFFFF, 0xFF800001, 0x7FA00000, 0x7FC00000,
                     0x3F800000] * 3, dtype=np.uint32).view(np.int32)
    put("convert-bits:float32 NaN payloads->float16", kiln.from_numpy(nans.copy()).view(kiln.float32)
        .to(kiln.float16).view(kiln.int16))
    put("convert-bits:float32 NaN payloads->bfloat16", kiln.from_numpy(nans.copy()).view(kiln.float32)
        .to(kiln.bfloat16).view(kiln.int16))

    # random numbers: the counter-based generator must give the same stream on every table
    kiln.manual_seed(1234)
    put("random:randn", kiln.randn(1003))
    put("random:rand", kiln.rand(1003))
    put("random:randint", kiln.randint(0, 1000, (1003,)))
    put("random:bernoulli", kiln.bernoulli(kiln.full((1003,), 0.3)))
    put("random:dropout", F.dropout(kiln.ones(1003), 0.5, training=True))

    # nn kernels that hold their own vector code
    kiln.manual_seed(7)
    seq = _normal(9, 3, 20, seed=10)
    put("nn:layer_norm", F.layer_norm(seq, (20,)))
    put("nn:lstm", kiln.nn.LSTM(20, 24, num_layers=2)(seq)[0])
    # hidden a multiple of 16: the fused step (8-unit tiles on avx2, 16-unit ones on avx512), batch 9
    # (row tiles 3 + 3 + 3, and 6 + 2 + 1)
    put("nn:lstm-fused", kiln.nn.LSTM(20, 32, num_layers=2)(_normal(5, 9, 20, seed=15))[0])
    # one step (the input projection inside the step) from a given state
    lf = kiln.nn.LSTM(80, 96)
    put("nn:lstm-fused-one-step", lf(_normal(1, 7, 80, seed=17), (_normal(1, 7, 96, seed=18), _normal(1, 7, 96, seed=19)))[0])
    put("nn:lstm-fused-given-state", lf(_normal(3, 7, 80, seed=20), (_normal(1, 7, 96, seed=21), _normal(1, 7, 96, seed=22)))[0])
    put("nn:gru", kiln.nn.GRU(20, 24)(seq)[0])
    q, k_, v = _normal(2, 4, 33, 16, seed=11), _normal(2, 4, 47, 16, seed=12), _normal(2, 4, 47, 16, seed=13)
    put("nn:sdpa", F.scaled_dot_product_attention(q, k_, v))
    put("nn:sdpa-causal", F.scaled_dot_product_attention(q, k_[:, :, :33], v[:, :, :33], is_causal=True))
    logits, target = _normal(37, 11, seed=14), kiln.randint(0, 11, (37,))
    put("nn:cross_entropy", F.cross_entropy(logits, target, reduction="none"))
    put("nn:conv2d", F.conv2d(_normal(2, 3, 11, 13, seed=15), _normal(5, 3, 3, 3, seed=16), padding=1))

    # autograd through fused backward kernels, and one fused optimiser step per algorithm
    for tag, vals in (("", np.random.default_rng(8).uniform(-6, 6, 1003)), ("special-", spec)):
        for approx in ("none", "tanh"):
            x = _k(vals, "float32").requires_grad_(True)
            F.gelu(x, approximate=approx).sum().backward()
            put(f"{tag}grad:gelu-{approx}", x.grad)
    h = _normal(5, 3, 20, seed=17).requires_grad_(True)
    F.layer_norm(h, (20,)).pow(2).sum().backward()
    put("grad:layer_norm", h.grad)
    for name, kw in (("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {"lr": 0.01}), ("AdamW", {"lr": 0.01}),
                     ("RMSprop", {"lr": 0.01}), ("Adagrad", {"lr": 0.1})):
        kiln.manual_seed(3)
        p = _normal(1001, seed=18).requires_grad_(True)
        opt = getattr(kiln.optim, name)([p], **kw)
        for step in range(3):
            p.grad = _normal(1001, seed=19 + step)
            opt.step()
        put(f"optim:{name}", p.detach())

    np.savez(path, isa=np.array(kiln.cpu_isa()), **out)


if __name__ == "__main__":
    main(sys.argv[1])
