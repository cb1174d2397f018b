"""kiln.distributions benchmarks for `make bench` (issue 16): the same work through kiln.distributions
and torch.distributions on the same parameters. Time only: log_prob and entropy of a batched Normal,
reparameterised Gamma draws (rejection sampling plus the implicit derivative in backward), Dirichlet
draws, Categorical draws, and a batched MultivariateNormal log_prob."""
import numpy as np
import torch

import kiln


def _pair(*arrays):
    return [kiln.from_numpy(a.copy()) for a in arrays], [torch.from_numpy(a.copy()) for a in arrays]


def distributions_cases(Case, quick):
    rng = np.random.default_rng(0)
    n = 1 << 16 if quick else 1 << 20
    loc, scale, x = (rng.standard_normal(n).astype(np.float32), rng.uniform(0.5, 2, n).astype(np.float32),
                     rng.standard_normal(n).astype(np.float32))
    conc = rng.uniform(0.2, 5, 1 << 16).astype(np.float32)
    probs = rng.uniform(0, 1, (256, 1000)).astype(np.float32)
    A = rng.standard_normal((64, 16, 16))
    cov = (A @ A.transpose(0, 2, 1) + 16 * np.eye(16)).astype(np.float32)
    mv = rng.standard_normal((64, 16)).astype(np.float32)

    def normal_log_prob():
        (kl, ks, kx), (tl, ts, tx) = _pair(loc, scale, x)
        kd, td = kiln.distributions.Normal(kl, ks), torch.distributions.Normal(tl, ts)
        return (lambda: kd.log_prob(kx)), (lambda: td.log_prob(tx))

    def gamma_rsample_backward():
        (kc,), (tc,) = _pair(conc)
        kc.requires_grad_(True)
        tc.requires_grad_(True)

        def k():
            kiln.distributions.Gamma(kc, 1.0).rsample().sum().backward()

        def t():
            torch.distributions.Gamma(tc, 1.0).rsample().sum().backward()
        return k, t

    def dirichlet_sample():
        (kc,), (tc,) = _pair(conc.reshape(-1, 16))
        kd, td = kiln.distributions.Dirichlet(kc), torch.distributions.Dirichlet(tc)
        return (lambda: kd.sample()), (lambda: td.sample())

    def categorical_sample():
        (kp,), (tp,) = _pair(probs)
        kd, td = kiln.distributions.Categorical(kp), torch.distributions.Categorical(tp)
        return (lambda: kd.sample((64,))), (lambda: td.sample((64,)))

    def mvn_log_prob():
        (kc, kv), (tc, tv) = _pair(cov, mv)
        kd = kiln.distributions.MultivariateNormal(kiln.zeros(16), covariance_matrix=kc)
        td = torch.distributions.MultivariateNormal(torch.zeros(16), covariance_matrix=tc)
        return (lambda: kd.log_prob(kv)), (lambda: td.log_prob(tv))

    label = "64K" if quick else "1M"
    return [Case(f"Normal.log_prob f32 {label}", normal_log_prob),
            Case("Gamma.rsample+backward f32 64K", gamma_rsample_backward),
            Case("Dirichlet.sample f32 4096x16", dirichlet_sample),
            Case("Categorical.sample 256x1000 x64", categorical_sample),
            Case("MultivariateNormal.log_prob 64x16", mvn_log_prob)]
