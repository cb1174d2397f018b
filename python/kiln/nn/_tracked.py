"""The dicts of a module's parameters, buffers, submodules and hooks, and the state epoch their
changes move (kiln.compile looks at a module's state again only when it moved)."""
from collections import OrderedDict

_state_epoch = [0]


def _module_state_epoch():
    """A count that moves whenever any module's parameters, buffers, submodules, hooks or training
    flag change (kiln.compile looks at a module's state again only when it moved)."""
    return _state_epoch[0]


class _TrackedDict(OrderedDict):
    """The OrderedDict of a module's parameters, buffers, submodules or hooks: every change moves
    the state epoch."""

    def __setitem__(self, key, value):
        _state_epoch[0] += 1
        super().__setitem__(key, value)

    def __delitem__(self, key):
        _state_epoch[0] += 1
        super().__delitem__(key)

    def pop(self, *args):
        _state_epoch[0] += 1
        return super().pop(*args)

    def popitem(self, last=True):
        _state_epoch[0] += 1
        return super().popitem(last)

    def clear(self):
        _state_epoch[0] += 1
        super().clear()

    def update(self, *args, **kwargs):
        _state_epoch[0] += 1
        super().update(*args, **kwargs)

    def setdefault(self, key, default=None):
        _state_epoch[0] += 1
        return super().setdefault(key, default)

    def move_to_end(self, key, last=True):
        _state_epoch[0] += 1
        super().move_to_end(key, last)
