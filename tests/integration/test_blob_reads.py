#!/usr/bin/env python3
"""Blob GETs of files that are not in the page cache: a worker reads each window in before the
I/O thread sends it (berth_blob_read_from_disk_bytes_total counts those bytes), whole and ranged,
and a blob already in the cache is sent without that detour. Several cold pulls at once on one
I/O thread come back intact while the thread goes on answering. (That the I/O thread never waits
for the disk is not timed here: the counter shows which path each window took.)"""

import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

MiB = 1 << 20
WINDOW = 4 * MiB  # the server's send window


class ColdBlobReadTest(bt.ServerTest):
    @classmethod
    def configure(cls, b):
        if bt.on_tmpfs(b.tmp):
            raise unittest.SkipTest("tmpfs keeps every page in memory: nothing can be evicted")
        return {"threads": {"io": 1}}

    def cold_bytes(self):
        return self.b.metrics()[bt.COLD_BYTES]

    def push_cold(self, repo, size):
        data = os.urandom(size)
        digest = self.b.push_blob(repo, data)
        bt.evict_from_page_cache(bt.blob_files(self.b.root)[digest.split(":")[1]])
        return data, digest

    def test_cold_blob_is_read_in_then_sent(self):
        data, digest = self.push_cold("cold/whole", 10 * MiB + 12345)
        before = self.cold_bytes()
        r = self.b.get(f"/v2/cold/whole/blobs/{digest}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(bt.sha256_digest(r.body), digest)
        read_in = self.cold_bytes() - before
        # At least the first window came from the disk; later ones may have been read ahead in time.
        self.assertGreaterEqual(read_in, WINDOW)
        self.assertLessEqual(read_in, len(data))

        # Now in the cache: sent straight away.
        before = self.cold_bytes()
        self.assertEqual(self.b.get(f"/v2/cold/whole/blobs/{digest}").body, data)
        self.assertEqual(self.cold_bytes(), before)

    def test_cold_range(self):
        data, digest = self.push_cold("cold/range", 9 * MiB)
        before = self.cold_bytes()
        first, last = 5 * MiB + 7, 5 * MiB + 100_006
        r = self.b.get(f"/v2/cold/range/blobs/{digest}", headers={"Range": f"bytes={first}-{last}"})
        self.assertEqual(r.status, 206, r)
        self.assertEqual(r.body, data[first:last + 1])
        self.assertEqual(self.cold_bytes() - before, last + 1 - first)

    def test_concurrent_cold_pulls(self):
        blobs = [self.push_cold(f"cold/busy{i}", 8 * MiB) for i in range(4)]
        errors = []

        def pull(i, data, digest):
            try:
                r = self.b.get(f"/v2/cold/busy{i}/blobs/{digest}")
                if r.body != data:
                    errors.append(f"blob {i}: {len(r.body)} bytes, not the ones pushed")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"blob {i}: {e}")
        threads = [threading.Thread(target=pull, args=(i, *blob)) for i, blob in enumerate(blobs)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            self.assertEqual(self.b.get("/v2/").status, 200)
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertTrue(self.b.alive())


if __name__ == "__main__":
    unittest.main(verbosity=2)
