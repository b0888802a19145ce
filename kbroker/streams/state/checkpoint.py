"""The task's ".checkpoint" file (Kafka's OffsetCheckpoint), "<state.dir>/<application.id>/<task id>/.checkpoint".

Text format, ``\\n`` line ends, exactly Kafka's::

    0                         <- version
    2                         <- number of entries
    app-store-changelog 3 41  <- "<changelog topic> <partition> <offset>"
    app-other-changelog 3 7

The offset is that of the LAST changelog record the store holds (written or restored); restore resumes at offset + 1
(Kafka's StoreChangelogReader). Writes go to ".checkpoint.tmp", are fsynced, renamed over the file, and the directory
is fsynced: a crash leaves the old or the new file, never a torn one. A malformed file raises
ProcessorStateException-compatible ValueError (the caller wipes the state and restores from the changelog start).
"""

import os

VERSION = 0
FILE_NAME = ".checkpoint"


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class OffsetCheckpoint:
    def __init__(self, path: str):
        self.path = path

    @staticmethod
    def encode(offsets: dict) -> bytes:
        """Kafka's bytes for ``{(topic, partition): offset}``, entries sorted by (topic, partition)."""
        lines = [str(VERSION), str(len(offsets))]
        for (topic, partition), offset in sorted(offsets.items()):
            if " " in topic or "\n" in topic:
                raise ValueError(f"illegal topic name in checkpoint: {topic!r}")
            lines.append(f"{topic} {int(partition)} {int(offset)}")
        return ("\n".join(lines) + "\n").encode()

    @staticmethod
    def decode(data: bytes) -> dict:
        lines = data.decode("utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            return {}
        if lines[0].strip() != str(VERSION):
            raise ValueError(f"unknown checkpoint version {lines[0]!r}")
        count = int(lines[1])
        entries = lines[2:]
        if len(entries) != count:
            raise ValueError(f"checkpoint says {count} entries but holds {len(entries)}")
        out = {}
        for line in entries:
            parts = line.split(" ")
            if len(parts) != 3:
                raise ValueError(f"malformed checkpoint line {line!r}")
            out[(parts[0], int(parts[1]))] = int(parts[2])
        return out

    def write(self, offsets: dict) -> None:
        """Replace the file crash-safely (tmp + fsync + rename + directory fsync)."""
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        tmp = self.path + ".tmp"
        data = self.encode(offsets)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        _fsync_dir(directory)

    def read(self) -> dict:
        """The offsets, {} when the file does not exist."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return {}
        return self.decode(data)

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
