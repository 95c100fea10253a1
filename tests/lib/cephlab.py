"""A real single-node Ceph for tests: one mon, one OSD (BlueStore on a sparse file) and radosgw
(S3), all on 127.0.0.1 with ports the lab picks, every file under one work directory, no
systemd, no mgr, no containers. Debian 12's packages (Ceph 16.2): ceph-mon ceph-osd radosgw
ceph-common, and python3-boto3 for the S3 client.

    lab = CephLab(workdir).start()       # 4-5 s on two cores; raises with the logs' tails
    lab.endpoint, lab.access_key, lab.secret_key, lab.region   # "http://127.0.0.1:PORT", ..., "us-east-1"
    lab.make_bucket("b"); lab.s3().put_object(Bucket="b", Key="k", Body=b"x")
    lab.kill("osd"); lab.restart("osd")  # also "radosgw"; freeze()/thaw() stop and continue one
    lab.list_multipart_uploads("b", "prefix/")
    lab.stop()                           # radosgw, osd, mon: TERM, then KILL after a deadline

Tests skip with cephlab.skip_reason() when the binaries are missing (BERTH_REQUIRE_CEPH=1 turns
that into an error). Every wait polls with a deadline. The daemons die with the test process
(PR_SET_PDEATHSIG) when it is killed before stop(). Logs are in WORKDIR/log: log_tails() for a
failure message.
"""

import ctypes
import http.client
import importlib.util
import json
import os
import random
import secrets
import shutil
import signal
import socket
import string
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from berthserver import poll
from distribution import port_bindable

__all__ = ["CephLab", "skip_reason", "PACKAGES", "REGION"]

PACKAGES = "ceph-mon ceph-osd radosgw ceph-common python3-boto3"
BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph", "ceph-authtool", "monmaptool")
REGION = "us-east-1"
MON, OSD, RGW = "mon.a", "osd.0", "client.rgw.lab"  # the daemons' Ceph names
ALIASES = {"mon": MON, "osd": OSD, "radosgw": RGW, "rgw": RGW, MON: MON, OSD: OSD, RGW: RGW}
STOP_ORDER = (RGW, OSD, MON)  # rgw hangs in shutdown without its OSD; the OSD tells the mon it goes
# radosgw keeps nothing of its own (all is in RADOS), so a KILL loses nothing; yet after an OSD
# restart its shutdown takes 5-9 s: it gets this long for TERM at most
RGW_STOP_DEADLINE = 3


def _which(binary):
    return shutil.which(binary) or next(
        (p for p in (f"/usr/bin/{binary}", f"/usr/sbin/{binary}") if os.access(p, os.X_OK)), None)


def skip_reason():
    """None when the lab can run here, else why not (for unittest.skipIf). With
    BERTH_REQUIRE_CEPH=1 a missing piece raises instead, so a CI run cannot skip silently."""
    missing = [b for b in BINARIES if not _which(b)]
    if importlib.util.find_spec("boto3") is None:
        missing.append(f"the Python module boto3 (for {sys.executable})")
    if not missing:
        return None
    reason = f"the Ceph lab needs {', '.join(missing)} (Debian: apt-get install {PACKAGES})"
    if os.environ.get("BERTH_REQUIRE_CEPH") == "1":
        raise RuntimeError(reason + "; BERTH_REQUIRE_CEPH=1 forbids skipping")
    return reason


def _port_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(v) for v in f.read().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999
    # below the ephemeral range (outgoing connections take those) and above the OSDs' 6800-7300
    return (10000, lo) if lo - 10000 >= 4096 else (hi + 1, 65536)


