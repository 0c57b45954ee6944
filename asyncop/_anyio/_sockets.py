"""Sockets: anyio's TCP, UDP and Unix streams and listeners, and name lookups, on asyncop.net."""

from __future__ import annotations

from typing import Any

from ._options import missing

__all__ = ["SocketMethods"]


class SocketMethods:
    """The backend's calls about sockets; mixed into ``AsyncopBackend``."""

    @classmethod
    async def connect_tcp(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("connect_tcp")

    @classmethod
    async def connect_unix(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("connect_unix")

    @classmethod
    def create_tcp_listener(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("create_tcp_listener")

    @classmethod
    def create_unix_listener(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("create_unix_listener")

    @classmethod
    async def create_udp_socket(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("create_udp_socket")

    @classmethod
    async def create_unix_datagram_socket(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("create_unix_datagram_socket")

    @classmethod
    async def getaddrinfo(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("getaddrinfo")

    @classmethod
    async def getnameinfo(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("getnameinfo")

    @classmethod
    async def wait_readable(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("wait_readable")

    @classmethod
    async def wait_writable(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("wait_writable")

    @classmethod
    def notify_closing(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("notify_closing")

    @classmethod
    async def wrap_listener_socket(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("wrap_listener_socket")

    @classmethod
    async def wrap_stream_socket(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("wrap_stream_socket")

    @classmethod
    async def wrap_unix_stream_socket(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("wrap_unix_stream_socket")

    @classmethod
    async def wrap_udp_socket(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("wrap_udp_socket")

    @classmethod
    async def wrap_connected_udp_socket(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("wrap_connected_udp_socket")

    @classmethod
    async def wrap_unix_datagram_socket(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("wrap_unix_datagram_socket")

    @classmethod
    async def wrap_connected_unix_datagram_socket(cls, *args: Any, **kwargs: Any) -> Any:
        raise missing("wrap_connected_unix_datagram_socket")
