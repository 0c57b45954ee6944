"""Compile asyncop's core modules with Cython when the wheel is built.

The modules listed under ``[tool.hatch.build.targets.wheel.hooks.custom]``
in ``pyproject.toml`` (``modules``) are plain ``.py`` files written in
Cython's pure-Python mode: the same file runs as it is, or compiles to an
extension module. A ``.pxd`` file beside a module gives the compiled form
its C types (extension types with typed fields, C functions, typed locals)
without changing the ``.py``; it may cimport another core module's types,
so the modules compile together, and a ``.pxd`` edit recompiles the
modules that cimport it. This hook compiles them when it can, and
otherwise leaves the wheel pure:

- ``ASYNCOP_NO_EXTENSIONS=1`` in the build's environment, or no working C
  compiler: nothing is compiled and the wheel is pure Python.
- A free-threaded interpreter: only the modules listed under
  ``freethreading-compatible`` are compiled, each declaring itself
  compatible; the others stay pure, so that importing asyncop never turns
  the GIL back on.
- The modules listed under ``heap-types`` define extension types that users
  see (``asyncop.lowlevel.Waker``), or that extend one (a heap type's
  subclass must be one too): they are built as heap types, which
  ``asyncop._exports.publish`` can give their public ``__module__``.
- ``pip install .`` builds the extension modules in ``build/`` and puts them
  in the wheel beside their ``.py`` files (which stay, for the pure mode).
- ``pip install -e .`` builds them in place, beside the sources, and writes
  ``asyncop/.sources<suffix>.json``: the size and time of each source it
  compiled, so that ``asyncop/_compiled.py`` runs a source edited since from
  its ``.py`` (and says so) instead of the stale extension module.

At run time, ``ASYNCOP_NO_EXTENSIONS=1`` runs the ``.py`` files even when the
extension modules are there (see ``asyncop/_compiled.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# Cython's settings for every core module. annotation_typing is off: the
# annotations are for the type checkers (an ``x: float`` must not become a C
# double, nor an ``x: list`` refuse a subclass); C types are declared with
# ``cython.locals`` and ``cython.declare`` where they pay.
DIRECTIVES = {
    "language_level": 3,
    "binding": True,
    "annotation_typing": False,
    "embedsignature": False,
    "always_allow_keywords": True,
}


def _disabled() -> bool:
    return os.environ.get("ASYNCOP_NO_EXTENSIONS", "") not in ("", "0")


def _compiler() -> str:
    """The C compiler a build would run: $CC, else the one Python was built with."""
    command = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return command.split()[0]


def _free_threaded() -> bool:
    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


@contextmanager
def _cwd(path: str) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


class CythonBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Compiles the core modules into the wheel, or in place for an editable install."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        editable = version == "editable"
        modules = self._modules()
        suffix = EXTENSION_SUFFIXES[0]
        if editable:
            # What an earlier editable build of this interpreter left in
            # place and this one does not build goes: a pure build must not
            # keep running it. The rest is rebuilt only where it changed.
            self._remove_inplace(suffix, keep={_module_name(path) for path in modules})
        if not modules:
            return
        outputs = self._compile(modules, inplace=editable)
        if outputs is None:
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if editable:
            self._write_sources(modules, suffix)
        else:
            for relative, built in outputs.items():
                build_data["force_include"][str(built)] = relative

    def _modules(self) -> list[str]:
        """The modules to compile here; none when compiling is turned off."""
        if _disabled():
            self._say("ASYNCOP_NO_EXTENSIONS is set: building pure Python")
            return []
        compiler = _compiler()
        if shutil.which(compiler) is None:
            self._say(f"no C compiler ({compiler!r} not found): building pure Python")
            return []
        modules = list(self.config.get("modules", []))
        if _free_threaded():
            allowed = set(self.config.get("freethreading-compatible", []))
            skipped = [path for path in modules if path not in allowed]
            if skipped:
                self._say(
                    f"free-threaded interpreter: {len(skipped)} module(s) not declared "
                    "free-threading compatible stay pure Python"
                )
            modules = [path for path in modules if path in allowed]
        return modules

    def _compile(self, modules: list[str], *, inplace: bool) -> dict[str, Path] | None:
        """Build the extension modules; their paths by wheel path, or None if that failed."""
        try:
            from Cython.Build import cythonize
            from setuptools import Distribution, Extension
            from setuptools.command.build_ext import build_ext
        except ImportError as exc:
            self._say(f"cannot compile ({exc}): building pure Python")
            return None
        from Cython import __version__ as cython_version

        free_threaded = _free_threaded()
        # Sources are compiled again only where they changed, so a change of
        # Cython or of its settings needs a build folder of its own.
        heap_types = sorted(self.config.get("heap-types", []))
        settings = json.dumps(
            [cython_version, DIRECTIVES, free_threaded, heap_types], sort_keys=True
        )
        tag = EXTENSION_SUFFIXES[0].strip(".").removesuffix(".so").removesuffix(".pyd")
        digest = hashlib.sha256(settings.encode()).hexdigest()[:12]
        build = Path(self.root, "build", "cython", f"{tag}-{digest}")
        # A module whose extension types are public builds them as heap types,
        # whose __module__ can then name the public module (asyncop._exports).
        extensions = [
            Extension(
                _module_name(path),
                [path],
                define_macros=[("CYTHON_USE_TYPE_SPECS", "1")] if path in heap_types else [],
            )
            for path in modules
        ]
        directives: dict[str, object] = dict(DIRECTIVES)
        if free_threaded:
            # Only the modules listed as compatible are compiled there
            # (_modules), and each says so: importing it keeps the GIL off.
            directives["freethreading_compatible"] = True
        with _cwd(self.root):
            # A Cython error is a defect of the sources: let it fail the build.
            compiled = cythonize(
                extensions,
                build_dir=str(build / "c"),
                compiler_directives=directives,
                quiet=True,
            )
            command = build_ext(Distribution({"ext_modules": compiled}))
            command.build_temp = str(build / "obj")
            command.build_lib = self.root if inplace else str(build / "lib")
            command.parallel = os.cpu_count() or 1
            try:
                command.ensure_finalized()
                command.run()
            except Exception as exc:  # no compiler, or one that failed
                self._say(f"C compilation failed ({exc}): building pure Python")
                if inplace:
                    self._remove_inplace(EXTENSION_SUFFIXES[0], keep=set())
                return None
        out = Path(command.build_lib)
        outputs = {}
        for extension in compiled:
            relative = command.get_ext_filename(extension.name)
            outputs[relative.replace(os.sep, "/")] = out / relative
        self._say(f"compiled {len(outputs)} core module(s) with Cython")
        return outputs

    def _remove_inplace(self, suffix: str, keep: set[str]) -> None:
        """Remove the extension modules built in place, but those named in ``keep``."""
        package = Path(self.root, "asyncop")
        for built in package.rglob(f"*{suffix}"):
            relative = built.relative_to(self.root).as_posix().removesuffix(suffix)
            if relative.replace("/", ".") not in keep:
                built.unlink()
        Path(package, f".sources{suffix.removesuffix('.so')}.json").unlink(missing_ok=True)

    def _write_sources(self, modules: list[str], suffix: str) -> None:
        """Record each compiled source's size and time, to tell a later edit."""
        sources = {}
        for path in modules:
            stat = Path(self.root, path).stat()
            sources[_module_name(path)] = [stat.st_mtime_ns, stat.st_size]
        manifest = Path(self.root, "asyncop", f".sources{suffix.removesuffix('.so')}.json")
        manifest.write_text(json.dumps(sources, indent=0, sort_keys=True) + "\n")

    def _say(self, message: str) -> None:
        print(f"asyncop build: {message}", file=sys.stderr)
