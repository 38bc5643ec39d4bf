"""Scoped intra-op thread settings: the user's global torch setting is restored."""

import contextlib

import torch

__all__ = ["torch_threads"]


@contextlib.contextmanager
def torch_threads(n_threads):
    if n_threads is None:
        yield
        return
    previous = torch.get_num_threads()
    if previous == n_threads:
        yield
        return
    torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
