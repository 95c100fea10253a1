"""A real OpenLDAP server (Debian's slapd) for tests: its own config, database and TLS
certificate in a temp dir, listening on loopback ports for ldap:// (StartTLS) and ldaps://.

    d = Slapd(tmp, ca_cert, ca_key)
    d.add_user("alice", "alice-pw"); d.add_group("pushers", ["alice"]); d.start()
    d.url, d.ldaps_url, d.stop(), d.start(), d.freeze(), d.thaw()
"""

import os
import shutil
import signal
import socket
import subprocess

from berthauth import make_cert
from berthserver import free_port, poll

SUFFIX = "dc=example,dc=org"
SERVICE_DN = f"cn=berth,{SUFFIX}"
SCHEMAS = ("core", "cosine", "nis", "inetorgperson")


def available():
    return shutil.which("slapd") or os.path.exists("/usr/sbin/slapd")


def _hash(password):
    return subprocess.run(["slappasswd", "-s", password], check=True, capture_output=True,
                          text=True).stdout.strip()


class Slapd:
    def __init__(self, directory, ca_cert, ca_key, service_password="berth-search-pw"):
        self.dir = os.path.join(directory, "slapd")
        os.makedirs(os.path.join(self.dir, "db"))
        self.cert, self.key = make_cert(self.dir, "ldap", ca_cert, ca_key, cn="127.0.0.1")
        self.service_password = service_password
        self.port, self.ldaps_port = free_port(), free_port()
        self.entries = [
            f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n",
            f"dn: ou=people,{SUFFIX}\nobjectClass: organizationalUnit\nou: people\n",
            f"dn: ou=groups,{SUFFIX}\nobjectClass: organizationalUnit\nou: groups\n",
            f"dn: {SERVICE_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n"
            f"cn: berth\nuserPassword: {_hash(service_password)}\n",
        ]
        self.proc = None
        self.loaded = False

    @property
    def url(self):
        return f"ldap://127.0.0.1:{self.port}"

    @property
    def ldaps_url(self):
        return f"ldaps://127.0.0.1:{self.ldaps_port}"

    def user_dn(self, uid):
        return f"uid={uid},ou=people,{SUFFIX}"

    def add_user(self, uid, password, disabled=False):
        self.entries.append(
            f"dn: {self.user_dn(uid)}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n"
            f"userPassword: {_hash(password)}\n" + ("employeeType: disabled\n" if disabled else ""))

    def add_group(self, cn, members):
        self.entries.append(f"dn: cn={cn},ou=groups,{SUFFIX}\nobjectClass: groupOfNames\ncn: {cn}\n" +
                            "".join(f"member: {self.user_dn(m)}\n" for m in members))

    def _write_config(self):
        conf = os.path.join(self.dir, "slapd.conf")
        with open(conf, "w") as f:
            f.write("".join(f"include /etc/ldap/schema/{s}.schema\n" for s in SCHEMAS))
            f.write(f"pidfile {self.dir}/slapd.pid\nmodulepath /usr/lib/ldap\nmoduleload back_mdb\n"
                    f"TLSCertificateFile {self.cert}\nTLSCertificateKeyFile {self.key}\n"
                    # Users bind with their password; only the searching account reads entries.
                    f"database mdb\nsuffix \"{SUFFIX}\"\nrootdn \"cn=admin,{SUFFIX}\"\n"
                    f"directory {self.dir}/db\n"
                    "access to attrs=userPassword by anonymous auth by * none\n"
                    f"access to * by dn.exact=\"{SERVICE_DN}\" read by self read by * none\n")
        return conf

    def start(self):
        conf = self._write_config()
        if not self.loaded:
            ldif = os.path.join(self.dir, "data.ldif")
            with open(ldif, "w") as f:
                f.write("\n".join(self.entries))
            subprocess.run(["slapadd", "-f", conf, "-l", ldif], check=True, capture_output=True)
            self.loaded = True
        log = open(os.path.join(self.dir, "slapd.log"), "ab")
        # -d 0: stay in the foreground (so the test owns the process), log nothing.
        self.proc = subprocess.Popen(
            ["slapd", "-d", "0", "-f", conf, "-h", f"ldap://127.0.0.1:{self.port}/ ldaps://127.0.0.1:{self.ldaps_port}/"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        poll(self._listening, 20, what="slapd listening")
        return self

    def _listening(self):
        if self.proc.poll() is not None:
            with open(os.path.join(self.dir, "slapd.log")) as f:
                raise AssertionError(f"slapd exited with {self.proc.returncode}: {f.read()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", self.port), 0.5).close()
            return True
        except OSError:
            return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.thaw()
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def freeze(self):
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self):
        self.proc.send_signal(signal.SIGCONT)
