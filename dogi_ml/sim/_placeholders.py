"""Stand-ins that make ``_loop_template`` importable on its own (for linting and reading)."""

import numba as nb


@nb.njit(cache=True)
def place_user(s, p, lba, now):
    return 0


@nb.njit(cache=True)
def place_gc(s, p, lba, victim, now):
    return 0


@nb.njit(cache=True)
def on_reclaim(s, p, victim, now):
    return None


@nb.njit(cache=True)
def on_chunk_due(s, p, group, due_us):
    return None


@nb.njit(cache=True)
def prefetch_lba(p, lba):
    return None


@nb.njit(cache=True)
def select_victim(s, p, now):
    return -1
