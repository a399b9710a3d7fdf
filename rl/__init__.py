"""Tabular Q-learning for GC relocation (Shiro, shared/papers/shiro.txt §III-C): numpy and Numba only.

:mod:`dogi_ml.rl.qlearning` holds the agent (a Q-table and its delayed-reward bookkeeping, as a
NamedTuple of arrays that Numba kernels take) and its state encoder (Table I);
:mod:`dogi_ml.rl.export` its integer (firmware) form. The C header is emitted by
:mod:`dogi_ml.export.qtable`, above this layer.
"""
