"""Write a server.properties that sets every Kafka 0.10.1 broker key to its documented default.

    python scripts/kafka_0101_defaults.py [/work/shared/reference/kafka-0.10.1-docs/generated/kafka_config.html]
        > tests/data/kafka-0.10.1-defaults.properties

Source: the broker config table of Kafka 0.10.1's documentation (generated/kafka_config.html: name, description,
type, default, valid values, importance). Rules, so the file is what Kafka itself would read as those defaults:
a ``null`` default is left out (unset); ``""`` is written as an empty value; a list ``[a, b]`` as ``a,b``; a class
default ``class x.Y`` as ``x.Y``; ``zookeeper.connect`` (no default: required) gets the shipped file's
``localhost:2181``. tests/unit/test_check_config.py runs ``kbroker-server --check-config`` on the result.
"""
import html
import re
import sys

DEFAULT_HTML = "/work/shared/reference/kafka-0.10.1-docs/generated/kafka_config.html"
_ROW = re.compile(r"<tr>\s*<td>(.*?)</td><td>.*?</td><td>(.*?)</td><td>(.*?)</td><td>.*?</td><td>.*?</td></tr>", re.S)


def properties(table_html):
    lines = ["# Every Kafka 0.10.1 broker key at its documented default (kafka_config.html of the 0.10.1 docs);",
             "# written by scripts/kafka_0101_defaults.py."]
    for name, type_, default in _ROW.findall(table_html):
        default = html.unescape(default).strip()
        if name == "zookeeper.connect":
            default = "localhost:2181"
        elif default == "null":
            continue
        elif default == '""':
            default = ""
        elif type_ == "list":
            default = ",".join(p.strip() for p in default.strip("[]").split(",") if p.strip())
        elif type_ == "class" and default.startswith("class "):
            default = default[len("class "):]
        lines.append("%s=%s" % (name, default))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_HTML, encoding="utf-8") as f:
        sys.stdout.write(properties(f.read()))
