"""kiln.fft: torch.fft's discrete Fourier transforms, frequencies and shifts. The functions are the
fft_* ops bound from their schemas (kiln/ops/fft.cpp, FFTW kernels). out= is taken as torch takes it,
with torch's extra rule for the transforms: the out tensor must be complex for a complex result and
real for a real one (a cast between the two is refused)."""
from . import _C

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]
_REAL_RESULT = {"irfft", "irfft2", "irfftn", "hfft", "hfft2", "hfftn"}
_TRANSFORMS = set(__all__) - {"fftfreq", "rfftfreq", "fftshift", "ifftshift"}


def _with_out_kind(name, op):
    want_complex = name not in _REAL_RESULT

    def fn(*args, out=None, **kwargs):
        if out is None:
            return op(*args, **kwargs)
        if isinstance(out, _C.Tensor) and out.is_complex() != want_complex:
            raise RuntimeError(f"{name} expects a {'complex' if want_complex else 'real'} output tensor, but got "
                               f"{out.dtype}")
        return op(*args, out=out, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = op.__doc__
    return fn


for _n in __all__:
    _op = getattr(_C, "fft_" + _n)
    globals()[_n] = _with_out_kind(_n, _op) if _n in _TRANSFORMS else _op
del _n, _op
