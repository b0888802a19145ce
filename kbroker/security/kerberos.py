"""Kerberos principal names and ``sasl.kerberos.principal.to.local.rules`` (Kafka's KerberosName/KerberosShortNamer).

A GSSAPI client authenticates as a Kerberos principal ``service/host@REALM`` or ``user@REALM``; Kafka's principal
for it is ``User:<short name>``, the short name coming from the first rule that applies (none: the client is
refused, as Kafka refuses it). Rules (Hadoop's ``auth_to_local`` syntax, as Kafka parses it):

* ``DEFAULT`` -- the first component (``user`` of ``user@R``, ``kafka`` of ``kafka/host@R``) when the realm ``R``
  is the default realm (``default_realm`` of krb5.conf); does not apply otherwise.
* ``RULE:[n:format](match)s/from/to/g/L`` -- applies only to names of exactly ``n`` components (1 for
  ``user@R``, 2 for ``service/host@R``). ``format`` builds a base string from ``$0`` (the realm), ``$1`` and ``$2``
  (the components); ``(match)``, optional, is a regular expression the whole base must match; ``s/from/to/``,
  optional, replaces the first match of ``from`` in the base (every match with ``g``), ``$1`` in ``to`` naming a
  group of ``from``; ``/L`` or ``/U`` (KIP-309), optional, lower- or upper-cases the result. A result containing
  ``/`` or ``@`` is refused ("Non-simple name"), never used.

Rules are tried in order; ``sasl.kerberos.principal.to.local.rules`` is a comma-separated list whose default is
``DEFAULT`` (so a rule cannot contain a comma, as in Kafka). Regular expressions are Java's; the subset Kafka's
documentation and operators use (classes, groups, ``.*``, escapes) reads the same in Python's ``re``, and Java's
replacement syntax (``$n``, ``\\`` escapes) is translated.

Pure Python, no Kerberos library: the composition root passes the default realm it read from the Kerberos
configuration (``sasl.gssapi.default_realm``).
"""
import re

__all__ = ["KerberosName", "ShortNamer", "NoMatchingRule", "parse_rules"]

# Kafka's KerberosName: "service[/host]@realm"; a name without '@' is a bare service name (no host, no realm).
_NAME = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)")
# Kafka's KerberosShortNamer.RULE_PARSER, group for group (2: DEFAULT, 5: n, 6: format, 8: match, 10: from,
# 11: to, 12: g, 13: L|U). It must consume the whole rule.
_RULE = re.compile(r"((DEFAULT)|((RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?)))")
# KerberosRule's parameter pattern: literal text, then an optional "$<digits>".
_PARAM = re.compile(r"([^$]*)(\$(\d*))?")
_NON_SIMPLE = re.compile(r"[/@]")


class NoMatchingRule(Exception):
    """No rule maps the principal (or the one that applied gave a name with '/' or '@'); Kafka refuses the
    client."""


class KerberosName:
    """``service/host@realm`` split as Kafka splits it; ``host`` and ``realm`` may be None."""
    __slots__ = ("service", "host", "realm")

    def __init__(self, service, host=None, realm=None):
        self.service = service
        self.host = host
        self.realm = realm

    @classmethod
    def parse(cls, name):
        m = _NAME.fullmatch(name)
        if m is None:
            if "@" in name:
                raise ValueError("Malformed Kerberos name: %s" % name)
            return cls(name)
        return cls(m.group(1), m.group(3), m.group(4))

    def params(self):
        """The rule parameters: [realm, service] or [realm, service, host] ($0, $1, $2)."""
        if self.host is None:
            return [self.realm, self.service]
        return [self.realm, self.service, self.host]

    def __str__(self):
        s = self.service
        if self.host is not None:
            s += "/" + self.host
        if self.realm is not None:
            s += "@" + self.realm
        return s

    def __repr__(self):
        return "KerberosName(%r)" % str(self)


def _java_replacement(to):
    """Java's Matcher.replaceAll replacement string -> a function of a Python match: ``$n`` is group n (Java
    reads digits while the number stays a valid group), ``\\x`` is a literal x; a bare trailing ``$`` or ``\\`` is
    an error (as in Java)."""
    def expand(m):
        out = []
        i, n = 0, len(to)
        groups = m.re.groups
        while i < n:
            c = to[i]
            if c == "\\":
                if i + 1 >= n:
                    raise ValueError("character to be escaped is missing in %r" % to)
                out.append(to[i + 1])
                i += 2
            elif c == "$":
                i += 1
                if i >= n or not to[i].isdigit():
                    raise ValueError("Illegal group reference in %r" % to)
                num = int(to[i])
                i += 1
                while i < n and to[i].isdigit() and num * 10 + int(to[i]) <= groups:
                    num = num * 10 + int(to[i])
                    i += 1
                if num > groups:
                    raise ValueError("No group %d in %r" % (num, m.re.pattern))
                out.append(m.group(num) or "")
            else:
                out.append(c)
                i += 1
        return "".join(out)
    return expand


