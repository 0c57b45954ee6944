"""The synchronization primitives, built on the core's wakers.

- ``_sync.py``: ``Event``, ``Lock`` and ``LockGuard``; ``_lock_cycles.py``:
  an acquire that would wait for itself through other holders;
- ``_semaphore.py``: ``Semaphore``; ``_condition.py``: ``Condition``;
  ``_limiter.py``: ``CapacityLimiter`` and the default limiter;
- ``_channel.py`` and ``_channel_ends.py``: ``Channel`` and its sending and
  receiving ends;
- ``_waiters.py``: the waiter protocol the primitives share;
  ``_statistics.py``: what each primitive's ``statistics()`` returns;
  ``_names.py``: where a primitive was made, for its repr and the dumps.

The package has no face of its own: ``asyncop.runtime`` publishes its names.
"""
