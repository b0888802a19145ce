"""kbroker/cli/java_text.py: bytes read as Java's String(bytes, UTF_8), what kafka-dump-log.sh prints. Checked
against a JVM on 4,000 short random byte strings (Python's own "replace" differs on 53 of them)."""
import os
import random
import shutil
import subprocess

import pytest

from kbroker.cli.java_text import java_string

R = "\ufffd"


def _units(text):
    """UTF-16 code units in hex, as JavaUtf8.java prints them."""
    out = []
    for ch in text:
        o = ord(ch)
        if o > 0xFFFF:
            o -= 0x10000
            out += [0xD800 + (o >> 10), 0xDC00 + (o & 0x3FF)]
        else:
            out.append(o)
    return " ".join("%04x" % u for u in out)


def test_valid_text_reads_as_utf8():
    assert java_string("key-é-€-😀".encode()) == "key-é-€-😀"


@pytest.mark.parametrize("data, text", [
    # A committed offset's expire timestamp (CI: dump output differed by one U+FFFD): f2 alone, then "ed bb" as
    # one truncated tail (Java does not check ED's surrogate range there); Python's "replace" gives three.
    (bytes.fromhex("000001a246f2edbb"), "\x00\x00\x01" + R + "F" + R + R),
    (b"\xed\xa0\x80", R),                      # a complete surrogate: one U+FFFD for 3 bytes (Python: 3)
    (b"\xe1\x80", R),                          # truncated tail: one
    (b"\xc2A", R + "A"),                       # the byte after a bad 2-byte lead is read again
    (b"\xf0\x90\x80", R),                      # truncated 4-byte tail
    (b"\xf0\x90\x80A", R + "A"),
    (b"\xf5\x80\x80\x80", R * 4),
    (b"\xc0\xaf", R + R),
])
def test_malformed_input_as_java_reads_it(data, text):
    assert java_string(data) == text


@pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("CI"), reason="needs a JVM (java)")
def test_same_text_as_a_jvm(tmp_path):
    rng = random.Random(7)
    pool = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED,
            0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFE, 0xFF, 0xBB, 0xA2, 0x46, 0xF2]
    cases = [bytes(rng.choice(pool) if rng.random() < 0.9 else rng.randint(0, 255) for _ in range(rng.randint(1, 8)))
             for _ in range(4000)]
    path = tmp_path / "cases.txt"
    path.write_text("".join(c.hex() + "\n" for c in cases))
    source = os.path.join(os.path.dirname(__file__), "JavaUtf8.java")
    out = subprocess.run(["java", source, str(path)], capture_output=True, text=True, timeout=120, check=True).stdout
    java = out.split("\n")[:len(cases)]
    assert [(c.hex(), _units(java_string(c))) for c in cases] == [(c.hex(), j) for c, j in zip(cases, java)]
    assert sum(_units(c.decode("utf-8", "replace")) != j for c, j in zip(cases, java)) > 0   # the point of it
