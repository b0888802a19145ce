"""A byte range of an open log file, handed to the network layer for ``os.sendfile``.

``FileRegion(file, position, size)``: ``file`` is a segment's ``SegmentFile`` (descriptors.py) or a plain
descriptor. A region holds its ``SegmentFile``, which stays open for as long as any holder keeps it -- the
segment, or a region queued for ``sendfile`` after its segment was closed, deleted or its descriptor evicted -- so
the number a region sends from is never closed or reused under it. Reads use ``os.pread`` and never move a file
position, so the same descriptor can back any number of regions and the appender at once.
"""

import os


class FileRegion:
    __slots__ = ("file", "position", "size")

    def __init__(self, file, position, size):
        self.file = file
        self.position = position
        self.size = size

    def fileno(self):
        return self.file if isinstance(self.file, int) else self.file.fileno()

    def __len__(self):
        return self.size

    def read_bytes(self):
        """The region's bytes (for tests and down-conversion); short only if the file shrank."""
        fd = self.fileno()
        chunks = []
        pos, left = self.position, self.size
        while left > 0:
            chunk = os.pread(fd, left, pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def __repr__(self):
        return "FileRegion(fd=%s, position=%d, size=%d)" % (self.fileno(), self.position, self.size)
