"""sasl.kerberos.principal.to.local.rules: Kafka's documented examples and its KerberosName tests' cases."""
import pytest

from kbroker.security.kerberos import KerberosName, NoMatchingRule, ShortNamer, parse_rules


def test_name_parsing():
    n = KerberosName.parse("App.service-name/example.com@REALM.COM")
    assert (n.service, n.host, n.realm) == ("App.service-name", "example.com", "REALM.COM")
    n = KerberosName.parse("alice@REALM.COM")
    assert (n.service, n.host, n.realm) == ("alice", None, "REALM.COM")
    n = KerberosName.parse("bare")
    assert (n.service, n.host, n.realm) == ("bare", None, None)
    assert str(KerberosName.parse("kafka/localhost@KBROKER.TEST")) == "kafka/localhost@KBROKER.TEST"
    with pytest.raises(ValueError, match="Malformed Kerberos name"):
        KerberosName.parse("a@b@c")


def test_default_rule_strips_the_default_realm_only():
    namer = ShortNamer("KBROKER.TEST")  # rules None -> DEFAULT
    assert namer.short_name("client@KBROKER.TEST") == "client"
    assert namer.short_name("kafka/localhost@KBROKER.TEST") == "kafka"
    with pytest.raises(NoMatchingRule, match="No rules apply to client@OTHER.REALM"):
        namer.short_name("client@OTHER.REALM")
    # A name with no realm is its own short name (Kafka: no rule is consulted).
    assert namer.short_name("bare") == "bare"


def test_kafka_documentation_examples():
    # Kafka docs, "sasl.kerberos.principal.to.local.rules": username@MYDOMAIN.COM -> username, then /L and /U.
    namer = ShortNamer("OTHER.COM", ["RULE:[1:$1@$0](.*@MYDOMAIN.COM)s/@.*//", "DEFAULT"])
    assert namer.short_name("username@MYDOMAIN.COM") == "username"
    assert namer.short_name("other@OTHER.COM") == "other"
    lower = ShortNamer("OTHER.COM", "RULE:[1:$1@$0](.*@MYDOMAIN.COM)s/@.*///L,DEFAULT")
    assert lower.short_name("UserName@MYDOMAIN.COM") == "username"
    upper = ShortNamer("OTHER.COM", "RULE:[1:$1@$0](.*@MYDOMAIN.COM)s/@.*///U, DEFAULT")
    assert upper.short_name("UserName@MYDOMAIN.COM") == "USERNAME"


def test_kafka_kerberos_name_cases():
    # Kafka's KerberosNameTest.testParse.
    namer = ShortNamer("REALM.COM", [r"RULE:[1:$1](App\..*)s/App\.(.*)/$1/g", r"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g",
                                     "DEFAULT"])
    assert namer.short_name("App.service-name/example.com@REALM.COM") == "service-name"
    assert namer.short_name("App.service-name@REALM.COM") == "service-name"
    assert namer.short_name("user/host@REALM.COM") == "user"


@pytest.mark.parametrize("case, suffix, expect", [
    ("lower", "L", ["user", "test", "xyz_user_xyz", "service-name", "user"]),
    ("upper", "U", ["USER", "TEST", "XYZ_USER_XYZ", "SERVICE-NAME", "USER"]),
])
def test_case_conversion_kip309(case, suffix, expect):
    # Kafka's KerberosNameTest.testToLowerCase / testToUpperCase.
    rules = ["RULE:[1:$1]/" + suffix, "RULE:[2:$1](Test.*)s/ABC///" + suffix,
             "RULE:[2:$1](ABC.*)s/ABC/XYZ/g/" + suffix, r"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g/" + suffix,
             "RULE:[2:$1]/" + suffix, "DEFAULT"]
    namer = ShortNamer("REALM.COM", rules)
    names = ["User@REALM.COM", "TestABC/host@FOO.COM", "ABC_User_ABC/host@FOO.COM",
             "App.SERVICE-name/example.com@REALM.COM", "User/root@REALM.COM"]
    assert [namer.short_name(n) for n in names] == expect


def test_first_match_only_without_g():
    namer = ShortNamer("R", ["RULE:[1:$1](.*)s/a/b/"])
    assert namer.short_name("aaa@R") == "baa"
    namer = ShortNamer("R", ["RULE:[1:$1](.*)s/a/b/g"])
    assert namer.short_name("aaa@R") == "bbb"


def test_component_count_and_realm_parameter():
    namer = ShortNamer("R", ["RULE:[2:$1-$2-$0]"])
    assert namer.short_name("svc/host@X") == "svc-host-X"
    with pytest.raises(NoMatchingRule):
        namer.short_name("user@X")  # one component: the [2:...] rule does not apply, no other rule


def test_non_simple_result_is_refused():
    namer = ShortNamer("R", ["RULE:[1:$1@$0]", "DEFAULT"])
    with pytest.raises(NoMatchingRule, match="Non-simple name alice@R"):
        namer.short_name("alice@R")


def test_bad_parameter_index_is_refused():
    namer = ShortNamer("R", ["RULE:[1:$2]"])
    with pytest.raises(NoMatchingRule, match="outside of the valid range 0 to 1"):
        namer.short_name("alice@R")


@pytest.mark.parametrize("rule", [
    "RULE:[1:$1@$0](.*@EXAMPLE.COM)s/@.*/",        # no replacement part
    "RULE:[1:$1@$0](.*@EXAMPLE.COM)s/@.*",
    "RULE:[1:$1@$0](.*@EXAMPLE.COM)s/@.*//Z",      # neither L nor U
    "RULE:[1:$1@$0](.*@EXAMPLE.COM)s/@.*//LU",
    "RULE:[1:$1]junk",
    "RULE:[:$1]",                                  # no component count
    "RULE:[1:$1](a(b)s/x/y/",                      # unbalanced group in the match pattern
    "DEFAULTX",
    "nonsense",
])
def test_invalid_rules_are_refused_at_parse(rule):
    with pytest.raises(ValueError, match="Invalid rule"):
        parse_rules("R", [rule])


def test_java_replacement_syntax():
    # "$1" is a group, "\$" a literal dollar.
    namer = ShortNamer("R", [r"RULE:[1:$1](.*)s/(x+)/\$$1/"])
    assert namer.short_name("axxb@R") == "a$xxb"
