"""Build script: lists the compiled extensions (metadata lives in pyproject.toml).

Set AMQSTOMP_NO_EXTENSIONS=1 to build a pure-Python package: no extension is
listed, so setuptools tags the wheel ``py3-none-any`` (the twins in
``amqstomp/*_py.py`` are used at run time instead).

Cython (a build requirement in pyproject.toml) runs only when the extensions
are built (``build_ext``): making an sdist needs no C compiler, and the sdist
ships the ``.pyx`` sources, never generated ``.c`` files (see MANIFEST.in).
"""
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

EXTENSION_MODULES = ["amqstomp._codec", "amqstomp._flow"]


def extensions():
    if os.environ.get("AMQSTOMP_NO_EXTENSIONS"):
        return []
    return [
        Extension(name, [name.replace(".", "/") + ".pyx"], extra_compile_args=["-O2"])
        for name in EXTENSION_MODULES
    ]


class cythonize_build_ext(build_ext):
    """build_ext that turns the .pyx sources into C just before compiling them
    (not when an sdist or metadata is made)."""

    def run(self):
        if self.extensions:
            from Cython.Build import cythonize

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
