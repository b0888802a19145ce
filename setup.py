"""Build the Cython kernels in kbroker/_native.

Every kernel X.pyx has a pure-Python twin X_py.py; kbroker/_native/__init__.py picks one.
If Cython or a C compiler is missing the build still succeeds and the twins are used.
"""
import os
from setuptools import setup

ext_modules = []
try:
    from Cython.Build import cythonize
    from setuptools import Extension

    here = os.path.dirname(os.path.abspath(__file__))
    native = os.path.join(here, "kbroker", "_native")
    pyx = sorted(f for f in os.listdir(native) if f.endswith(".pyx"))
    exts = [
        Extension(
            "kbroker._native." + f[:-4],
            [os.path.join("kbroker", "_native", f)],
            extra_compile_args=["-O3"],
        )
        for f in pyx
    ]
    ext_modules = cythonize(exts, language_level=3, compiler_directives={
        "boundscheck": False, "wraparound": False, "cdivision": True})
except ImportError:  # pragma: no cover - build without Cython: pure twins only
    ext_modules = []

setup(ext_modules=ext_modules)
