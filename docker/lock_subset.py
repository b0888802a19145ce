"""Print the part of requirements/lock.txt that the image needs, hashes and markers kept (pip --require-hashes).

    python docker/lock_subset.py --runtime [LOCK [PYPROJECT]]   kbroker's [project] dependencies and everything they
                                                                 pull in: what the image's runtime venv installs
    python docker/lock_subset.py --build [LOCK [BUILD_IN]]       the build tools (requirements/build.in: pip,
                                                                 setuptools, wheel, Cython) that compile the kernels

requirements/lock.txt (scripts/lock.sh, uv) also pins the test extra (pytest, kafka-python, aiokafka, gssapi, ...),
which the image leaves out. The closure is read from uv's ``# via`` annotations: a pin belongs to the runtime set
when one of the packages it is "via" does, starting from the names in pyproject's ``[project] dependencies``.
"via kbroker (pyproject.toml)" does not say which extra asked, so the roots come from pyproject itself. A
package pinned twice (one pin per Python version, with markers) is kept with both pins; pip picks by marker.

Standard library only (tomllib: Python >= 3.11, the image's; `re` on 3.10).
"""
import re
import sys

_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==")


def canonical(name):
    """PEP 503 name: lower case, runs of -_. as one dash."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text):
    """[(name, block_text, parents)] per pin of a uv lock file: parents are the canonical names after "# via"
    ("-r file" and "kbroker (pyproject.toml)" entries are kept as written)."""
    entries = []
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = _NAME.match(block)
        if m is None:
            continue
        lines = block.rstrip("\n").split("\n")
        req = [l for l in lines if not l.lstrip().startswith("#")]
        parents = []
        for l in lines:
            s = l.strip()
            if s.startswith("# via "):
                parents.append(s[len("# via "):].strip())
            elif s.startswith("#   "):
                parents.append(s[len("#   "):].strip())
        parents = [p if " " in p or p.startswith("-r") else canonical(p) for p in parents]
        # The pin's last requirement line ends in "\" only because uv put the comments after it.
        if req and req[-1].rstrip().endswith("\\"):
            req[-1] = req[-1].rstrip()[:-1].rstrip()
        entries.append((canonical(m.group(1)), "\n".join(req), parents))
    return entries


def project_dependencies(pyproject_text):
    """Canonical names of pyproject.toml's [project] dependencies."""
    try:
        import tomllib
        deps = tomllib.loads(pyproject_text)["project"]["dependencies"]
    except ImportError:  # Python 3.10: the array is simple enough to read directly
        body = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", pyproject_text, re.S | re.M).group(1)
        deps = re.findall(r'"([^"]+)"', body)
    return {canonical(re.match(r"[A-Za-z0-9._-]+", d).group(0)) for d in deps}


def build_names(build_in_text):
    return {canonical(re.match(r"[A-Za-z0-9._-]+", l.strip()).group(0))
            for l in build_in_text.splitlines() if l.strip() and not l.lstrip().startswith("#")}


def closure(entries, roots):
    """The names reachable from `roots` through the lock's "via" edges (child kept when a parent is kept)."""
    keep = set(roots)
    changed = True
    while changed:
        changed = False
        for name, _, parents in entries:
            if name not in keep and any(p in keep for p in parents):
                keep.add(name)
                changed = True
    return keep


def subset(lock_text, names):
    """The lock's requirement blocks of `names`, in the lock's order, one pin a paragraph."""
    return "\n".join(block for name, block, _ in parse_lock(lock_text) if name in names) + "\n"


def main(argv):
    if not argv or argv[0] not in ("--runtime", "--build"):
        sys.stderr.write(__doc__)
        return 2
    lock = argv[1] if len(argv) > 1 else "requirements/lock.txt"
    with open(lock, encoding="utf-8") as f:
        lock_text = f.read()
    if argv[0] == "--runtime":
        with open(argv[2] if len(argv) > 2 else "pyproject.toml", encoding="utf-8") as f:
            roots = project_dependencies(f.read())
        names = closure(parse_lock(lock_text), roots)
    else:
        with open(argv[2] if len(argv) > 2 else "requirements/build.in", encoding="utf-8") as f:
            names = build_names(f.read())
    missing = names - {name for name, _, _ in parse_lock(lock_text)}
    if missing:
        sys.stderr.write("lock_subset: not pinned in %s: %s\n" % (lock, ", ".join(sorted(missing))))
        return 1
    sys.stdout.write(subset(lock_text, names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
