"""Build script: lists the compiled extensions.

Set AMQSTOMP_NO_EXTENSIONS=1 to build a pure-Python package (the twins in
``amqstomp/*_py.py`` are used at run time instead).
"""
import os

from setuptools import Extension, setup

EXTENSION_MODULES = ["amqstomp._codec", "amqstomp._flow"]


def extensions():
    if os.environ.get("AMQSTOMP_NO_EXTENSIONS"):
        return []
    from Cython.Build import cythonize

    exts = [
        Extension(name, [name.replace(".", "/") + ".pyx"], extra_compile_args=["-O2"])
        for name in EXTENSION_MODULES
    ]
    return cythonize(
        exts,
        language_level=3,
        compiler_directives={"embedsignature": True},
    )


setup(ext_modules=extensions())
