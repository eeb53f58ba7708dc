"""The one piece of edgecli in C: ``edgecli._native``, the 1-bit PNG encoder without the GIL.

Built where a C compiler and zlib's header are at hand, and skipped (``optional``) where not:
``edgecli.output.png`` then encodes with its own Python code, which makes the same PNGs. On CPython
3.11 and later it is built for the limited API, so that one build serves every later version.
Everything else about the package is in pyproject.toml.
"""

import sys

from setuptools import Extension, setup

LIMITED = sys.version_info >= (3, 11)

setup(
    ext_modules=[
        Extension(
            "edgecli._native",
            ["edgecli/_native.c"],
            libraries=["z", "dl", "pthread"],
            define_macros=[("Py_LIMITED_API", "0x030B0000")] if LIMITED else [],
            py_limited_api=LIMITED,
            optional=True,
        )
    ],
    options={"bdist_wheel": {"py_limited_api": "cp311"}} if LIMITED else {},
)
