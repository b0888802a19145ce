"""docker/docker-compose.yml and docker/Dockerfile, checked structurally (no Docker engine runs here and the docker
client has no compose plugin, so `docker compose config` cannot be run): the compose file is the 3-node ensemble
and 3 brokers it claims to be, each broker's environment goes through the entrypoint's mapping to a configuration
kbroker accepts with no unknown or ineffective key, and the Dockerfile is multi-stage, builds the kernels as
required, runs as a non-root user and health-checks through the entrypoint.
"""
import importlib.util
import re
import shlex
from pathlib import Path

import pytest
import yaml

from kbroker.config import BrokerConfig
from kbroker.config.files import parse_listeners

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker" / "docker-compose.yml"
DOCKERFILE = REPO / "docker" / "Dockerfile"

_spec = importlib.util.spec_from_file_location("docker_entrypoint_files", REPO / "docker" / "entrypoint.py")
ep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ep)


@pytest.fixture(scope="module")
def compose():
    # PyYAML's safe_load resolves the << merge keys and anchors as compose does.
    return yaml.safe_load(COMPOSE.read_text())


def _zk(compose):
    return {n: s for n, s in compose["services"].items() if s["image"].startswith("zookeeper:")}


def _brokers(compose):
    return {n: s for n, s in compose["services"].items() if s["image"] == "kbroker:local"}


def test_compose_has_a_three_node_ensemble(compose):
    zk = _zk(compose)
    assert sorted(zk) == ["zk1", "zk2", "zk3"]
    servers = {}
    for name, svc in zk.items():
        env = svc["environment"]
        assert svc["hostname"] == name
        # server.N=host:quorum:election;client -- the same list on every node, N = the node's ZOO_MY_ID
        entries = dict(e.split("=", 1) for e in env["ZOO_SERVERS"].split())
        servers[name] = entries
        assert entries["server.%s" % env["ZOO_MY_ID"]].startswith(name + ":")
        assert "srvr" in env["ZOO_4LW_COMMANDS_WHITELIST"].split(",")
        assert svc["healthcheck"]["test"] == ["CMD", "zkServer.sh", "status"]
        assert any(v.endswith(":/data") for v in svc["volumes"])
    assert len({tuple(sorted(s.items())) for s in servers.values()}) == 1
    assert sorted(servers["zk1"]) == ["server.1", "server.2", "server.3"]
    assert sorted(s["environment"]["ZOO_MY_ID"] for s in zk.values()) == ["1", "2", "3"]


