"""kiln's distribution families: torch's classes and signatures over the C++ ones of
kiln/distributions (decision 40). The Python layer turns numbers into tensors (torch's broadcast_all),
keeps torch's class attributes (arg_constraints, support, has_rsample) and delegates every
computation to the C++ object `_c`."""
from numbers import Number

import kiln
from kiln import _C

from . import constraints
from .distribution import Distribution, ExponentialFamily
from .utils import broadcast_all

__all__ = ["Bernoulli", "Beta", "Categorical", "Dirichlet", "Exponential", "Gamma", "LogNormal",
           "Multinomial", "MultivariateNormal", "Normal", "Poisson", "Uniform"]

_D = _C._distributions


def _size(v):
    return kiln.Size(() if v is None else v)


class _Native(Distribution):
    """A family computed in C++: shapes, validation, every method through `_c`."""

    def _wrap(self, c):
        self._c = c
        self._batch_shape = kiln.Size(c.batch_shape)
        self._event_shape = kiln.Size(c.event_shape)
        self._validate_args = c.validate_args

    def __getattr__(self, name):  # the parameters and derived tensors, by torch's attribute names
        if name.startswith("__") or name == "_c":
            raise AttributeError(name)
        c = self.__dict__.get("_c")
        if c is not None:
            t = c.attribute(name)
            if t is not None:
                return t
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _value(self, value):
        if not isinstance(value, kiln.Tensor):
            if self._validate_args:
                raise ValueError("The value argument to log_prob must be a Tensor")
            value = kiln.tensor(value, dtype=self._dtype())
        return value

    def _dtype(self):
        for name in ("loc", "probs", "rate", "concentration", "low"):
            t = self._c.attribute(name)
            if t is not None:
                return t.dtype if t.is_floating_point() else kiln.get_default_dtype()
        return kiln.get_default_dtype()

    @property
    def mean(self):
        return self._c.mean()

    @property
    def mode(self):
        return self._c.mode()

    @property
    def variance(self):
        return self._c.variance()

    @property
    def stddev(self):
        return self._c.stddev()

    def sample(self, sample_shape=kiln.Size()):
        return self._c.sample(_size(sample_shape))

    def rsample(self, sample_shape=kiln.Size()):
        return self._c.rsample(_size(sample_shape))

    def log_prob(self, value):
        return self._c.log_prob(self._value(value))

    def cdf(self, value):
        return self._c.cdf(self._value(value))

    def icdf(self, value):
        return self._c.icdf(self._value(value))

    def entropy(self):
        return self._c.entropy()

    def perplexity(self):
        return self._c.perplexity()

    def enumerate_support(self, expand=True):
        return self._c.enumerate_support(expand)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        extra = {k: v for k, v in self.__dict__.items() if k not in ("_c", "_batch_shape", "_event_shape")}
        new.__dict__.update(extra)
        new._wrap(self._c.expand(list(kiln.Size(batch_shape))))
        new._validate_args = self._validate_args
        return new

    def __repr__(self):
        return repr(self._c)


class Normal(_Native, ExponentialFamily):
    """Normal(loc, scale): the Gaussian with mean loc and standard deviation scale."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, loc, scale, validate_args=None):
        loc, scale = broadcast_all(loc, scale)
        self._wrap(_D.Normal(loc, scale, validate_args))


class LogNormal(_Native):
    """LogNormal(loc, scale): exp(X) for X ~ Normal(loc, scale)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        loc, scale = broadcast_all(loc, scale)
        self._wrap(_D.LogNormal(loc, scale, validate_args))
        self.base_dist = Normal(loc, scale, validate_args=False)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new.base_dist = self.base_dist.expand(batch_shape)
        return new


class Uniform(_Native):
    """Uniform(low, high): uniform on the half-open interval [low, high)."""

    has_rsample = True

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def arg_constraints(self):
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    def __init__(self, low, high, validate_args=None):
        low, high = broadcast_all(low, high)
        self._wrap(_D.Uniform(low, high, validate_args))


def _probs_or_logits(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


class Bernoulli(_Native, ExponentialFamily):
    """Bernoulli(probs=None, logits=None): 1 with probability probs (or sigmoid(logits))."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        _probs_or_logits(probs, logits)
        if probs is not None:
            (probs,) = broadcast_all(probs)
        else:
            (logits,) = broadcast_all(logits)
        self._wrap(_D.Bernoulli(probs, logits, validate_args))

    @property
    def param_shape(self):
        return self._c.attribute("probs").size()


class Categorical(_Native):
    """Categorical(probs=None, logits=None): an index into the last dim of probs (or softmax(logits))."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _probs_or_logits(probs, logits)
        self._wrap(_D.Categorical(probs, logits, validate_args))
        self._num_events = (probs if probs is not None else logits).size()[-1]

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self):
        return self._c.attribute("probs").size()


class Multinomial(_Native):
    """Multinomial(total_count=1, probs=None, logits=None): counts of total_count categorical draws."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        _probs_or_logits(probs, logits)
        self.total_count = total_count
        self._wrap(_D.Multinomial(total_count, probs, logits, validate_args))
        self._categorical = Categorical(probs, logits, validate_args=False)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def param_shape(self):
        return self._c.attribute("probs").size()

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new._categorical = self._categorical.expand(batch_shape)
        return new


class Exponential(_Native, ExponentialFamily):
    """Exponential(rate): the waiting time of a Poisson process of the given rate."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate, validate_args=None):
        (rate,) = broadcast_all(rate)
        self._wrap(_D.Exponential(rate, validate_args))


class Gamma(_Native, ExponentialFamily):
    """Gamma(concentration, rate): shape concentration, inverse scale rate."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        concentration, rate = broadcast_all(concentration, rate)
        self._wrap(_D.Gamma(concentration, rate, validate_args))


class Dirichlet(_Native, ExponentialFamily):
    """Dirichlet(concentration): a distribution over the simplex of concentration's last dim."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        self._wrap(_D.Dirichlet(concentration, validate_args))


class Beta(_Native, ExponentialFamily):
    """Beta(concentration1, concentration0): on the unit interval."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        concentration1, concentration0 = broadcast_all(concentration1, concentration0)
        self._wrap(_D.Beta(concentration1, concentration0, validate_args))


class Poisson(_Native, ExponentialFamily):
    """Poisson(rate): event counts at the given rate."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (rate,) = broadcast_all(rate)
        self._wrap(_D.Poisson(rate, validate_args))


class MultivariateNormal(_Native):
    """MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None, scale_tril=None)."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        self._wrap(_D.MultivariateNormal(loc, covariance_matrix, precision_matrix, scale_tril, validate_args))

    @property
    def _unbroadcasted_scale_tril(self):
        return self._c.attribute("_unbroadcasted_scale_tril")
