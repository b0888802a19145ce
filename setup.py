"""Build kbroker's Cython kernels: kbroker/_native/X.pyx -> extension module kbroker._native.X.

Every kernel has a pure-Python twin (X_py.py) and kbroker/_native/__init__.py uses the compiled set only when all
of it imports, so a build without Cython or without a working C compiler still yields a working package -- about
an order of magnitude slower on the byte paths (CRC-32C, batch scans). That fallback is never silent:

- it prints a banner on stderr naming what was missing (`pip install -v` / `python -m build` show it; plain
  `pip install` hides a successful build's output, so `kbroker-server --version` also names the kernels in use);
- with KBROKER_REQUIRE_NATIVE=1 (scripts/setup.sh sets it) it is a build error instead.

Anything else that goes wrong while compiling (a Cython error in a .pyx) fails the build as usual.
"""
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, CompileError, ExecError, LinkError, PlatformError

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = os.path.join("kbroker", "_native")
# The CRC-32C kernel's C core and its Cython declaration: a change to either must rebuild every kernel.
SHARED_DEPENDS = [os.path.join(NATIVE, "kb_crc32c.h"), os.path.join(NATIVE, "kb_crc32c.pxd")]
# What a missing compiler, missing Python headers or a failing link raise from build_ext.
NO_COMPILER_ERRORS = (CCompilerError, CompileError, ExecError, LinkError, PlatformError)


def native_required():
    return os.environ.get("KBROKER_REQUIRE_NATIVE", "") not in ("", "0")


def fall_back(reason):
    """Say loudly that the package is being built without its compiled kernels (or fail, when they are required)."""
    if native_required():
        sys.exit("error: KBROKER_REQUIRE_NATIVE=1 but the Cython kernels cannot be built: %s" % reason)
    bar = "!" * 78
    sys.stderr.write(
        "\n%s\n!! kbroker: BUILDING WITHOUT THE CYTHON KERNELS -- falling back to pure Python.\n"
        "!! Reason: %s\n"
        "!! The broker works, with much slower byte paths (kbroker._native.IMPL == 'python').\n"
        "!! Install Cython and a C compiler (Debian: apt-get install gcc python3-dev) and rebuild,\n"
        "!! or set KBROKER_REQUIRE_NATIVE=1 to make this an error.\n%s\n\n" % (bar, reason, bar))


def kernel_extensions():
    try:
        from Cython.Build import cythonize
    except ImportError:
        fall_back("Cython is not installed in the build environment")
        return []
    pyx = sorted(f for f in os.listdir(os.path.join(HERE, NATIVE)) if f.endswith(".pyx"))
    exts = [
        Extension("kbroker._native." + f[:-4], [os.path.join(NATIVE, f)],
                  depends=SHARED_DEPENDS, extra_compile_args=["-O3"])
        for f in pyx
    ]
    return cythonize(exts, language_level=3, compiler_directives={
        "boundscheck": False, "wraparound": False, "cdivision": True})


class OptionalBuildExt(build_ext):
    """build_ext whose only tolerated failure is the environment's: no compiler, no headers, no linker.

    The first kernel that fails ends the build (a partial set is useless: the loader takes all kernels or none).
    """

    def run(self):
        try:
            super().run()
        except NO_COMPILER_ERRORS as e:
            fall_back("compiling the kernels failed (%s: %s)" % (type(e).__name__, e))

    def copy_file(self, infile, outfile, *args, **kwargs):
        """Put a built module into the source tree (in-place / editable builds) by rename, never by rewriting.

        A running broker or test has the old .so mapped; rewriting that file in place (what a plain copy does: open
        with truncation, write) changes or cuts the pages under it, and the process dies of SIGBUS. A rename leaves
        it the old inode.
        """
        if self.dry_run or not outfile.endswith((".so", ".pyd")):
            return super().copy_file(infile, outfile, *args, **kwargs)
        tmp = "%s.tmp-%d" % (outfile, os.getpid())
        super().copy_file(infile, tmp, *args, **kwargs)
        os.replace(tmp, outfile)
        return outfile, True


setup(ext_modules=kernel_extensions(), cmdclass={"build_ext": OptionalBuildExt})
