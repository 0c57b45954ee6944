"""Streams and the network, built on the runtime's public face.

These modules use the core and the primitives as a user would, through the
public names of ``asyncop.runtime`` (``tests/test_layers.py`` checks it),
and load on the first use of one of their names, so that ``import asyncop``
does not load ssl.

- ``_stream_api.py``: the stream interfaces and their errors;
  ``_streams.py``: ``SocketStream`` and ``DescriptorStream``;
  ``_receive_buffer.py``: the receive methods every stream shares, over a
  buffer; ``_memory_streams.py``: a connected pair of
  streams in memory, for tests;
- ``_tcp.py``: ``open_tcp_stream`` and the listeners; ``_udp.py``: UDP
  sockets; ``_unix.py``: Unix sockets; ``_socket_file.py``: the socket
  files a Unix listener leaves to remove;
- ``_tls.py``: ``TLSStream``; ``_tls_checks.py``: its argument checks;
- ``_dns.py``: ``getaddrinfo`` on a thread; ``_serve.py``: the servers.
"""
