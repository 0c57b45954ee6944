"""The runtime's core: what runs, when, and on which thread.

Every module here is compiled by an install with a C compiler (the list in
``pyproject.toml``, checked by ``tests/test_layers.py``), and runs as it is
otherwise. The package has no face of its own: ``asyncop.runtime`` imports
the modules, and publishes what users may use.

- ``_kernel.py``: the state every part shares (the lock, the ready queues,
  the timer heap, the workers, the roots) and the calls the modules below
  it use; ``_spawn.py``: making an operation, linking it and queueing it;
- ``_pool.py``: starting, waking and counting the workers; ``_worker.py``:
  a worker's loop and how it parks; ``_items.py``: what a worker runs
  between two looks at its queues; ``_monitor.py``: the thread that watches
  the workers; ``_usage.py``: how a worker charges each step to its operation
  (``op.stats``); ``_instruments.py``: telling the instruments of each
  event;
- ``_task.py``: stepping a coroutine task; ``_waker.py``: its waker and the
  event protocol; ``_awaitables.py``: ``sleep``, ``checkpoint``, ``await op``;
- ``_timers.py``: the timer heap; ``_timer_calls.py``: the kernel's calls
  that arm and cancel a timer; ``_clock.py``: the real and virtual
  clocks; ``_reactor.py`` and ``_io_wait.py``: socket readiness;
- ``_scope.py``: scopes and their rules; ``_block.py``: the ``async with``
  entry and what a task can ask of its tree; ``_scope_task.py``: the exit's
  wait for the children; ``_abandon.py``: blocks nobody will leave;
- ``_blocking.py``: ``spawn_blocking``, calls run on threads of their own.
"""
