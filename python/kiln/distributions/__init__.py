"""kiln.distributions: torch.distributions over kiln's C++ families (kiln/distributions).

Normal, LogNormal, Uniform, Bernoulli, Categorical, Multinomial, Exponential, Gamma, Beta, Dirichlet,
Poisson and MultivariateNormal with torch's signatures: sample / rsample, log_prob, entropy, mean /
mode / variance / stddev, cdf / icdf where torch has them, enumerate_support, expand, argument and
value validation (constraints), and kl_divergence for torch's pairs; register_kl for a user's own.
"""
from . import constraints, kl, utils
from .distribution import Distribution, ExponentialFamily
from .families import (Bernoulli, Beta, Categorical, Dirichlet, Exponential, Gamma, LogNormal, Multinomial,
                       MultivariateNormal, Normal, Poisson, Uniform)
from .kl import kl_divergence, register_kl

kl._register_native({c.__name__: c for c in (Bernoulli, Beta, Categorical, Dirichlet, Exponential, Gamma, LogNormal,
                                              Multinomial, MultivariateNormal, Normal, Poisson, Uniform)})

__all__ = ["Bernoulli", "Beta", "Categorical", "Dirichlet", "Distribution", "Exponential", "ExponentialFamily",
           "Gamma", "LogNormal", "Multinomial", "MultivariateNormal", "Normal", "Poisson", "Uniform", "constraints",
           "kl_divergence", "register_kl"]
