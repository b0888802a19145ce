"""docs/operations.md and docs/upgrading.md cannot drift from the tools: every `bin/kbroker-admin <command> ...` line
of operations.md's sh blocks names an existing command and only options that command's --help lists, and every
`kbroker-admin <command>` the two documents name exists. (The commands themselves were run against a real cluster
when the documents were written; this keeps their names and options true afterwards, in about a second.)
"""
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from kbroker.cli import admin

REPO = Path(__file__).resolve().parents[2]
DOCS = {name: (REPO / "docs" / name).read_text() for name in ("operations.md", "upgrading.md")}
# Options a command takes without listing them in its --help: `configs --zookeeper` is routed to the ZooKeeper-mode
# modules before configs' own parser runs (kbroker/cli/admin.py).
UNLISTED = {("configs", "--zookeeper")}


def _help(argv):
    """What `kbroker-admin argv...` prints (stdout and stderr) and its exit status, run in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = admin.main(argv)
        except SystemExit as e:  # argparse's --help
            code = e.code
    return out.getvalue() + err.getvalue(), code


def admin_lines():
    """[(line, words)] for each bin/kbroker-admin command in operations.md's sh blocks (continuations joined)."""
    out = []
    for block in re.findall(r"^```sh\n(.*?)^```", DOCS["operations.md"], re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"\||&&|;|\$\(|`", line):
                try:
                    words = shlex.split(part, comments=True)
                except ValueError:
                    continue
                while words and words[0] in ("while", "until", "if", "!", "[", "-z"):
                    words = words[1:]
                if words and words[0] == "bin/kbroker-admin":
                    out.append((line.strip(), words[1:]))
    return out


def test_the_document_has_the_commands_this_test_is_about():
    commands = {words[0] for _, words in admin_lines()}
    assert {"topics", "configs", "consumer-groups", "reassign-partitions", "preferred-replica-election",
            "leader-election"} <= commands
    assert len(admin_lines()) >= 30


@pytest.mark.parametrize("line,words", admin_lines(), ids=lambda v: v if isinstance(v, str) else None)
def test_operations_command_and_options_exist(line, words):
    text, code = _help([words[0], "--help"])
    assert code == 0, text
    for option in (w.split("=", 1)[0] for w in words[1:] if w.startswith("--")):
        if (words[0], option) in UNLISTED:
            continue
        assert re.search(r"(^|[\s\[,])%s([\s\],=]|$)" % re.escape(option), text, re.M), \
            "%s: %s is not an option of kbroker-admin %s" % (line, option, words[0])


def test_every_named_admin_command_exists():
    listed, code = _help(["--help"])
    assert code == 0
    named = set()
    for text in DOCS.values():
        named |= set(re.findall(r"kbroker-admin ([a-z][a-z-]+)", text))
        # table cells: "`kbroker-admin delete-records`, `get-offsets`, ..." name further commands of the same tool
        for cell in re.findall(r"`kbroker-admin [a-z-]+`((?:, `[a-z-]+`)+)", text):
            named |= set(re.findall(r"`([a-z-]+)`", cell))
    assert {"topics", "dump-log", "get-offsets"} <= named
    for command in sorted(named):
        assert re.search(r"(^|[\s/])%s(\s|$)" % re.escape(command), listed, re.M), \
            "the docs name kbroker-admin %s, which --help does not list" % command
