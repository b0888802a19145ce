"""The README's shell commands name programs that exist after setup, and the bin/ tools work.

Every ```sh block of README.md is read: each command of each line (pipelines split on `|`, comments dropped) must
start with `bash <existing script>`, `bin/<tool>` (an executable wrapper naming a console script of pyproject.toml,
which setup.sh installs into .venv), or a system program that setup.sh installs or the shell has. A bare
`kbroker-admin` (not on PATH in a new shell) fails here, so the README cannot drift from what works.
"""
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Programs the README may call by bare name: the shell's own, and what scripts/setup.sh apt-installs.
SYSTEM_PROGRAMS = {"printf": None, "echo": None, "cat": None, "export": None, "kcat": "kcat"}

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib


def readme_commands():
    """[(line, [words of one simple command])] for every command in the README's sh blocks."""
    text = (REPO / "README.md").read_text()
    out = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S):
        # A line ending in a backslash continues on the next one, as in the shell.
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            words, command = list(lexer), []
            for w in words + ["|"]:
                if w in ("|", "||", "&&", ";", "&"):
                    if command:
                        out.append((line, command))
                    command = []
                else:
                    command.append(w)
    return out


def console_scripts():
    return set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])


def test_readme_has_the_commands_this_test_is_about():
    programs = [cmd[0] for _, cmd in readme_commands()]
    assert programs.count("bash") >= 5  # run-broker.sh, test.sh, cluster.sh start/status/stop
    assert "bin/kbroker-admin" in programs and "bin/kbroker-console-producer" in programs


@pytest.mark.parametrize("line,command", readme_commands(), ids=lambda v: v if isinstance(v, str) else None)
def test_readme_command_names_a_program_that_exists(line, command):
    program = command[0]
    if program == "bash":
        script = REPO / command[1]
        assert script.is_file(), "%r: %s does not exist" % (line, command[1])
    elif program.startswith("bin/"):
        wrapper = REPO / program
        assert wrapper.is_file() and os.access(wrapper, os.X_OK), "%r: %s is not an executable file" % (line, program)
        assert wrapper.name in console_scripts(), "%r: %s is no console script of pyproject.toml" % (line, program)
    else:
        assert program in SYSTEM_PROGRAMS, (
            "%r: %s is neither `bash scripts/...`, `bin/...` nor a known system program (a bare kbroker tool is "
            "not on PATH in a new shell: write bin/%s)" % (line, program, program))
        package = SYSTEM_PROGRAMS[program]
        if package:
            assert re.search(r"want_pkg %s\b" % package, (REPO / "scripts" / "setup.sh").read_text())


def test_every_console_script_has_its_bin_wrapper():
    assert {p.name for p in (REPO / "bin").iterdir()} == console_scripts()


def _venv_tool(name):
    tool = REPO / ".venv" / "bin" / name
    if not tool.exists():
        pytest.skip("no %s (scripts/setup.sh makes it)" % tool)
    return tool


@pytest.mark.parametrize("name", sorted(console_scripts()))
def test_bin_wrapper_runs_the_venv_tool_from_any_directory(name, tmp_path):
    _venv_tool(name)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # a new shell: nothing activated, no pyenv
    res = subprocess.run([str(REPO / "bin" / name), "--help"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "usage:" in res.stdout


def test_server_version_names_version_kernels_and_python():
    _venv_tool("kbroker-server")
    res = subprocess.run([str(REPO / "bin" / "kbroker-server"), "--version"], env={"PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert re.fullmatch(r"kbroker-server 0\.1\.0 \(kernels: (cython|pure Python); Python 3\.\d+\.\d+\)\n", res.stdout)


def test_bin_wrapper_without_venv_says_to_run_setup(tmp_path):
    (tmp_path / "bin").mkdir()
    shutil.copy2(REPO / "bin" / "kbroker-admin", tmp_path / "bin" / "kbroker-admin")
    res = subprocess.run([str(tmp_path / "bin" / "kbroker-admin"), "--help"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 127
    assert "run 'bash scripts/setup.sh --python-only' in %s first" % tmp_path in res.stderr
