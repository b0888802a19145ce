"""The one loader for kbroker's byte kernels.

Each kernel exists twice with identical signatures: a compiled Cython module (``crc32c``,
``varint``, ``batch``, ``index``; built by ``python setup.py build_ext --inplace``) and a
pure-Python twin (``*_py``).  The compiled set is used when all four import; otherwise, or
when ``KBROKER_PURE=1`` is set, the twins are.  ``IMPL`` says which ("cython" / "python").
``load(pure)`` returns a namespace for an explicit choice (tests run both).
"""

import importlib
import os
import types

__all__ = [
    "crc32c", "encode_varint", "decode_varint", "encode_uvarint", "decode_uvarint",
    "scan_batches", "validate_records_v2", "validate_records_region", "receive_buffer", "bisect_index",
    "IMPL", "load",
]


def _namespace(impl, crc_mod, varint_mod, batch_mod, index_mod):
    return types.SimpleNamespace(
        IMPL=impl,
        crc32c=crc_mod.crc32c,
        encode_varint=varint_mod.encode_varint,
        decode_varint=varint_mod.decode_varint,
        encode_uvarint=varint_mod.encode_uvarint,
        decode_uvarint=varint_mod.decode_uvarint,
        scan_batches=batch_mod.scan_batches,
        validate_records_v2=batch_mod.validate_records_v2,
        validate_records_region=batch_mod.validate_records_region,
        receive_buffer=batch_mod.receive_buffer,
        bisect_index=index_mod.bisect_index,
    )


def load(pure=False):
    """Namespace of kernels: the twins when ``pure``, else the compiled ones.

    Raises ImportError when ``pure`` is false and the compiled modules are not built.
    """
    names = ("crc32c_py", "varint_py", "batch_py", "index_py") if pure else ("crc32c", "varint", "batch", "index")
    # Importing a submodule binds it as an attribute of this package for the first time, which would
    # shadow the exported function of the same name (``crc32c``); put the exports back afterwards.
    saved = {k: globals()[k] for k in __all__ if k in globals()}
    try:
        mods = [importlib.import_module(__name__ + "." + m) for m in names]
    finally:
        globals().update(saved)
    return _namespace("python" if pure else "cython", *mods)


def _pick():
    if os.environ.get("KBROKER_PURE", "") not in ("", "0"):
        return load(pure=True)
    try:
        return load(pure=False)
    except ImportError:
        return load(pure=True)


_ns = _pick()
IMPL = _ns.IMPL
crc32c = _ns.crc32c
encode_varint = _ns.encode_varint
decode_varint = _ns.decode_varint
encode_uvarint = _ns.encode_uvarint
decode_uvarint = _ns.decode_uvarint
scan_batches = _ns.scan_batches
validate_records_v2 = _ns.validate_records_v2
validate_records_region = _ns.validate_records_region
receive_buffer = _ns.receive_buffer
bisect_index = _ns.bisect_index
del _ns
