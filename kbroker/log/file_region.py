"""A byte range of an open log file, handed to the network layer for ``os.sendfile``.

``FileRegion(fileobj_or_fd, position, size)`` does not own the file: the segment keeps it open
until the segment is really deleted (after ``file.delete.delay.ms``), so a region handed out just
before a retention delete stays readable.  Reads use ``os.pread`` and never move a file position,
so the same file object can back any number of regions and the appender at once.
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