def _bindable(port):
    """Whether nothing holds the port, TIME_WAIT included (a fresh port for a fresh lab)."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _free_ports(n):
    """The first of n consecutive free loopback ports."""
    lo, hi = _port_range()
    for _ in range(500):
        p = random.randrange(lo, hi - n)
        if all(_bindable(p + i) for i in range(n)):
            return p
    raise RuntimeError("no free loopback port")


_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no daemon outlives a killed test


def _randstr(n, alphabet):
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _tail(path, lines):
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 64 * lines * 4))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class CephLab:
    """One single-node cluster in workdir (created if missing; its contents are the lab's)."""

    def __init__(self, workdir, osd_size=20 << 30, timeout=90, rgw_threads=32):
        self.dir = os.path.abspath(workdir)
        self.osd_size = osd_size  # apparent size of the sparse BlueStore file
        self.timeout = timeout  # seconds for each daemon to come up
        self.rgw_threads = rgw_threads
        self.conf = os.path.join(self.dir, "ceph.conf")
        self.log_dir = os.path.join(self.dir, "log")
        self.region = REGION
        self.access_key = _randstr(20, string.ascii_uppercase + string.digits)
        self.secret_key = _randstr(40, string.ascii_letters + string.digits)
        self.fsid = str(uuid.uuid4())
        self.mon_port = self.rgw_port = None
        self.procs = {}  # Ceph name -> Popen
        self.frozen = set()
        self.timings = {}  # phase -> seconds since start() began
        self._short_run_dir = None
        self._created = False
        self._mkfs = None  # the OSD's mkfs, while it runs
        self._osd_uuid = self._osd_secret = None
        self._s3 = None

    # ---- facts

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.rgw_port}"

    @property
    def run_dir(self):
        # admin sockets are unix sockets (108 bytes at most): a long workdir gets a short run dir
        if len(self.dir) + len("/run/client.rgw.lab.asok") < 100:
            return os.path.join(self.dir, "run")
        if self._short_run_dir is None:
            self._short_run_dir = tempfile.mkdtemp(prefix="cephlab-", dir="/tmp")
        return self._short_run_dir

    def pid(self, daemon):
        p = self.procs.get(ALIASES[daemon])
        return p.pid if p is not None and p.poll() is None else None

    def alive(self, daemon):
        return self.pid(daemon) is not None

    def rss(self):
        """{Ceph name: resident set size in bytes} of the running daemons."""
        out = {}
        for name, p in self.procs.items():
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    out[name] = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
            except (OSError, StopIteration):
                pass
        return out

    def log_tails(self, lines=20):
        """The last lines of every daemon's log and stdout, for a failure message."""
        parts = []
        for name in sorted(os.listdir(self.log_dir)) if os.path.isdir(self.log_dir) else ():
            text = _tail(os.path.join(self.log_dir, name), lines)
            if text:
                parts.append(f"--- {name}\n{text}")
        return "\n".join(parts)

    def aws_env(self):
        """Environment for the aws command line against the lab (pass --endpoint-url self.endpoint;
        Debian 12's aws 2.9 knows no AWS_ENDPOINT_URL): path-style, us-east-1, the lab's keys, no
        checksums that newer clients add by default (as s3() does)."""
        cfg = os.path.join(self.dir, "aws-config")
        with open(cfg, "w") as f:
            f.write(f"[default]\nregion = {REGION}\ns3 =\n    addressing_style = path\n")
        return dict(os.environ, AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=self.secret_key,
                    AWS_DEFAULT_REGION=REGION, AWS_CONFIG_FILE=cfg,
                    AWS_SHARED_CREDENTIALS_FILE=os.path.join(self.dir, "no-aws-credentials"),
                    AWS_EC2_METADATA_DISABLED="true", AWS_REQUEST_CHECKSUM_CALCULATION="when_required",
                    AWS_RESPONSE_CHECKSUM_VALIDATION="when_required", AWS_PAGER="")

    # ---- lifecycle

    def start(self):
        """Create the cluster (first call) or start what is not running; returns self once radosgw
        answers S3 with the lab's user. Raises RuntimeError with the logs' tails on failure, having
        stopped what it started."""
        reason = skip_reason()
        if reason:
            raise RuntimeError(reason)
        t0 = time.monotonic()
        self.timings = {}

        def mark(phase):
            self.timings[phase] = round(time.monotonic() - t0, 2)
        try:
            if not self._created:
                self._create()  # the OSD's mkfs runs on while the mon starts
                mark("created")
            self._start_daemon(MON)
            mark("mon up")
            if not os.path.exists(os.path.join(self.dir, "osd", ".created")):
                self._register_osd()
                mark("osd registered")
            self._start_daemon(OSD)
            mark("osd up")
            if not os.path.exists(os.path.join(self.dir, "rgw", ".user")):
                self._admin("user", "create", "--uid=lab", "--display-name=berth tests",
                            f"--access-key={self.access_key}", f"--secret={self.secret_key}")
                open(os.path.join(self.dir, "rgw", ".user"), "w").close()
                mark("user created")
            self._start_daemon(RGW)
            mark("radosgw up")
            if not os.path.exists(os.path.join(self.dir, "rgw", ".warm")):
                self._warm_up()
                open(os.path.join(self.dir, "rgw", ".warm"), "w").close()
                mark("pools warm")
        except BaseException as e:
            tails = self.log_tails()
            self.stop()
            if isinstance(e, (RuntimeError, AssertionError, subprocess.SubprocessError, OSError)):
                raise RuntimeError(f"Ceph lab did not start: {e}\n{tails}") from e
            raise
        mark("ready")
        return self

    def stop(self, deadline=10):
        """Stop every daemon (radosgw, osd, mon), each TERM then KILL after deadline seconds (3 s
        at most for radosgw); never hangs. Data stays in workdir: start() brings the same cluster back."""
        for name in STOP_ORDER:  # all at once: a frozen mon would hold up the OSD's shutdown by 5 s
            self.thaw(name)
        for name in STOP_ORDER:
            p = self.procs.get(name)
            if p is None:
                continue
            # radosgw waits forever in shutdown for an OSD that is gone: no point asking it
            hopeless = name == RGW and not (self.alive(OSD) and self.alive(MON) and not self.frozen & {OSD, MON})
            self._stop_proc(name, 0 if hopeless else self._deadline(name, deadline))
        if self._mkfs is not None and self._mkfs.poll() is None:
            self._mkfs.kill()
            self._mkfs.wait(10)
        for pid in self._stray_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._short_run_dir:
            shutil.rmtree(self._short_run_dir, ignore_errors=True)
            self._short_run_dir = None

    def cleanup(self):
        """stop() and remove workdir."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- faults

    def kill(self, daemon, sig=signal.SIGKILL):
        """Kill one daemon ("radosgw", "osd" or "mon") with sig and reap it."""
        name = ALIASES[daemon]
        p = self.procs.get(name)
        if p is None or p.poll() is not None:
            return
        p.send_signal(sig)
        if name in self.frozen and sig != signal.SIGKILL:
            p.send_signal(signal.SIGCONT)
        self.frozen.discard(name)
        try:
            p.wait(self.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)

    def freeze(self, daemon):
        """SIGSTOP: the daemon keeps its sockets open and answers nothing."""
        name = ALIASES[daemon]
        if not self.alive(name):
            raise RuntimeError(f"{name} is not running")
        self.procs[name].send_signal(signal.SIGSTOP)
        self.frozen.add(name)

    def thaw(self, daemon):
        """SIGCONT (a no-op on a daemon that is not frozen or not running)."""
        name = ALIASES[daemon]
        if self.alive(name):
            self.procs[name].send_signal(signal.SIGCONT)
        self.frozen.discard(name)

    def restart(self, daemon, deadline=10):
        """Stop the daemon if it runs (TERM, KILL after deadline; 3 s at most for radosgw), start
        it again on the same data, and return once it serves: radosgw answers HTTP on the same
        endpoint (another only if something else took the port meanwhile); the OSD is active and,
        with radosgw running, S3 requests go through it again."""
        name = ALIASES[daemon]
        if self.alive(name):
            self._stop_proc(name, self._deadline(name, deadline))
        self._start_daemon(name)
        if name == OSD and self.alive(RGW):
            poll(self._s3_works, self.timeout, 0.2, "S3 requests through the restarted OSD")
        return self

    # ---- S3

    def s3(self, retries=1, connect_timeout=5, read_timeout=30):
        """A boto3 S3 client on the lab: path-style, us-east-1, retries attempts in all."""
        import boto3
        from botocore.config import Config
        options = dict(s3={"addressing_style": "path"}, retries={"max_attempts": retries, "mode": "standard"},
                       connect_timeout=connect_timeout, read_timeout=read_timeout, signature_version="s3v4")
        # botocore >= 1.36 adds CRC checksums to every upload (aws-chunked trailers over HTTPS),
        # which radosgw 16 predates: send requests as the clients radosgw 16 was tested with
        try:
            config = Config(request_checksum_calculation="when_required",
                            response_checksum_validation="when_required", **options)
        except TypeError:  # Debian 12's botocore (1.29) knows neither option, nor adds checksums
            config = Config(**options)
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION, config=config,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key)

    def _client(self):
        if self._s3 is None:
            self._s3 = self.s3(retries=3)
        return self._s3

    def make_bucket(self, name):
        try:
            self._client().create_bucket(Bucket=name)
        except self._client().exceptions.BucketAlreadyOwnedByYou:
            pass
        return name

    def keys(self, bucket, prefix=""):
        """The keys of the objects in bucket under prefix, sorted."""
        out = []
        for page in self._client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def list_multipart_uploads(self, bucket, prefix=""):
        """[{"Key", "UploadId", "Initiated", ...}] of the multipart uploads in progress."""
        out = []
        for page in self._client().get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=prefix):
            out += page.get("Uploads", [])
        return out

    def status(self):
        """`ceph -s` as JSON (no mgr: no PG statistics, and HEALTH_WARN for the missing mgr)."""
        return json.loads(self._ceph("-s", "-f", "json"))

    # ---- creation

    def _conf_text(self):
        d, run = self.dir, self.run_dir
        return f"""# generated by tests/lib/cephlab.py: one node, loopback only
