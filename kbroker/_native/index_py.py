"""Pure-Python index bisection, the twin of ``index.pyx``.

An index file is a packed array of fixed-size entries whose first ``key_size`` bytes are a
big-endian signed key in ascending order: ``.index`` entries are 8 bytes (relative offset int32,
position int32), ``.timeindex`` entries are 12 bytes (timestamp int64, relative offset int32).
``bisect_index`` returns the largest slot whose key is <= target, or -1 when every key is
greater (or the index is empty).
"""

import struct

_KEY = {4: struct.Struct(">i"), 8: struct.Struct(">q")}


def bisect_index(buf, n_entries, entry_size, key_size, target):
    """Largest slot in [0, n_entries) with key <= target, else -1."""
    try:
        unpack = _KEY[key_size].unpack_from
    except KeyError:
        raise ValueError("key_size must be 4 or 8, got %r" % (key_size,)) from None
    if n_entries < 0 or entry_size < key_size or n_entries * entry_size > len(buf):
        raise ValueError("index buffer too small for %d entries of %d bytes" % (n_entries, entry_size))
    lo, hi = 0, n_entries - 1
    found = -1
    while lo <= hi:
        mid = (lo + hi) >> 1
        if unpack(buf, mid * entry_size)[0] <= target:
            found = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return found
