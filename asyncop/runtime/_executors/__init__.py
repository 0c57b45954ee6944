"""Executors: running a call in another process or on another machine.

- ``_remote.py``: ``RemoteExecutor``, the protocol of an executor, and
  ``RemoteJob``, one call handed to it;
- ``_remote_call.py``: what crosses to the other side and back (the
  pickled call, its outcome, its cancellation token);
- ``_executors.py``: ``ProcessExecutor``, a pool of worker processes.

They sit beside the core rather than on the runtime's face: the face
imports them as it loads, since ``Runtime.spawn`` takes an ``executor``.
``tests/test_layers.py`` lists each name they take from the rest of the
runtime.
"""
