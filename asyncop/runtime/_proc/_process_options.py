"""The ``Popen`` arguments about what a child inherits and who it runs as.

``open_process`` and ``run_process`` pass ``pass_fds``, ``user``,
``group``, ``extra_groups`` and ``umask`` on to ``subprocess.Popen``. They
are checked here, before anything starts, so that a misuse raises with a
message that names the argument and says what to pass (``Popen`` raises
``KeyError('getpwnam(): name not found')`` for an unknown user, or only
from the child, after the fork). User and group names are looked up here
once and handed to ``Popen`` as ids. Only the arguments that differ from
``Popen``'s defaults are returned, so that an unused one never reaches a
platform that lacks it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

try:
    import grp
    import pwd
except ImportError:  # pragma: no cover - not on Windows
    grp = pwd = None  # type: ignore[assignment]

__all__ = ["popen_extras"]

# The widest umask: permission bits only.
_UMASK_MAX = 0o777


def popen_extras(
    what: str,
    pass_fds: object,
    user: object,
    group: object,
    extra_groups: object,
    umask: object,
) -> dict[str, Any]:
    """The checked ``Popen`` keyword arguments among these, those not left at their default.

    Raises:
        TypeError: an argument of the wrong type.
        ValueError: a negative descriptor or id, an unknown user or group
            name, a umask past 0o777.
    """
    extras: dict[str, Any] = {}
    fds = _descriptors(what, pass_fds)
    if fds:
        extras["pass_fds"] = tuple(fds)
    if user is not None:
        extras["user"] = _user_id(what, user)
    if group is not None:
        extras["group"] = _group_id(what, "group", group)
    if extra_groups is not None:
        if isinstance(extra_groups, str | bytes) or not isinstance(extra_groups, Iterable):
            raise TypeError(
                f"{what} needs extra_groups as a list of group names or ids, got "
                f"{type(extra_groups).__name__}; pass e.g. extra_groups=['audio', 44]"
            )
        extras["extra_groups"] = [_group_id(what, "extra_groups", g) for g in extra_groups]
    if umask is not None:
        if isinstance(umask, bool) or not isinstance(umask, int):
            raise TypeError(
                f"{what} needs umask as an int or None, got {type(umask).__name__}; "
                "pass e.g. umask=0o077"
            )
        if not 0 <= umask <= _UMASK_MAX:
            raise ValueError(
                f"{what} got umask={umask:#o}; pass permission bits from 0 to 0o777, "
                "or None to keep ours"
            )
        extras["umask"] = umask
    return extras


def _descriptors(what: str, value: object) -> list[int]:
    """``pass_fds`` as a list of descriptor numbers."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(
            f"{what} needs pass_fds as a sequence of descriptors, got "
            f"{type(value).__name__}; pass e.g. pass_fds=(file.fileno(),)"
        )
    checked = []
    for fd in value:
        if isinstance(fd, bool) or not isinstance(fd, int):
            raise TypeError(
                f"{what} needs each of pass_fds to be an int descriptor, got "
                f"{type(fd).__name__}; pass e.g. file.fileno()"
            )
        if fd < 0:
            raise ValueError(f"{what} got descriptor {fd} in pass_fds; pass open descriptors")
        checked.append(fd)
    return checked


def _user_id(what: str, user: object) -> int:
    """The uid ``user`` names (a name or an id)."""
    lookup: Callable[[str], int] | None = None
    if pwd is not None:
        lookup = functools.partial(_field, pwd.getpwnam, "pw_uid")
    return _named_id(what, "user", user, lookup, ("user", "uid"))


def _group_id(what: str, name: str, group: object) -> int:
    """The gid ``group`` names (a name or an id)."""
    lookup: Callable[[str], int] | None = None
    if grp is not None:
        lookup = functools.partial(_field, grp.getgrnam, "gr_gid")
    return _named_id(what, name, group, lookup, ("group", "gid"))


def _field(get: Callable[[str], object], field: str, name: str) -> int:
    """The id ``field`` of the database entry ``get(name)``."""
    value = getattr(get(name), field)
    assert isinstance(value, int)
    return value


def _named_id(
    what: str,
    name: str,
    value: object,
    lookup: Callable[[str], int] | None,
    kind: tuple[str, str],
) -> int:
    """The id ``value`` gives for argument ``name``: itself, or the id its name has."""
    thing, number = kind
    wanted = f"a {thing} name or a {number}"
    if isinstance(value, str):
        try:
            if lookup is None:  # pragma: no cover - no users and groups here (Windows)
                raise KeyError(value)
            return lookup(value)
        except KeyError:
            raise ValueError(
                f"{what} got {name} {value!r}, which names no {thing} here; pass {wanted}"
            ) from None
    return _id(what, name, value, wanted)


def _id(what: str, name: str, value: object, wanted: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{what} needs {name} as {wanted}, got {type(value).__name__}; pass a str or an int"
        )
    if value < 0:
        raise ValueError(f"{what} got {name} {value}; pass {wanted} (ids are 0 or more)")
    return value
