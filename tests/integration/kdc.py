"""A throwaway MIT Kerberos KDC for the GSSAPI tests (Debian's `krb5-kdc` + `krb5-admin-server` packages).

Layout of its directory (`tmpdir`), nothing outside it is read or written (the environment variables below point
every MIT tool and library at it, so /etc/krb5.conf and /etc/krb5kdc are never touched):
    kdc.conf            the KDC's profile (KRB5_KDC_PROFILE): realm, database, stash, listen addresses
    krb5.conf           the clients' profile (KRB5_CONFIG, and `-Djava.security.krb5.conf` for Java): the realm's
                        KDC at 127.0.0.1:<port>, TCP only (`udp_preference_limit = 1`; Java honours it too), no DNS
                        canonicalisation or reverse lookups (the service principal is exactly `kafka/localhost`)
    principal*, stash   the database `kdb5_util create -s` made (random master password)
    <name>.keytab       one keytab per principal created with `add_principal(..., keytab=True)` (`ktadd -norandkey`
                        is not used: `addprinc -randkey` + `ktadd` gives the keytab the only valid keys)
    kdc.log             krb5kdc's own log (its stderr goes to kdc.stderr)

The KDC runs as `krb5kdc -n` (foreground, no fork) as a child process on a free port on 127.0.0.1, UDP and TCP.
Readiness: a `kinit -k -t` for a keytab principal succeeds (the KDC answered an AS request), bounded.

`KDC.env()` gives the environment a Kerberos client needs (KRB5_CONFIG, and a private credential cache per caller).
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

from tests.integration.harness import HarnessError, free_port, tail, wait_until

REALM = "KBROKER.TEST"
SBIN = ("/usr/sbin", "/usr/bin")


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in SBIN:
        candidate = os.path.join(d, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def missing_tools() -> list[str]:
    """The MIT Kerberos programs this fixture needs that are not installed (scripts/setup.sh installs them)."""
    return [t for t in ("krb5kdc", "kdb5_util", "kadmin.local", "kinit") if _tool(t) is None]


class KDC:
    """One MIT KDC for realm `realm` under `tmpdir`. start(), add_principal(), keytab(), env(), stop()."""

    def __init__(self, tmpdir, realm: str = REALM):
        self.dir = Path(tmpdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.realm = realm
        self.port = free_port()
        self.kdc_conf = self.dir / "kdc.conf"
        self.krb5_conf = self.dir / "krb5.conf"
        self.log_path = self.dir / "kdc.log"
        self.stderr_path = self.dir / "kdc.stderr"
        self.proc: subprocess.Popen | None = None

    # -- configuration
    def _write_configs(self) -> None:
        d = self.dir
        self.kdc_conf.write_text(f"""\
[kdcdefaults]
    kdc_listen = 127.0.0.1:{self.port}
    kdc_tcp_listen = 127.0.0.1:{self.port}

[realms]
    {self.realm} = {{
        database_name = {d}/principal
        key_stash_file = {d}/stash
        acl_file = {d}/kadm5.acl
        kdc_listen = 127.0.0.1:{self.port}
        kdc_tcp_listen = 127.0.0.1:{self.port}
        max_life = 1h
        max_renewable_life = 1h
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{self.log_path}
    admin_server = FILE:{d}/kadmin.log
    default = FILE:{d}/krb5lib.log
""")
        self.dir.joinpath("kadm5.acl").write_text("")
        self.krb5_conf.write_text(f"""\
[libdefaults]
    default_realm = {self.realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    forwardable = false

[realms]
    {self.realm} = {{
        kdc = 127.0.0.1:{self.port}
    }}

[domain_realm]
    localhost = {self.realm}
    .localhost = {self.realm}
""")

    def env(self, ccache: str | os.PathLike | None = None) -> dict:
        """Variables that point MIT Kerberos (library and tools) at this realm only. `ccache`: a private
        credential cache file (default: one under this KDC's directory)."""
        return {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.kdc_conf),
            "KRB5CCNAME": f"FILE:{ccache or self.dir / 'ccache'}",
            # A keytab-less default (the library would otherwise look at /etc/krb5.keytab).
            "KRB5_KTNAME": f"FILE:{self.dir / 'default.keytab'}",
            # Acceptors' replay caches here, not in /var/tmp.
            "KRB5RCACHEDIR": str(self.dir),
        }

    def _run(self, *argv: str, timeout: float = 60.0) -> str:
        env = dict(os.environ)
        env.update(self.env())
        done = subprocess.run(list(argv), env=env, cwd=self.dir, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise HarnessError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    # -- lifecycle
    def start(self, timeout: float = 30.0) -> "KDC":
        missing = missing_tools()
        if missing:
            raise HarnessError(f"MIT Kerberos tools missing: {missing} (scripts/setup.sh installs krb5-kdc, "
                               "krb5-admin-server, krb5-user)")
        self._write_configs()
        # -s: write the stash file so krb5kdc starts without asking for the master password.
        self._run(_tool("kdb5_util"), "-r", self.realm, "-P", secrets.token_hex(16), "create", "-s")
        env = dict(os.environ)
        env.update(self.env())
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen([_tool("krb5kdc"), "-n", "-r", self.realm], env=env, cwd=self.dir,
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        # A probe principal: the KDC is up when it hands out a ticket for it.
        try:
            probe = self.add_principal("kdcprobe")
        except BaseException:
            self.stop()
            raise
        ccache = self.dir / "probe.ccache"

        def answers():
            if self.proc.poll() is not None:
                raise HarnessError(f"krb5kdc exited with code {self.proc.returncode}:\n"
                                   f"{tail(self.stderr_path, 30)}\n{tail(self.log_path, 30)}")
            env2 = dict(env)
            env2["KRB5CCNAME"] = f"FILE:{ccache}"
            return subprocess.run([_tool("kinit"), "-k", "-t", str(probe), f"kdcprobe@{self.realm}"], env=env2,
                                  capture_output=True, timeout=10).returncode == 0

        try:
            wait_until(answers, timeout, 0.1, f"krb5kdc on 127.0.0.1:{self.port} to issue a ticket")
        except BaseException:
            self.stop()
            raise
        return self

    def add_principal(self, name: str, keytab: bool = True) -> Path | None:
        """Create `name@realm` with a random key; with `keytab`, export its keys to `<dir>/<safe name>.keytab`
        and return that path."""
        self._run(_tool("kadmin.local"), "-r", self.realm, "-q", f"addprinc -randkey {name}@{self.realm}")
        if not keytab:
            return None
        path = self.keytab(name)
        self._run(_tool("kadmin.local"), "-r", self.realm, "-q", f"ktadd -k {path} {name}@{self.realm}")
        return path

    def keytab(self, name: str) -> Path:
        return self.dir / (name.replace("/", "_").replace("@", "_") + ".keytab")

    def principal(self, name: str) -> str:
        return f"{name}@{self.realm}"

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def __enter__(self):
        return self.start() if self.proc is None else self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        state = "running" if self.proc is not None and self.proc.poll() is None else "stopped"
        return f"<KDC {self.realm} 127.0.0.1:{self.port} {state} dir={self.dir}>"
