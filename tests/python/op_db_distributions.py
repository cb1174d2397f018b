"""op_db entries of the distribution samplers (issue 16: kiln/ops/random_dist.h), so the suite's
per-op tests (shapes and dtypes against torch, meta against the kernels, schemas) run over them.
The draws are checked for their distribution's properties here; test_distributions.py holds the
statistics, the gradients and the distributions themselves."""
import torch

from op_db import F32_64, S, T, entry


def _k2t(res):
    from helpers import to_torch
    return to_torch(res).double()


def _gamma_check(res, s):
    t = _k2t(res)
    assert bool((t > 0).all()), "a gamma draw is not positive"
    if t.numel() >= 2000:
        alpha = s.args[0].double()
        assert abs(t.mean().item() - alpha.mean().item()) < 0.1 * alpha.mean().item() + 0.05, t.mean().item()


def _poisson_check(res, s):
    t = _k2t(res)
    assert bool((t >= 0).all()) and bool((t == t.floor()).all()), "a Poisson draw is not a count"
    if t.numel() >= 2000:
        rate = s.args[0].double()
        assert abs(t.mean().item() - rate.mean().item()) < 0.1 * rate.mean().item() + 0.05, t.mean().item()


def _normal_check(res, s):
    t = _k2t(res)
    if t.numel() >= 2000:
        assert abs(t.mean().item() - 1.0) < 0.1 and abs(t.std().item() - 2.0) < 0.1, (t.mean().item(), t.std().item())


def _dirichlet_check(res, s):
    t = _k2t(res)
    assert bool((t > 0).all()) and torch.allclose(t.sum(-1), torch.ones(t.shape[:-1], dtype=torch.float64)), \
        "a Dirichlet draw is not on the simplex"


def _draws(name, gen, check, covers, **kw):
    return entry(name, gen, covers=covers, nondeterministic=True, check_values=check, supports_grad=False,
                 dtypes=F32_64, meta=False, meta_reason="random draws: the front ends read the parameters", **kw)


def _normal_tt(mean, std):
    return mean, std


DISTRIBUTION_OPS = [
    _draws("_standard_gamma", lambda dt, g: [S(T((4000,), dt, low=0.2, high=6), desc="large"),
                                            S(T((3, 4), dt, low=0.01, high=50), desc="2-d"),
                                            S(T((0,), dt, low=1, high=2), desc="empty")],
           _gamma_check, ("_gamma_draw",), method=False),
    _draws("poisson", lambda dt, g: [S(T((4000,), dt, low=0, high=30), desc="large"),
                                     S(T((2, 5), dt, low=0, high=1e4), desc="big-rates")],
           _poisson_check, ("_poisson_draw",), method=False),
    _draws("normal", lambda dt, g: [S(T((4000,), dt, low=1, high=1), T((1,), dt, low=2, high=2), desc="broadcast"),
                                    S(T((3, 1), dt), T((4,), dt, low=0, high=2), desc="2-d")],
           _normal_check, ("_normal_draw",), variant="Tensor_Tensor", method=False),
    _draws("_sample_dirichlet", lambda dt, g: [S(T((50, 4), dt, low=0.3, high=4), desc="rows")],
           _dirichlet_check, ("_gamma_draw",), method=False),
    # torch's derivative is an approximation (off by 1.9e-3 relative at alpha 8.4, x 0.91, where kiln
    # agrees with mpmath to 1e-13); kiln's is exact (test_distributions.py checks it against mpmath)
    entry("_standard_gamma_grad", lambda dt, g: [S(T((6, 7), dt, low=0.2, high=20, seed=1),
                                                   T((6, 7), dt, low=0.05, high=30, seed=2), desc="grid"),
                                                 S(T((3, 4), dt, low=0.5, high=3, seed=3),
                                                   T((3, 4), dt, low=0.5, high=3, seed=4), desc="small")],
          covers=("_gamma_grad",), dtypes=F32_64, supports_grad=False, method=False,
          tol={"float32": (3e-3, 1e-5), "float64": (3e-3, 1e-8)}),
]
