"""Both libraries at one thread for the length of a block (the sections that time threads or streams
of their own)."""
import contextlib

import torch

import kiln


@contextlib.contextmanager
def one_thread():
    kt, tt = kiln.get_num_threads(), torch.get_num_threads()
    kiln.set_num_threads(1)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        kiln.set_num_threads(kt)
        torch.set_num_threads(tt)
