"""The server processes the bench scripts start (berth, Distribution, nginx): each in its own session
with its output in a log file, ready once a GET answers 200, stopped with SIGTERM and then SIGKILL;
and the configuration file of a Distribution (Debian's docker-registry) on loopback."""

import json
import os
import signal
import subprocess
import time
import urllib.request


class ServerProcess:
    """The process side of a server; a subclass writes its configuration, picks the command and
    says where its log is (log_tail)."""

    proc = None
    logfile = None

    def launch(self, cmd, log_path, append=False, stdin=None):
        """Starts cmd in its own session (so a SIGKILL reaches its workers too), stdout and stderr
        into log_path (appended to with append: a log that spans restarts)."""
        self.logfile = open(log_path, "ab" if append else "wb")
        self.proc = subprocess.Popen(cmd, stdin=stdin, stdout=self.logfile, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait_ready(self, url, label, context=None, timeout=30):
        """Polls url until it answers 200; RuntimeError, naming label and the log's tail, when the
        process exits first or timeout seconds pass."""
        deadline = time.time() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{label} exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2, context=context) as r:
                    if r.status == 200:
                        break
            except Exception:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"{label} did not become ready: {self.log_tail()}")
            time.sleep(0.05)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, timeout):
        """SIGTERM, SIGKILL to the whole session after timeout seconds; closes the log file."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    self.proc.kill()
                self.proc.wait()
        if self.logfile:
            self.logfile.close()
            self.logfile = None

    def log_tail(self):
        raise NotImplementedError


def distribution_config(root, port, level, formatter=None, access_log=False, tls=None, proxy_url=None, s3=None):
    """A Distribution 2.8 configuration (YAML) serving root on 127.0.0.1:port: uploads never purged,
    deletes allowed; tls = (certificate, key) files; proxy_url makes it a pull-through cache; s3 (a
    dict of its S3 driver's parameters) puts the blobs in a bucket instead, redirects off."""
    lines = ["version: 0.1", "log:", f"  level: {level}"]
    if formatter:
        lines.append(f"  formatter: {formatter}")
    lines += ["  accesslog:", f"    disabled: {'false' if access_log else 'true'}", "storage:"]
    if s3:
        lines += ["  s3:"] + [f"    {key}: {json.dumps(value)}" for key, value in s3.items()]
        lines += ["  redirect:", "    disable: true"]
    else:
        lines += ["  filesystem:", f"    rootdirectory: {root}"]
    lines += ["  delete:", "    enabled: true",
              "  maintenance:", "    uploadpurging:", "      enabled: false",
              "http:", f"  addr: 127.0.0.1:{port}", "  secret: berth-bench-not-a-secret"]
    if tls:
        lines += ["  tls:", f"    certificate: {tls[0]}", f"    key: {tls[1]}"]
    if proxy_url:
        lines += ["proxy:", f"  remoteurl: {proxy_url}"]
    return "\n".join(lines) + "\n"
