"""The principal of a TLS connection, as Kafka's DefaultKafkaPrincipalBuilder makes it.

* No client certificate (``ssl.client.auth=none``, or ``requested`` and the client sent none): ``User:ANONYMOUS``.
* A client certificate: ``User:<name>``, where ``<name>`` is the certificate subject's distinguished name in Java's
  RFC 2253 form (``X500Principal.getName()``: ``CN=alice,OU=eng,O=acme,C=US``) passed through
  ``ssl.principal.mapping.rules`` (KIP-371; the default rule ``DEFAULT`` keeps the name as it is).

Java's RFC 2253 form (``rfc2253``), which ACLs written for Kafka match character for character: the RDNs most
specific first (the reverse of their order in the certificate), ``,`` between RDNs and ``+`` between the values of a
multi-valued RDN (in their encoded order); the keywords CN, C, L, ST, O, OU, STREET, DC, UID, any other attribute as
its dotted OID with ``#`` and the hex of its DER value (``1.2.840.113549.1.9.1=#1611...`` for an e-mail address); in
a value, each of ``,=+<>#;"\\`` gets a backslash, NUL becomes ``\\00``, and leading and trailing spaces (and CRs) get a
backslash. Values are decoded as UTF-8 (Java does the same for every string type; BMPString is read as UTF-16, the
one place Java's reading is garbage).

Mapping rules (``SslPrincipalMapper``), Kafka's grammar and errors: a comma-separated list of ``DEFAULT`` and
``RULE:pattern/replacement/[LU]`` (a ``/`` inside the pattern or replacement written ``\\/``); the first rule whose
pattern matches the *whole* name gives the principal (``replacement`` with Java's ``$n`` group references, then
lower-cased with ``L`` or upper-cased with ``U``); no rule matching is an error (the connection is refused, as
Kafka's authentication fails). Patterns are Java regular expressions run by Python's ``re``: the common syntax is the
same; one Python cannot compile stops startup naming the key.
"""
import re

ANONYMOUS = "User:ANONYMOUS"
USER = "User:"

# Kafka's grammar (SslPrincipalMapper.RULE_PATTERN / RULE_SPLITTER), the same regular expressions in Python syntax.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class InvalidRules(ValueError):
    """``ssl.principal.mapping.rules`` does not parse; the message is Kafka's ("Invalid rule: ...")."""


class NoMatchingRule(Exception):
    """No rule maps this distinguished name (Kafka: "No rules apply to <dn>, rules [...]")."""


# ---------------------------------------------------------------------------------------- distinguished names

_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
             "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID"}
# Java's AVA.isDerString(value, false): PrintableString, T61String, IA5String, GeneralString, BMPString, UTF8String.
_STRING_TAGS = {0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C}
_BMP_STRING = 0x1E
_ESCAPED = frozenset(',=+<>#;"\\')


