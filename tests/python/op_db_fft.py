"""op_db entries of kiln.fft (issue 16): one public function per FFT table op family, so the suite's
per-op tests (values, gradients against torch's, out=, meta against the kernels, schemas) run over
`_fft_c2c`, `_fft_r2c` and `_fft_c2r`. test_fft.py holds the full per-function conformance."""
from op_db import X, S, entry

FFT_TOL = {"float32": (1e-5, 1e-4), "complex64": (1e-5, 1e-4), "float64": (1e-10, 1e-10),
           "complex128": (1e-10, 1e-10)}
REAL = ("float32", "float64")
COMPLEX = ("complex64", "complex128")


def _fft(dtype, grad):
    x = X((3, 8), dtype, grad, 1)
    out = [S(x, desc="last"), S(x, n=12, desc="padded"), S(x, n=5, desc="trimmed"), S(x, dim=0, norm="ortho", desc="dim0"),
           S(x.t(), norm="forward", desc="strided")]
    return out  # no empty batch: torch's MKL plan raises for it (kiln returns the empty result)


def _rfft(dtype, grad):
    x = X((4, 9), dtype, grad, 3)
    return [S(x, desc="odd"), S(x, n=10, desc="padded-even"), S(x[:, ::2], dim=0, norm="ortho", desc="strided-dim0")]


def _irfft(dtype, grad):
    x = X((3, 5), dtype, grad, 4)
    return [S(x, desc="default-n"), S(x, n=9, desc="odd-n"), S(x, n=4, norm="forward", desc="trimmed"),
            S(x.t(), dim=0, desc="strided-dim0")]


def _fftn(dtype, grad):
    x = X((2, 3, 4), dtype, grad, 5)
    return [S(x, desc="all"), S(x, dim=(0, 2), desc="two"), S(x, s=(4, 6), norm="ortho", desc="s")]


def _irfftn(dtype, grad):
    x = X((3, 4, 3), dtype, grad, 6)
    return [S(x, desc="all"), S(x, s=(5, 6), desc="s"), S(x, dim=(0, 1), norm="forward", desc="dims")]


FFT_OPS = [
    entry("fft.fft", _fft, covers=("_fft_c2c", "_fft_r2c"), dtypes=REAL + COMPLEX, tol=FFT_TOL, method=False,
          supports_out=True),
    entry("fft.rfft", _rfft, covers=("_fft_r2c",), dtypes=REAL, tol=FFT_TOL, method=False),
    entry("fft.irfft", _irfft, covers=("_fft_c2r",), dtypes=REAL + COMPLEX, tol=FFT_TOL, method=False),
    entry("fft.fftn", _fftn, covers=("_fft_c2c",), dtypes=REAL + COMPLEX, tol=FFT_TOL, method=False),
    entry("fft.irfftn", _irfftn, covers=("_fft_c2r",), dtypes=COMPLEX, tol=FFT_TOL, method=False),
]
