"""The one loader for kbroker's byte kernels.

Each kernel exists twice with identical signatures: a compiled Cython module (``crc32c``,
``varint``, ``batch``, ``index``, ``records``, ``files``; built by ``python setup.py build_ext --inplace``)
and a pure-Python twin (``*_py``).  The compiled set is used when all six import; otherwise, or
when ``KBROKER_PURE=1`` is set, the twins are -- never a mix, so ``IMPL`` ("cython" / "python")
says which code every export runs.  ``load(pure)`` returns a namespace for an explicit choice
(tests run both).  Import the kernels from here, never from a submodule: a direct
``from kbroker._native.batch_py import ...`` would bypass the choice.

Exports by module: ``crc32c``; ``encode_varint`` / ``decode_varint`` / ``encode_uvarint`` /
``decode_uvarint`` (varint); ``scan_batches``, ``validate_records_v2``, ``validate_records_region``,
``receive_buffer`` and the constant ``OFFSET_DELTA_REASON`` (batch); ``bisect_index`` (index);
``record_facts``, ``renumber_records`` (records: per-record work over a records region that
``validate_records_*`` accepted); ``write_files`` (files: many small files written with the GIL released once,
for worker threads beside a busy event loop).  Contracts: docs/architecture.md and each twin's docstring.
"""

import importlib
import os
import types

__all__ = [
    "crc32c", "encode_varint", "decode_varint", "encode_uvarint", "decode_uvarint",
    "scan_batches", "validate_records_v2", "validate_records_region", "receive_buffer", "OFFSET_DELTA_REASON",
    "bisect_index", "record_facts", "renumber_records", "write_files",
    "IMPL", "load",
]

KERNELS = ("crc32c", "varint", "batch", "index", "records", "files")


def _namespace(impl, crc_mod, varint_mod, batch_mod, index_mod, records_mod, files_mod):
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
        OFFSET_DELTA_REASON=batch_mod.OFFSET_DELTA_REASON,
        bisect_index=index_mod.bisect_index,
        record_facts=records_mod.record_facts,
        renumber_records=records_mod.renumber_records,
        write_files=files_mod.write_files,
    )


def load(pure=False):
    """Namespace of kernels: the twins when ``pure``, else the compiled ones.

    Raises ImportError when ``pure`` is false and any compiled module is not built.
    """
    names = [k + "_py" for k in KERNELS] if pure else list(KERNELS)
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
OFFSET_DELTA_REASON = _ns.OFFSET_DELTA_REASON
bisect_index = _ns.bisect_index
record_facts = _ns.record_facts
renumber_records = _ns.renumber_records
write_files = _ns.write_files
del _ns
