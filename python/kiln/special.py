"""kiln.special: torch.special's functions. Those that are ops of their own are bound from their
schemas (kiln/ops/special.cpp; computed in double, kernels in kiln/backend/cpu/special.cpp); the rest
are kiln's elementwise ops and reductions under torch.special's names."""
from . import _C

_OWN = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
        "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
        "spherical_bessel_j0", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "erfcx", "entr", "xlog1py", "zeta",
        "multigammaln", "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
        "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
        "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
        "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
for _n in _OWN:
    globals()[_n] = getattr(_C, "special_" + _n)
del _n

i0 = _C.i0
sinc = _C.sinc
gammainc = _C.igamma
gammaincc = _C.igammac
# kiln's elementwise ops and reductions under torch.special's names
digamma = psi = _C.digamma
gammaln = _C.lgamma
polygamma = _C.polygamma
erf, erfc, erfinv = _C.erf, _C.erfc, _C.erfinv
expit = _C.sigmoid
exp2, expm1, log1p = _C.exp2, _C.expm1, _C.log1p
logit = _C.logit
xlogy = _C.xlogy



def round(input, *, decimals=0, out=None):
    """torch.special.round: floating tensors only (torch has no integer kernel for it)."""
    if isinstance(input, _C.Tensor) and not (input.is_floating_point() or input.is_complex()):
        raise NotImplementedError(f"\"round_vml_cpu\" not implemented for '{input.dtype}'")
    return _C.round(input, decimals=decimals, out=out) if out is not None else _C.round(input, decimals=decimals)


logsumexp = _C.logsumexp
softmax = _C.softmax
log_softmax = _C.log_softmax


def _polygamma_method(self, n):
    return _C.polygamma(n, self)


def _polygamma_inplace(self, n):
    return self.copy_(_C.polygamma(n, self))


_C.Tensor.polygamma = _polygamma_method
_C.Tensor.polygamma_ = _polygamma_inplace

__all__ = _OWN + ["i0", "sinc", "gammainc", "gammaincc", "digamma", "psi", "gammaln", "polygamma", "erf", "erfc",
                  "erfinv", "expit", "exp2", "expm1", "log1p", "logit", "xlogy", "round", "logsumexp", "softmax",
                  "log_softmax"]
