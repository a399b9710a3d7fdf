"""Tabular Q-learning for GC relocation (Shiro, shared/papers/shiro.txt §III-C): numpy and Numba only.

:mod:`dogi_ml.rl.qlearning` holds Shiro's paper agent (a Q-table and its delayed-reward
bookkeeping, as a NamedTuple of arrays that Numba kernels take; reward: the mean invalid share of
the next 200 victims) and its state encoder (Table I); :mod:`dogi_ml.rl.credit` an agent on the
same states whose every decision is credited with its own block's outcome (copied again, or dead
before its segment's reclaim); :mod:`dogi_ml.rl.export` the integer (firmware) form of either
table. The C header is emitted by :mod:`dogi_ml.export.qtable`, above this layer.

Using the credit agent from a placement policy (any state encoding, any number of actions; the
agent is a field of the policy's Numba state)::

    from dogi_ml.rl import credit
    agent = credit.new_credit_agent(capacity, gamma=0.5, epsilon=0.01, seed=1,
                                    initial=None)  # default: Table I's hierarchical rule, 90,000 x 5
    # place_gc (one valid block of the victim):
    a = credit.choose_action(agent, state); credit.on_relocate(agent, lba, state, a, now)
    # place_user (before the engine appends; s.l2p[lba] is still its old copy):
    credit.on_invalidate(agent, lba, segment_of(s, s.l2p[lba]), now)
    # on_reclaim (only needed with dead_cost > 0 or share):
    credit.on_reclaim(agent, victim, now)
    # hindsight credit instead: new_credit_agent(..., hindsight_edges=(1, 4, 16, 64)) and keep
    # agent.scalars[0].unit current (the edges' scale, e.g. Shiro's T); no on_reclaim needed
    # frozen: new_credit_agent(..., learn=False, epsilon=0.0, initial=table), or greedy lookup of
    # dogi_ml.rl.export.quantize_table(table).table with credit.greedy_action
"""
