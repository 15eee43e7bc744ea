"""Build script: lists the compiled extensions (metadata lives in pyproject.toml).

Set AMQSTOMP_NO_EXTENSIONS=1 to build a pure-Python package: no extension is
listed, so setuptools tags the wheel ``py3-none-any`` (the twins in
``amqstomp/*_py.py`` are used at run time instead). Off CPython (PyPy, ...)
the extensions are skipped the same way, as aiohttp does.

Cython (a build requirement in pyproject.toml) runs only when the extensions
are built (``build_ext``): making an sdist needs no C compiler, and the sdist
ships the Cython sources, never generated ``.c`` files (see MANIFEST.in).
"""
import os
import platform

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# extension module -> its source. The codec is a .pyx of its own (with the twin _codec_py.py) that
# includes its _codec_*.pxi files (the include lines at its end; all in git, none generated;
# cythonize tracks included files itself);
# flow is ONE source: the pure-Python _flow_py.py compiled as it is, typed by amqstomp/_core/_flow.pxd
# (Cython reads the .pxd of the module's name: amqstomp._core._flow -> amqstomp/_core/_flow.pxd);
# so is the links' thread hand-off (_io/_handoff_py.py, typed by amqstomp/_io/_handoff.pxd).
EXTENSION_MODULES = {
    "amqstomp._core._codec": "amqstomp/_core/_codec.pyx",
    "amqstomp._core._flow": "amqstomp/_core/_flow_py.py",
    "amqstomp._io._handoff": "amqstomp/_io/_handoff_py.py",
}


def extensions():
    if os.environ.get("AMQSTOMP_NO_EXTENSIONS") or platform.python_implementation() != "CPython":
        return []
    return [Extension(name, [source], depends=[pxd for pxd in [_pxd(name)] if os.path.exists(pxd)],
                      extra_compile_args=["-O2"])
            for name, source in EXTENSION_MODULES.items()]


def _pxd(module):
    """The .pxd Cython reads for ``module``: the one named after the module, whatever the
    source's name (amqstomp._core._flow -> amqstomp/_core/_flow.pxd)."""
    return module.replace(".", "/") + ".pxd"


class cythonize_build_ext(build_ext):
    """build_ext that turns the Cython sources into C just before compiling them
    (not when an sdist or metadata is made)."""

    def run(self):
        if self.extensions:
            from Cython.Build import cythonize

            for ext in self.extensions:
                # Cython reads the .pxd named after the module (amqstomp/_core/_flow.pxd), but
                # cythonize's staleness check knows only the source's own (_flow_py.pxd):
                # regenerate the C file when the module's .pxd is newer
                pxd = _pxd(ext.name)
                c_file = os.path.splitext(ext.sources[0])[0] + ".c"
                if (os.path.exists(pxd) and os.path.exists(c_file)
                        and os.path.getmtime(c_file) < os.path.getmtime(pxd)):
                    os.remove(c_file)
            generated = cythonize(
                self.extensions,
                language_level=3,
                compiler_directives={"embedsignature": True},
                quiet=True,
            )
            by_name = {ext.name: ext for ext in generated}
            for ext in self.extensions:  # keep the objects build_ext has finalized
                for attr, value in vars(by_name[ext.name]).items():
                    if not attr.startswith("_"):  # sources (now .c), directives' settings
                        setattr(ext, attr, value)
        super().run()


setup(ext_modules=extensions(), cmdclass={"build_ext": cythonize_build_ext})