def test_compose_has_three_brokers_that_kbroker_accepts(compose, tmp_path):
    brokers = _brokers(compose)
    assert sorted(brokers) == ["kbroker1", "kbroker2", "kbroker3"]
    services = set(compose["services"])
    ids, host_ports = set(), []
    for name, svc in brokers.items():
        assert svc["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
        assert (COMPOSE.parent / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == DOCKERFILE
        assert set(svc["depends_on"]) == {"zk1", "zk2", "zk3"}
        assert all(d["condition"] == "service_healthy" for d in svc["depends_on"].values())
        env = {k: str(v) for k, v in svc["environment"].items()}
        props, notes, _ = ep.build_config(env)
        assert notes == []
        path = tmp_path / ("%s.properties" % name)
        path.write_text(ep.render_properties(props))
        cfg = BrokerConfig.from_sources(str(path))
        assert not cfg.unknown, cfg.unknown
        assert list(cfg.no_effect) == []
        ids.add(cfg["broker.id"])
        assert cfg["log.dirs"] == "/var/lib/kafka/data"
        assert any(v == "%s-data:/var/lib/kafka/data" % name for v in svc["volumes"])
        # the ZooKeeper hosts are the ensemble's services, at their client port
        hosts = cfg["zookeeper.connect"].split("/")[0].split(",")
        assert sorted(hosts) == ["zk1:2181", "zk2:2181", "zk3:2181"]
        assert set(h.split(":")[0] for h in hosts) <= services
        # INTERNAL is advertised under the service's own name; EXTERNAL's port is published as is
        adv = {l.name: l for l in parse_listeners("advertised.listeners", cfg["advertised.listeners"])}
        assert adv["INTERNAL"].host == name == svc["hostname"]
        assert cfg.inter_broker_listener == "INTERNAL"
        assert {l.name: (l.host, l.port) for l in cfg.listeners} == {
            "INTERNAL": ("0.0.0.0", adv["INTERNAL"].port), "EXTERNAL": ("0.0.0.0", adv["EXTERNAL"].port)}
        assert "%d:%d" % (adv["EXTERNAL"].port, adv["EXTERNAL"].port) in svc["ports"]
        assert "%d:9404" % (19404 + int(name[-1]) - 1) in svc["ports"]
        assert cfg["metrics.http.port"] == 9404
        host_ports += [p.split(":")[0] for p in svc["ports"]]
        # 3 replicas of everything, 2 in sync for acks=all: a cluster that survives one broker down
        assert (cfg["default.replication.factor"], cfg["min.insync.replicas"],
                cfg["offsets.topic.replication.factor"]) == (3, 2, 3)
    assert ids == {1, 2, 3}
    assert len(host_ports) == len(set(host_ports)) == 6


def test_compose_declares_every_named_volume(compose):
    used = {v.split(":")[0] for s in compose["services"].values() for v in s.get("volumes", [])}
    assert used == set(compose["volumes"])


# ---------------------------------------------------------------------------------------------------- Dockerfile

def _instructions():
    """[(INSTRUCTION, argument text)] of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(l for l in DOCKERFILE.read_text().splitlines()
                                           if not l.lstrip().startswith("#")))
    out = []
    for line in text.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_is_multi_stage_and_runs_as_non_root():
    ins = _instructions()
    froms = [i for i, (w, _) in enumerate(ins) if w == "FROM"]
    assert len(froms) == 2 and ins[froms[0]][1].endswith(" AS build")
    final = ins[froms[-1]:]
    users = [a for w, a in final if w == "USER"]
    assert users == ["appuser"]
    assert any(w == "RUN" and "useradd --uid 1000" in a for w, a in final)
    assert any(w == "COPY" and a.startswith("--from=build /opt/kbroker ") for w, a in final)
    # no compiler in the final image: gcc is installed in the build stage only
    assert not any("gcc" in a for w, a in final)


def test_dockerfile_builds_the_kernels_or_fails():
    build = " ".join(a for w, a in _instructions() if w == "RUN")
    assert "KBROKER_REQUIRE_NATIVE=1" in build and "pip wheel" in build
    assert "--require-hashes -r /tmp/runtime.txt" in build
    assert "assert n.IMPL == 'cython'" in build


def test_dockerfile_healthcheck_and_entrypoint_use_the_entrypoint():
    ins = dict((w, a) for w, a in _instructions() if w in ("HEALTHCHECK", "ENTRYPOINT"))
    assert ins["ENTRYPOINT"] == '["/opt/kbroker/bin/python", "/opt/kbroker/entrypoint.py"]'
    assert ins["HEALTHCHECK"].split(" CMD ")[1] == \
        '["/opt/kbroker/bin/python", "/opt/kbroker/entrypoint.py", "healthcheck"]'


def test_dockerfile_copies_only_what_the_dockerignore_lets_in():
    """Every COPY source exists and is not excluded by docker/Dockerfile.dockerignore (BuildKit's per-Dockerfile
    ignore file), so the build cannot fail for a missing file."""
    ignore = [l.strip() for l in (REPO / "docker" / "Dockerfile.dockerignore").read_text().splitlines()
              if l.strip() and not l.startswith("#")]
    assert ignore[0] == "*"
    allowed = [l[1:].rstrip("/") for l in ignore if l.startswith("!")]
    for w, a in _instructions():
        if w != "COPY" or a.startswith("--from="):
            continue
        for src in shlex.split(a)[:-1]:
            src = src.rstrip("/")
            assert (REPO / src).exists(), src
            assert any(src == p or src.startswith(p + "/") or
                       (src.startswith("requirements/") and src in allowed) for p in allowed), src
