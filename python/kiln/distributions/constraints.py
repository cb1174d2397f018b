"""torch.distributions.constraints: which values a parameter or a sample may take.

The built-in constraints wrap kiln's C++ ones (kiln/distributions/distributions.h), so a check is the
same code whether a distribution runs from C++ or from Python; `Constraint` is the base for
user-defined ones, as in torch.
"""
import kiln
from kiln import _C

_D = _C._distributions
_K = _D.kinds

__all__ = [
    "Constraint", "boolean", "dependent", "dependent_property", "greater_than", "greater_than_eq",
    "half_open_interval", "independent", "integer_interval", "interval", "is_dependent", "less_than",
    "lower_cholesky", "lower_triangular", "multinomial", "nonnegative", "nonnegative_integer", "one_hot",
    "positive", "positive_definite", "positive_integer", "positive_semidefinite", "real", "real_vector",
    "simplex", "square", "symmetric", "unit_interval",
]


class Constraint:
    """A region over which a variable is valid. `check(value)` returns a bool tensor over the batch
    (the value's shape less `event_dim` dims)."""

    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__[1:] + "()"


def _bound(v):
    if isinstance(v, kiln.Tensor):
        return v
    return kiln.tensor(v, dtype=kiln.float32 if isinstance(v, float) else None)


class _Native(Constraint):
    """A constraint computed by kiln's C++ (its check, event_dim and repr)."""

    def __init__(self, c):
        self._c = c

    @property
    def is_discrete(self):
        return self._c.is_discrete

    @property
    def event_dim(self):
        return self._c.event_dim

    def check(self, value):
        return self._c.check(value)

    def __repr__(self):
        return repr(self._c)


class _Real(_Native):
    def __init__(self):
        super().__init__(_D.constraint(_K["Real"]))


class _Boolean(_Native):
    def __init__(self):
        super().__init__(_D.constraint(_K["Boolean"]))


class _GreaterThan(_Native):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__(_D.constraint(_K["GreaterThan"], _bound(lower_bound)))


class _GreaterThanEq(_Native):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__(_D.constraint(_K["GreaterThanEq"], _bound(lower_bound)))


class _LessThan(_Native):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound
        super().__init__(_D.constraint(_K["LessThan"], None, _bound(upper_bound)))


class _Interval(_Native):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        super().__init__(_D.constraint(_K["Interval"], _bound(lower_bound), _bound(upper_bound)))


class _HalfOpenInterval(_Native):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        super().__init__(_D.constraint(_K["HalfOpenInterval"], _bound(lower_bound), _bound(upper_bound)))


class _IntegerInterval(_Native):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        super().__init__(_D.constraint(_K["IntegerInterval"], _bound(lower_bound), _bound(upper_bound)))


class _IntegerGreaterThan(_Native):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__(_D.constraint(_K["IntegerGreaterThan"], _bound(lower_bound)))


class _Simplex(_Native):
    def __init__(self):
        super().__init__(_D.constraint(_K["Simplex"]))


class _Multinomial(_Native):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound
        super().__init__(_D.constraint(_K["Multinomial"], None, _bound(upper_bound)))


class _PositiveDefinite(_Native):
    def __init__(self):
        super().__init__(_D.constraint(_K["PositiveDefinite"]))


class _LowerCholesky(_Native):
    def __init__(self):
        super().__init__(_D.constraint(_K["LowerCholesky"]))


class _IndependentConstraint(Constraint):
    """base_constraint over events of reinterpreted_batch_ndims more dims (C++ for a native base)."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        if not isinstance(base_constraint, Constraint):
            raise TypeError("base_constraint must be a Constraint")
        if not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise ValueError("reinterpreted_batch_ndims must be a non-negative int")
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self._c = (_D.independent(base_constraint._c, reinterpreted_batch_ndims)
                   if isinstance(base_constraint, _Native) else None)

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        if self._c is not None:
            return self._c.check(value)
        result = self.base_constraint.check(value)
        if result.dim() < self.reinterpreted_batch_ndims:
            expected = self.base_constraint.event_dim + self.reinterpreted_batch_ndims
            raise ValueError(f"Expected value.dim() >= {expected} but got {value.dim()}")
        for _ in range(self.reinterpreted_batch_ndims):
            result = result.all(-1)
        return result

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Dependent(Constraint):
    """A placeholder for a constraint that depends on other variables (torch's)."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim
        super().__init__()

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        if is_discrete is NotImplemented:
            is_discrete = self._is_discrete
        if event_dim is NotImplemented:
            event_dim = self._event_dim
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    """Whether the constraint is a placeholder for a value-dependent one."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property whose class-level value is a dependent constraint (torch's dependent_property)."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


# ---- small matrix constraints (checks written with kiln ops)
class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return kiln.full(size=tuple(value.shape[:-2]), fill_value=(value.shape[-2] == value.shape[-1]),
                         dtype=kiln.bool, device=value.device)


class _Symmetric(_Square):
    def check(self, value):
        square_check = super().check(value)
        if not square_check.all():
            return square_check
        return kiln.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        value_tril = value.tril()
        return (value_tril == value).view(tuple(value.shape[:-2]) + (-1,)).min(-1)[0]


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        sym_check = super().check(value)
        if not sym_check.all():
            return sym_check
        return kiln.linalg.eigvalsh(value).ge(0).all(-1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        is_boolean = (value == 0) | (value == 1)
        is_normalized = value.sum(-1).eq(1)
        return is_boolean.all(-1) & is_normalized


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
positive_semidefinite = _PositiveSemidefinite()
square = _Square()
symmetric = _Symmetric()
