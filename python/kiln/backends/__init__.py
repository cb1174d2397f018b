"""kiln.backends: torch.backends' flags and queries that exist on a CPU build. Flags of backends kiln
does not have (cuDNN, MKL-DNN, CUDA matmul) are accepted and stored, so code that sets them runs; they
change nothing."""
import types as _types

from .. import _C

_ISA = {"avx512": "AVX512", "avx2": "AVX2", "base": "DEFAULT"}


def _module(name, **attrs):
    m = _types.ModuleType(f"kiln.backends.{name}")
    m.__dict__.update(attrs)
    return m


cpu = _module("cpu", get_cpu_capability=lambda: _ISA.get(_C.cpu_isa(), "DEFAULT"))
openmp = _module("openmp", is_available=lambda: True)
mkl = _module("mkl", is_available=lambda: False)
mkldnn = _module("mkldnn", is_available=lambda: False, enabled=False, deterministic=False, allow_tf32=False)
cudnn = _module("cudnn", is_available=lambda: False, version=lambda: None, enabled=True, benchmark=False,
                deterministic=False, allow_tf32=True, benchmark_limit=10)
mps = _module("mps", is_available=lambda: False, is_built=lambda: False)
opt_einsum = _module("opt_einsum", is_available=lambda: False, get_opt_einsum=lambda: None, enabled=False,
                     strategy=None)


class _Matmul:
    allow_tf32 = False
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


cuda = _module("cuda", is_built=lambda: False, matmul=_Matmul())