class Rule:
    """One parsed rule (module docstring). ``apply(params) -> str | None`` (None: does not apply)."""

    def __init__(self, default_realm, text, is_default=False, components=0, fmt=None, match=None, from_=None,
                 to=None, repeat=False, lower=False, upper=False):
        self.default_realm = default_realm
        self.text = text
        self.is_default = is_default
        self.components = components
        self.format = fmt
        self.match = re.compile(match) if match is not None else None
        self.from_ = re.compile(from_) if from_ is not None else None
        self.to = _java_replacement(to) if to is not None else None
        self.repeat = repeat
        self.lower = lower
        self.upper = upper

    def _base(self, params):
        out = []
        start = 0
        fmt = self.format
        while start < len(fmt):
            m = _PARAM.match(fmt, start)
            out.append(m.group(1))
            digits = m.group(3)
            if digits is not None:
                if not digits:
                    raise NoMatchingRule("bad format in username mapping in %s" % fmt)
                num = int(digits)
                if num >= len(params):
                    raise NoMatchingRule("index %d from %s is outside of the valid range 0 to %d"
                                         % (num, fmt, len(params) - 1))
                out.append(params[num] or "")
            if m.end() == start:  # "$" at the end with no digits consumed nothing more: stop (cannot loop)
                break
            start = m.end()
        return "".join(out)

    def apply(self, params):
        result = None
        if self.is_default:
            if self.default_realm == params[0]:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = self._base(params)
            if self.match is None or self.match.fullmatch(base):
                if self.from_ is None:
                    result = base
                else:
                    result = self.from_.sub(self.to, base, count=0 if self.repeat else 1)
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingRule("Non-simple name %s after auth_to_local rule %s" % (result, self.text))
        if result is not None:
            if self.lower:
                result = result.lower()
            elif self.upper:
                result = result.upper()
        return result

    def __str__(self):
        return self.text


def parse_rules(default_realm, rules):
    """``rules``: a list of rule strings, or one comma-separated string (the config value). ValueError names
    the first invalid rule (Kafka: "Invalid rule: ..."), so a broker refuses to start with it."""
    if rules is None:
        rules = ["DEFAULT"]
    elif isinstance(rules, str):
        rules = [r.strip() for r in rules.split(",") if r.strip()]
    parsed = []
    for text in rules:
        m = _RULE.match(text)
        if m is None:
            raise ValueError("Invalid rule: %s" % text)
        if m.end() != len(text):
            raise ValueError("Invalid rule: `%s`, unmatched substring: `%s`" % (text, text[m.end():]))
        if m.group(2) is not None:
            parsed.append(Rule(default_realm, text, is_default=True))
            continue
        if not m.group(5):
            raise ValueError("Invalid rule: %s (no number of components in [n:format])" % text)
        try:
            parsed.append(Rule(default_realm, text, components=int(m.group(5)), fmt=m.group(6), match=m.group(8),
                               from_=m.group(10), to=m.group(11), repeat=m.group(12) == "g",
                               lower=m.group(13) == "L", upper=m.group(13) == "U"))
        except re.error as exc:
            raise ValueError("Invalid rule: %s (%s)" % (text, exc)) from None
    return parsed


class ShortNamer:
    """``sasl.kerberos.principal.to.local.rules`` for one default realm: ``short_name("alice@R") -> "alice"``
    or NoMatchingRule."""

    def __init__(self, default_realm, rules=None):
        self.default_realm = default_realm or ""
        self.rules = parse_rules(self.default_realm, rules)

    def short_name(self, principal):
        name = principal if isinstance(principal, KerberosName) else KerberosName.parse(principal)
        if name.host is None and name.realm is None:
            return name.service
        params = name.params()
        for rule in self.rules:
            try:
                result = rule.apply(params)
            except ValueError as exc:  # a replacement referring to a group the pattern lacks
                raise NoMatchingRule("rule %s: %s" % (rule, exc)) from None
            if result is not None:
                return result
        raise NoMatchingRule("No rules apply to %s, rules %s" % (name, [str(r) for r in self.rules]))