[global]
fsid = {self.fsid}
mon_initial_members = a
mon_host = [v2:127.0.0.1:{self.mon_port},v1:127.0.0.1:{self.mon_port + 1}]
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
public_network = 127.0.0.0/8
ms_bind_ipv4 = true
ms_bind_ipv6 = false
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
auth_allow_insecure_global_id_reclaim = false
run_dir = {run}
admin_socket = {run}/$name.asok
log_file = {d}/log/$name.log
mon_cluster_log_file = {d}/log/cluster.log
crash_dir = {d}/crash
keyring = {d}/keyring/$name.keyring
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
mon_max_pg_per_osd = 1000
ms_async_op_threads = 2
# radosgw's ops to a killed OSD wait for the objecter's tick to fetch the new osdmap: 5 s by
# default, which every S3 request after an OSD restart waited out
objecter_tick_interval = 0.5
debug_rocksdb = 1/5

[mon]
mon_data = {d}/mon
keyring = {d}/mon/keyring
# each pool radosgw creates is a paxos round: the default 1 s interval makes its start slow
paxos_propose_interval = 0.01
paxos_min_wait = 0.01
mon_data_avail_warn = 5
mon_data_avail_crit = 2
mon_memory_target = 268435456
rocksdb_cache_size = 33554432

[osd]
osd_data = {d}/osd
keyring = {d}/osd/keyring
osd_objectstore = bluestore
# bluestore_block_path stays EMPTY: mkfs then creates the regular (sparse) file osd/block of
# bluestore_block_size bytes; naming it makes mkfs symlink block to itself (ELOOP)
bluestore_block_size = {self.osd_size}
bluestore_block_create = true
osd_memory_target = 536870912
bluestore_cache_autotune = false
bluestore_cache_size = 67108864
bluestore_rocksdb_options = compression=kNoCompression,max_write_buffer_number=2,min_write_buffer_number_to_merge=1,recycle_log_file_num=2,write_buffer_size=33554432,writable_file_max_buffer_size=0,compaction_readahead_size=2097152,max_background_compactions=1,max_total_wal_size=268435456
osd_op_num_shards = 2
osd_op_num_threads_per_shard = 1
# the aio thread wakes every bdev_aio_poll_ms: each close of the block file (six in mkfs, three
# in a start) waits for it; 250 ms by default
bdev_aio_poll_ms = 20
bluestore_fsck_on_mkfs = false