def _tlv(buf, pos):
    """(tag, content start, content end) of the DER element at ``pos``; ValueError when it does not fit."""
    if pos + 2 > len(buf):
        raise ValueError("truncated DER element")
    tag, n = buf[pos], buf[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or pos + k > len(buf):
            raise ValueError("bad DER length")
        n = int.from_bytes(buf[pos:pos + k], "big")
        pos += k
    if pos + n > len(buf):
        raise ValueError("truncated DER element")
    return tag, pos, pos + n


def _oid(content):
    if not content:
        raise ValueError("empty OID")
    first = content[0]
    parts = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    value = 0
    for b in content[1:]:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(value)
            value = 0
    return ".".join(str(p) for p in parts)


def _escape(value):
    out = []
    for c in value:
        if c in _ESCAPED:
            out.append("\\" + c)
        elif c == "\0":
            out.append("\\00")
        else:
            out.append(c)
    chars = "".join(out)
    lead = 0
    while lead < len(chars) and chars[lead] in " \r":
        lead += 1
    last = len(chars) - 1
    while last >= 0 and chars[last] in " \r":
        last -= 1
    return "".join("\\" + c if i < lead or i > last else c for i, c in enumerate(chars))


def _ava(buf, start, end):
    tag, s, e = _tlv(buf, start)
    if tag != 0x06:
        raise ValueError("attribute type is not an OID")
    oid = _oid(buf[s:e])
    vtag, vs, ve = _tlv(buf, e)
    keyword = _KEYWORDS.get(oid)
    if keyword is None or vtag not in _STRING_TAGS:
        return "%s=#%s" % (keyword or oid, bytes(buf[e:ve]).hex())
    raw = bytes(buf[vs:ve])
    value = raw.decode("utf-16-be", "replace") if vtag == _BMP_STRING else raw.decode("utf-8", "replace")
    return "%s=%s" % (keyword, _escape(value))


def rfc2253(name_der):
    """Java's ``X500Principal.getName()`` of a DER-encoded Name (module docstring)."""
    buf = memoryview(name_der)
    tag, pos, end = _tlv(buf, 0)
    if tag != 0x30:
        raise ValueError("a Name is a SEQUENCE")
    rdns = []
    while pos < end:
        tag, s, e = _tlv(buf, pos)
        if tag != 0x31:
            raise ValueError("an RDN is a SET")
        avas = []
        while s < e:
            atag, a_s, a_e = _tlv(buf, s)
            if atag != 0x30:
                raise ValueError("an attribute is a SEQUENCE")
            avas.append(_ava(buf, a_s, a_e))
            s = a_e
        rdns.append("+".join(avas))
        pos = e
    return ",".join(reversed(rdns))


def certificate_dn(cert_der):
    """The subject distinguished name (Java's RFC 2253 form) of a DER certificate."""
    from cryptography import x509   # imported on first use: ~60 ms the config and tools need not pay
    cert = x509.load_der_x509_certificate(cert_der)
    return rfc2253(cert.subject.public_bytes())


# ------------------------------------------------------------------------------------------ mapping rules

class _Rule:
    __slots__ = ("default", "pattern", "replacement", "lower", "upper")

    def __init__(self, pattern=None, replacement=None, lower=False, upper=False):
        self.default = pattern is None
        self.pattern = pattern
        self.replacement = replacement
        self.lower, self.upper = lower, upper

    def apply(self, dn):
        if self.default:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        replacement = _escape_literal_back_references(self.replacement, self.pattern.groups)
        result = self.pattern.sub(lambda mm: _java_replacement(replacement, mm), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def __repr__(self):
        if self.default:
            return "DEFAULT"
        return "RULE:%s/%s%s" % (self.pattern.pattern, self.replacement,
                                 "/L" if self.lower else "/U" if self.upper else "")


def _escape_literal_back_references(unescaped, groups):
    """Kafka's Rule.escapeLiteralBackReferences: ``$n`` naming no group of the pattern (after cutting ``n`` back
    one digit at a time while it exceeds the group count) becomes a literal ``\\$n``. Offsets are taken in the
    original text and applied to the edited one, exactly as Kafka does."""
    if groups == 0:
        return unescaped
    value = unescaped
    for m in _BACK_REFERENCE.finditer(unescaped):
        digits = m.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = m.start(1)
            value = value[:start - 1] + "\\" + value[start - 1:]
    return value


def _java_replacement(replacement, m):
    """``Matcher.appendReplacement``'s reading of ``replacement`` for match ``m``: ``\\x`` is a literal x, ``$n``
    the longest group number that exists (at least one digit), ``${name}`` a named group."""
    out = []
    i, n = 0, len(replacement)
    groups = m.re.groups
    while i < n:
        c = replacement[i]
        if c == "\\":
            i += 1
            if i >= n:
                raise NoMatchingRule("character to be escaped is missing in replacement %r" % replacement)
            out.append(replacement[i])
            i += 1
        elif c == "$":
            i += 1
            if i >= n:
                raise NoMatchingRule("illegal group reference: group index is missing in %r" % replacement)
            if replacement[i] == "{":
                j = replacement.find("}", i)
                if j < 0:
                    raise NoMatchingRule("named capturing group is missing trailing '}' in %r" % replacement)
                name = replacement[i + 1:j]
                try:
                    out.append(m.group(name) or "")
                except IndexError:
                    raise NoMatchingRule("no group with name {%s}" % name) from None
                i = j + 1
                continue
            if not replacement[i].isdigit():
                raise NoMatchingRule("illegal group reference in %r" % replacement)
            ref = int(replacement[i])
            i += 1
            while i < n and replacement[i].isdigit():
                longer = ref * 10 + int(replacement[i])
                if longer > groups:
                    break
                ref = longer
                i += 1
            if ref > groups:
                raise NoMatchingRule("no group %d in pattern %r" % (ref, m.re.pattern))
            out.append(m.group(ref) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _split_rules(text):
    return [m.group(1) for m in _RULE_SPLITTER.finditer(text.strip())]


def parse_rules(text):
    """Kafka's ``ssl.principal.mapping.rules`` -> [rules]; None means ``DEFAULT``. Raises InvalidRules."""
    if text is None:
        text = "DEFAULT"
    rules = []
    for rule in _split_rules(text):
        m = _RULE_PARSER.match(rule)
        if m is None:
            raise InvalidRules("Invalid rule: %s" % rule)
        if m.end() != len(rule):
            raise InvalidRules("Invalid rule: `%s`, unmatched substring: `%s`" % (rule, rule[m.end():]))
        if m.group(1) is not None:
            rules.append(_Rule())
        elif m.group(2) is not None:
            try:
                pattern = re.compile(m.group(2))
            except re.error as e:
                raise InvalidRules("Invalid rule: `%s`: the pattern %r does not compile: %s"
                                   % (rule, m.group(2), e)) from None
            rules.append(_Rule(pattern, m.group(4), m.group(6) == "L", m.group(6) == "U"))
        # anything else is an empty rule (e.g. after a trailing comma): ignored, as in Kafka
    return rules


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` applied to distinguished names (module docstring)."""

    def __init__(self, rules=None):
        self.rules = parse_rules(rules)

    def name(self, dn):
        """The mapped name of ``dn``; NoMatchingRule when no rule applies (or a replacement is malformed)."""
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise NoMatchingRule("No rules apply to %s, rules %s" % (dn, self.rules))

    def principal(self, cert_der):
        """``User:<mapped DN>`` of a peer certificate (DER), or ``User:ANONYMOUS`` without one."""
        if not cert_der:
            return ANONYMOUS
        return USER + self.name(certificate_dn(cert_der))

    def __repr__(self):
        return "SslPrincipalMapper(rules = %s)" % self.rules
