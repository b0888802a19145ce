"""kbroker/security/principal.py: Java's RFC 2253 names of certificate subjects and ssl.principal.mapping.rules
(KIP-371) with Kafka's documented examples, its valid and invalid rules, and its error messages."""
import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from kbroker.security.principal import (ANONYMOUS, InvalidRules, NoMatchingRule, SslPrincipalMapper, certificate_dn,
                                        parse_rules, rfc2253)

# ssl.principal.mapping.rules as Kafka's documentation gives them (section "Customizing SSL User Name").
DOC_RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
             "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
             "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
             "DEFAULT")


def _name(*attrs, multi=None):
    rdns = [x509.RelativeDistinguishedName([x509.NameAttribute(oid, v)]) for oid, v in attrs]
    if multi:
        rdns.append(x509.RelativeDistinguishedName([x509.NameAttribute(oid, v) for oid, v in multi]))
    return x509.Name(rdns)


def _cert_der(subject):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(Encoding.DER)


# ------------------------------------------------------------------------------------------------ RFC 2253

def test_rfc2253_most_specific_first_with_javas_keywords():
    subject = _name((NameOID.COUNTRY_NAME, "US"), (NameOID.ORGANIZATION_NAME, "acme"),
                    (NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"), (NameOID.COMMON_NAME, "alice"))
    assert rfc2253(subject.public_bytes()) == "CN=alice,OU=eng,O=acme,C=US"
    assert certificate_dn(_cert_der(subject)) == "CN=alice,OU=eng,O=acme,C=US"


def test_rfc2253_other_keywords_and_unknown_oids_as_hex():
    subject = _name((NameOID.DOMAIN_COMPONENT, "example"), (NameOID.STATE_OR_PROVINCE_NAME, "CA"),
                    (NameOID.LOCALITY_NAME, "SF"), (NameOID.STREET_ADDRESS, "1 Main St"),
                    (NameOID.USER_ID, "u1"), (NameOID.EMAIL_ADDRESS, "a@b.c"), (NameOID.COMMON_NAME, "x"))
    # e-mail is an IA5String (tag 0x16) of 5 bytes: Java prints the DER value in hex after the dotted OID.
    assert rfc2253(subject.public_bytes()) == \
        "CN=x,1.2.840.113549.1.9.1=#16056140622e63,UID=u1,STREET=1 Main St,L=SF,ST=CA,DC=example"


def test_rfc2253_escaping_like_java():
    subject = _name((NameOID.COMMON_NAME, ' a,b=c+d<e>f#g;h"i\\j '))
    assert rfc2253(subject.public_bytes()) == 'CN=\\ a\\,b\\=c\\+d\\<e\\>f\\#g\\;h\\"i\\\\j\\ '
    assert rfc2253(_name((NameOID.COMMON_NAME, "#lead")).public_bytes()) == "CN=\\#lead"
    assert rfc2253(_name((NameOID.COMMON_NAME, "ünï")).public_bytes()) == "CN=ünï"


def test_rfc2253_multi_valued_rdn_joined_with_plus():
    subject = _name((NameOID.ORGANIZATION_NAME, "acme"),
                    multi=[(NameOID.COMMON_NAME, "bob"), (NameOID.USER_ID, "7")])
    got = rfc2253(subject.public_bytes())
    # DER sorts a SET's members by encoding; Java prints them in that (encoded) order.
    assert got in ("CN=bob+UID=7,O=acme", "UID=7+CN=bob,O=acme")
    assert got.endswith(",O=acme")


def test_rfc2253_refuses_garbage():
    for bad in (b"", b"\x30", b"\x31\x00", b"\x30\x05\x31\x03\x30\x01\x06"):
        with pytest.raises(ValueError):
            rfc2253(bad)


# ---------------------------------------------------------------------------------------------- mapping rules

def test_documented_examples():
    m = SslPrincipalMapper(DOC_RULES)
    assert m.name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "serviceuser"
    assert m.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "adminuser@admin"
    assert m.name("OU=Foo,CN=kafka-Client.1") == "kafka"  # third rule, lower-cased ([a-zA-Z0-9.]* stops at '-')
    assert m.name("O=nothing") == "O=nothing"               # DEFAULT


def test_kafka_mapper_cases():
    # The cases of Kafka's SslPrincipalMapperTest.testSslPrincipalMapper.
    rules = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, "
             "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, "
             "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, "
             "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, "
             "DEFAULT")
    m = SslPrincipalMapper(rules)
    assert m.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert m.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert m.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert m.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert m.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_comma_with_whitespace_and_escaped_commas():
    m = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert m.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_escaped_slash_in_pattern_and_replacement():
    m = SslPrincipalMapper("RULE:^CN=(.*?)\\/(.*?),.*$/$1\\/$2/")
    assert m.name("CN=a/b,O=x") == "a/b"


def test_back_references_past_the_group_count_are_literal():
    m = SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?)$/$1@$3 costs $12/")
    # $3 names no group (2 groups): literal; $12 cuts back to $1 followed by a literal 2.
    assert m.name("CN=alice,OU=eng") == "alice@$3 costs alice2"


def test_no_rule_applies():
    m = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule, match=r"^No rules apply to CN=x,OU=y, rules \[RULE:"):
        m.name("CN=x,OU=y")


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,",
    "",
])
def test_valid_rules(rules):
    parse_rules(rules)


@pytest.mark.parametrize("rules, message", [
    ("default", "Invalid rule: `default`, unmatched substring: `default`"),
    ("DEFAUL", "Invalid rule: `DEFAUL`, unmatched substring: `DEFAUL`"),
    ("DEFAULT/L", "Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"),
    ("DEFAULT/U", "Invalid rule: `DEFAULT/U`, unmatched substring: `/U`"),
    ("RULE:CN=(.*?),OU=ServiceUsers.*/$1", "Invalid rule: `RULE:CN=(.*?)`, unmatched substring: `RULE:CN=(.*?)`"),
    ("rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "Invalid rule: `rule:^CN=(.*?)`"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U", "unmatched substring: `/U`"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "Invalid rule: `RULE:^CN=(.*?)`"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/U", "Invalid rule: `RULE:^CN=(.*?)`"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/LU", "Invalid rule: `RULE:^CN=(.*?)`"),
])
def test_invalid_rules(rules, message):
    with pytest.raises(InvalidRules) as e:
        parse_rules(rules)
    assert message in str(e.value)


def test_pattern_that_does_not_compile():
    with pytest.raises(InvalidRules, match="does not compile"):
        parse_rules("RULE:^CN=(.*?/$1/")


def test_rule_repr_round_trips():
    rules = parse_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT")
    assert repr(rules) == "[RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT]"


def test_principal_of_a_certificate():
    subject = _name((NameOID.ORGANIZATION_NAME, "acme"), (NameOID.COMMON_NAME, "alice"))
    der = _cert_der(subject)
    assert SslPrincipalMapper().principal(der) == "User:CN=alice,O=acme"
    assert SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1/U").principal(der) == "User:ALICE"
    assert SslPrincipalMapper().principal(None) == ANONYMOUS == "User:ANONYMOUS"