[{RGW}]
rgw_frontends = beast endpoint=127.0.0.1:{self.rgw_port}
rgw_data = {d}/rgw
keyring = {d}/rgw/keyring
rgw_thread_pool_size = {self.rgw_threads}
rgw_dynamic_resharding = false
rgw_enable_usage_log = false
"""

    def _write_conf(self):
        with open(self.conf, "w") as f:
            f.write(self._conf_text())

    def _run(self, *args, timeout=60, input=None):
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, input=input,
                               stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{' '.join(args[:3])} ... did not finish within {timeout}s")
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited with {r.returncode}: {r.stderr[-2000:]}")
        return r.stdout

    def _ceph(self, *args, timeout=60, input=None):
        return self._run("ceph", "-c", self.conf, "--connect-timeout", "15", *args, timeout=timeout, input=input)

    def _admin(self, *args):
        return self._run("radosgw-admin", "-c", self.conf, "-n", "client.admin", *args)

    def _create(self):
        d = self.dir
        for sub in ("run", "log", "crash", "keyring", "mon", "osd", "rgw", "tmp"):
            shutil.rmtree(os.path.join(d, sub), ignore_errors=True)
            os.makedirs(os.path.join(d, sub))
        self.mon_port, self.rgw_port = _free_ports(2), _free_ports(1)
        self._write_conf()
        # the OSD's BlueStore first: its mkfs needs no mon (--no-mon-config) and takes longest
        self._osd_uuid = str(uuid.uuid4())
        self._osd_secret = self._run("ceph-authtool", "--gen-print-key").strip()
        self._run("ceph-authtool", f"{d}/osd/keyring", "--create-keyring", "-n", OSD, "--add-key", self._osd_secret)
        with open(os.path.join(self.log_dir, "osd.0.mkfs"), "wb") as out:
            self._mkfs = subprocess.Popen(["ceph-osd", "-c", self.conf, "-i", "0", "--mkfs", "--no-mon-config",
                                           "--osd-uuid", self._osd_uuid], stdin=subprocess.DEVNULL,
                                          stdout=out, stderr=out, start_new_session=True)
        k = os.path.join(d, "keyring")
        mon_keyring = f"{k}/mon.keyring"
        self._run("ceph-authtool", mon_keyring, "--create-keyring", "--gen-key", "-n", "mon.",
                  "--cap", "mon", "allow *")
        self._run("ceph-authtool", f"{k}/client.admin.keyring", "--create-keyring", "--gen-key", "-n", "client.admin",
                  "--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mgr", "allow *")
        self._run("ceph-authtool", f"{d}/rgw/keyring", "--create-keyring", "--gen-key", "-n", RGW,
                  "--cap", "mon", "allow rw", "--cap", "osd", "allow rwx")
        for other in (f"{k}/client.admin.keyring", f"{d}/rgw/keyring"):
            self._run("ceph-authtool", mon_keyring, "--import-keyring", other)
        monmap = f"{d}/tmp/monmap"
        self._run("monmaptool", "--create", "--fsid", self.fsid, "--enable-all-features", "--addv", "a",
                  f"[v2:127.0.0.1:{self.mon_port},v1:127.0.0.1:{self.mon_port + 1}]", monmap)
        self._run("ceph-mon", "-c", self.conf, "--mkfs", "-i", "a", "--monmap", monmap, "--keyring", mon_keyring)
        self._created = True

    def _register_osd(self):
        # osd.0 (its uuid and cephx key) into the osdmap and the auth database
        osd_id = self._ceph("osd", "new", self._osd_uuid, "0", "-i", "-", "-n", "client.admin",
                            input=json.dumps({"cephx_secret": self._osd_secret})).strip()
        if osd_id != "0":
            raise RuntimeError(f"ceph osd new answered {osd_id!r}")
        try:
            rc = self._mkfs.wait(self.timeout)
        except subprocess.TimeoutExpired:
            self._mkfs.kill()
            self._mkfs.wait(10)
            raise RuntimeError(f"ceph-osd --mkfs did not finish within {self.timeout}s")
        if rc != 0:
            mkfs_log = _tail(os.path.join(self.log_dir, "osd.0.mkfs"), 15)
            raise RuntimeError(f"ceph-osd --mkfs exited with {rc}:\n{mkfs_log}")
        open(os.path.join(self.dir, "osd", ".created"), "w").close()

    def _warm_up(self):
        """Let radosgw create its bucket index, data and multipart pools now (a paxos round and
        PG creation each), not during a test's first transfer."""
        s3, bucket = self._client(), "cephlab-warm-up"
        self.make_bucket(bucket)
        s3.put_object(Bucket=bucket, Key="k", Body=b"warm")
        s3.delete_object(Bucket=bucket, Key="k")
        up = s3.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
        s3.abort_multipart_upload(Bucket=bucket, Key="m", UploadId=up)
        s3.delete_bucket(Bucket=bucket)

    # ---- daemons

    def _argv(self, name):
        if name == MON:
            return ["ceph-mon", "-i", "a"]
        if name == OSD:
            return ["ceph-osd", "-i", "0"]
        return ["radosgw", "-n", RGW]

    def _start_daemon(self, name):
        if self.alive(name):
            return
        os.makedirs(self.run_dir, exist_ok=True)
        for attempt in range(3):
            if name == RGW and attempt > 0 and not port_bindable(self.rgw_port):
                self.rgw_port = _free_ports(1)  # taken while radosgw was down (it exits 98): move
                self._write_conf()
                self._s3 = None
            with open(os.path.join(self.log_dir, f"{name}.stdout"), "ab") as out:
                # PR_SET_PDEATHSIG fires when the starting *thread* ends: only from the main thread
                main = threading.current_thread() is threading.main_thread()
                kwargs = {"preexec_fn": _die_with_parent} if main else {}
                self.procs[name] = subprocess.Popen(
                    self._argv(name) + ["-c", self.conf, "-f"], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                    start_new_session=True, **kwargs)
            self.frozen.discard(name)
            try:
                poll(lambda: self._ready(name), self.timeout, 0.1, f"{name} to serve")
                return
            except RuntimeError:  # exited: radosgw whose port was taken gets another
                if name != RGW or attempt == 2:
                    raise
            except AssertionError as e:
                self._stop_proc(name, 0)
                raise RuntimeError(str(e))

    def _ready(self, name):
        p = self.procs[name]
        if p.poll() is not None:
            log = os.path.join(self.log_dir, name)
            raise RuntimeError(f"{name} exited with {p.returncode}:\n{_tail(log + '.log', 15)}\n"
                               f"{_tail(log + '.stdout', 5)}")
        if name == MON:
            return self._asok(MON, "mon_status").get("state") == "leader"
        if name == OSD:  # asked of the OSD itself: after a kill the osdmap may still say "up"
            return self._asok(OSD, "status").get("state") == "active"
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.rgw_port, timeout=2)
            c.request("GET", "/")
            c.getresponse().read()
            c.close()
            return True
        except (OSError, http.client.HTTPException):
            return False

    def _asok(self, name, prefix):
        """A command on the daemon's admin socket (what `ceph daemon` does), {} if it does not answer."""
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(os.path.join(self.run_dir, f"{name}.asok"))
                s.sendall(json.dumps({"prefix": prefix}).encode() + b"\0")
                data = b""
                while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
                    chunk = s.recv(65536)
                    if not chunk:
                        return {}
                    data += chunk
            return json.loads(data[4:])
        except (OSError, ValueError):
            return {}

    def _s3_works(self):
        try:
            self.s3(retries=1, connect_timeout=2, read_timeout=3).list_buckets()
            return True
        except Exception:
            return False

    @staticmethod
    def _deadline(name, deadline):
        return min(deadline, RGW_STOP_DEADLINE) if name == RGW else deadline

    def _stop_proc(self, name, deadline):
        p = self.procs.get(name)
        if p is None:
            return
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)  # a frozen daemon cannot act on TERM
            self.frozen.discard(name)
            if deadline > 0:
                p.terminate()
                try:
                    p.wait(deadline)
                except subprocess.TimeoutExpired:
                    pass
            if p.poll() is None:
                p.kill()
                p.wait(10)

    def _stray_pids(self):
        """Daemons started with this lab's ceph.conf but not known to this object (a lost Popen)."""
        known = {p.pid for p in self.procs.values() if p.poll() is None}
        out = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            if (os.path.basename(argv[0]) in ("ceph-mon", "ceph-osd", "radosgw") and int(pid) not in known
                    and any(argv[i] == "-c" and argv[i + 1] == self.conf for i in range(len(argv) - 1))):
                out.append(int(pid))
        return out


def lab_for_class(cls, bucket, **s3_args):
    """A started lab for a test class, removed after its last test, with `bucket` made:
    sets cls.lab and cls.s3 (a boto3 client, s3_args as CephLab.s3's)."""
    cls.lab = CephLab(tempfile.mkdtemp(prefix="berth-ceph-"))
    cls.addClassCleanup(cls.lab.cleanup)
    cls.lab.start()
    cls.lab.make_bucket(bucket)
    cls.s3 = cls.lab.s3(**s3_args)
