#!/usr/bin/env python3
"""Power loss: what an acknowledged push leaves on the disk, not only in the page cache.

berth runs on an ext4 file system of its own, on a loop device over a file. Several clients
push images without pause. Once each has five acknowledged (201), berth is frozen mid-push
(SIGSTOP, every thread stopped) and the device's file copied: that copy holds what the file
system had sent to the device and nothing that was still in the page cache, as a power cut would
leave the disk. Every answer a client had read by then was sent before the cut, the last ones
just before it, with nothing after them to sync for them. The copy is mounted (ext4 replays its
journal) and served by a new berth, which must serve every image acknowledged before the cut
whole: manifest by tag, every blob's bytes.

Nothing else may write the device before the copy: the file system is mounted with commit=600
(no timed journal commit; without a journal there is none) and the test lasts far less than
the kernel's 30 s dirty-page expiry, so only what berth made durable itself (fsync, fdatasync)
reaches the device. Nothing else here may call sync(2) meanwhile. A control run
under eatmydata (fsync and fdatasync do nothing) must lose acknowledged images in the same
setting: the test tells durable from not.

Both with ext4's journal and without one (as on this project's CI machines), where the cut file
system is checked (e2fsck -y) before it is mounted.

Root and loop devices are needed (mkfs.ext4, losetup, mount); skipped without them.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

EATMYDATA = "/usr/lib/x86_64-linux-gnu/libeatmydata.so"
CLIENTS = 4
IMAGES_PER_CLIENT = 5  # at least, each, before the cut
LAYERS = (1000, 70_000, 300_000)  # below, across and beyond one 64 KiB TCP segment; config too


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (loop devices, mount)"
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if not shutil.which(tool):
            return f"{tool} is missing (util-linux, e2fsprogs)"
    if not os.path.exists("/dev/loop-control"):
        return "no loop device support (/dev/loop-control)"
    with tempfile.NamedTemporaryFile() as probe:  # root in a container may still be refused one
        probe.truncate(1 << 20)
        done = subprocess.run(["losetup", "--find", "--show", probe.name], capture_output=True, text=True,
                              timeout=60)
        if done.returncode:
            return f"no loop device could be set up: {done.stderr.strip()}"
        subprocess.run(["losetup", "-d", done.stdout.strip()], capture_output=True, timeout=60)
    return None


def uses_asan():
    done = subprocess.run(["ldd", bt.BIN], capture_output=True, text=True, timeout=60)
    return "libasan" in done.stdout


def run(*args):
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise AssertionError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr[-2000:]}")


class LoopDisk:
    """A file as a block device, with an ext4 file system mounted on it. Without a journal, a file
    system found after a power cut is checked first (e2fsck -y), as a boot would."""

    def __init__(self, image, mountpoint, journal, make=False):
        if make:
            with open(image, "wb") as f:
                f.truncate(128 << 20)
        self.device = subprocess.run(["losetup", "--find", "--show", image], check=True, capture_output=True,
                                     text=True, timeout=60).stdout.strip()
        try:
            if make:
                run("mkfs.ext4", "-q", "-F", *([] if journal else ["-O", "^has_journal"]), self.device)
            elif not journal:
                # 0: clean, 1: errors corrected; anything else is a file system e2fsck could not mend.
                fsck = subprocess.run(["e2fsck", "-fy", self.device], capture_output=True, text=True, timeout=120)
                if fsck.returncode not in (0, 1):
                    raise AssertionError(f"e2fsck after the cut: {fsck.returncode} {fsck.stdout[-2000:]}")
            os.makedirs(mountpoint, exist_ok=True)
            run("mount", *(["-o", "commit=600"] if journal else []), self.device, mountpoint)
        finally:
            # Mounted, the device now goes with the mount (autoclear), however this test ends.
            subprocess.run(["losetup", "-d", self.device], capture_output=True, timeout=60)
        self.mountpoint = mountpoint

    def remove(self):
        if self.mountpoint:
            subprocess.run(["umount", "-l", self.mountpoint], capture_output=True, timeout=120)
            self.mountpoint = None


def frozen(pid):
    """Every thread of pid stopped: none is inside a system call any more."""
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "T":
                    return False
        return True
    except OSError:
        return False


@unittest.skipIf(skip_reason(), skip_reason())
class PowerLoss(unittest.TestCase):
    journal = True  # ext4 as mkfs makes it; without, every inode and folder reaches the disk on its own

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-power-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def disk(self, name, make=False, image=None):
        d = LoopDisk(image or os.path.join(self.tmp, name + ".img"), os.path.join(self.tmp, name), self.journal, make)
        self.addCleanup(d.remove)
        return d

    def berth(self, root, env=None):
        b = bt.Berth(root=root)
        b.env = env
        self.addCleanup(b.cleanup)
        return b.start()

    def cut_power(self, env=None):
        """Pushes, then the power cut while more are in flight; returns the images acknowledged
        before it and the root as the cut left it, on its file system mounted again."""
        disk = self.disk("disk", make=True)
        root = os.path.join(disk.mountpoint, "root")
        b = self.berth(root, env)
        os.sync()  # the store as berth made it at start is on the device: the cut takes pushes only
        acknowledged, lock = [], threading.Lock()
        stop = threading.Event()

        def client(n):
            pushed = 0
            while not stop.is_set():
                try:
                    img = b.push_image(f"power/c{n}", f"v{pushed}", LAYERS)
                except (AssertionError, OSError):
                    return  # the cut, or berth killed after it
                pushed += 1
                with lock:
                    acknowledged.append(img)

        threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(CLIENTS)]
        for t in threads:
            t.start()
        bt.poll(lambda: len(acknowledged) >= CLIENTS * IMAGES_PER_CLIENT or not all(t.is_alive() for t in threads),
                60, 0.01, "the clients' first images to be acknowledged")
        self.assertTrue(all(t.is_alive() for t in threads), "a push failed before the power cut")
        b.freeze()  # the cut, pushes in flight
        bt.poll(lambda: frozen(b.proc.pid), 30, 0.01, "every berth thread to be stopped")
        cut = os.path.join(self.tmp, "after-the-cut.img")
        run("cp", "--sparse=always", os.path.join(self.tmp, "disk.img"), cut)
        # Every answer a client has read by now left berth before the cut: a stopped process
        # sends nothing (kill() lets it run again first, so the count is taken here).
        with lock:
            taken = list(acknowledged)
        stop.set()
        b.kill()
        for t in threads:
            t.join(30)
        disk.remove()
        after = self.disk("after", image=cut)  # mounting replays the journal, as a reboot would
        return taken, os.path.join(after.mountpoint, "root")

    def whole(self, b, img):
        r = b.get(f"/v2/{img['repo']}/manifests/{img['tag']}", headers={"Accept": bt.OCI_MANIFEST})
        if r.status != 200 or r.header("Docker-Content-Digest") != img["digest"] or r.body != img["manifest"]:
            return False
        for digest, data in img["blobs"].items():
            r = b.get(f"/v2/{img['repo']}/blobs/{digest}")
            if r.status != 200 or r.body != data:
                return False
        return True

    def test_acknowledged_pushes_survive_a_power_cut(self):
        taken, root = self.cut_power()
        self.assertGreaterEqual(len(taken), CLIENTS * IMAGES_PER_CLIENT)
        b = self.berth(root)
        lost = [f"{img['repo']}:{img['tag']}" for img in taken if not self.whole(b, img)]
        self.assertEqual(lost, [], f"of {len(taken)} acknowledged images, these are not whole after the power cut")

    @unittest.skipIf(not os.path.exists(EATMYDATA) or uses_asan(), "needs eatmydata, and a berth without ASan "
                     "(which must be loaded before any preloaded library)")
    def test_the_cut_loses_what_was_never_synced(self):
        # The control: with fsync turned into nothing, the same cut must lose acknowledged
        # images, or the test above could not see a missing fsync either.
        taken, root = self.cut_power(dict(os.environ, LD_PRELOAD=EATMYDATA))
        try:
            b = self.berth(root)
        except AssertionError:
            return  # the cut took the store itself (berth cannot start on it): everything lost
        lost = [img for img in taken if not self.whole(b, img)]
        self.assertGreater(len(lost), 0, "without fsync every acknowledged image survived: the cut is not a cut")


class PowerLossWithoutJournal(PowerLoss):
    # Where a journal's commit would carry a rename to the disk with any later fsync, here only
    # the folder's own fsync does: a missing one loses the blob.
    journal = False


if __name__ == "__main__":
    unittest.main(verbosity=2)
