"""Processes and signals, built on the runtime's public face.

These modules use the core and the primitives as a user would, through the
public names of ``asyncop.runtime`` (``tests/test_layers.py`` checks it),
and load on the first use of one of their names, so that ``import asyncop``
does not load subprocess.

- ``_process.py``: ``Process``; ``_process_start.py``: ``open_process`` and
  ``run_process``; ``_process_options.py``: the ``Popen`` arguments about
  what a child inherits and who it runs as; ``_pipes.py``: ``PipeStream``, a process's pipes;
- ``_signals.py``: ``open_signal_receiver``.
"""
