#!/usr/bin/env python3
"""A node's container runtime pulling one image through its node agent, as containerd does: the
manifest, then the config and every layer (up to --parallel at once), each blob's bytes hashed as
they arrive and checked against its digest. Runs inside the node's network namespace (the
runtime reaches its agent over the node's loopback; tests/lib/burstlab.py starts it with
`ip netns exec`). Standard library only.

    pull_through.py http://127.0.0.1:5050 REPOSITORY TAG [--ns REGISTRY] [--authorization VALUE]
                    [--parallel 3] [--wait] [--timeout 120]

--wait: print "ready" once loaded and wait for a line on stdin before pulling, so many pulls can
be released together. Prints one JSON line:

    {"ok": true, "seconds": 1.9, "bytes": 6291456, "manifest": "sha256:...", "first_byte": 0.01,
     "blobs": {"sha256:...": {"status": 200, "bytes": N, "ok": true, "seconds": 1.2, "head": 1.19}},
     "error": null}

("seconds": from the release to the last blob verified; "first_byte": when the first blob's
response head arrived; per blob, "seconds" from its request to its last byte, "head" to its
response head.) Exit status 0 when every blob arrived whole with its digest, else 1.
"""

import argparse
import concurrent.futures
import hashlib
import http.client
import json
import sys
import threading
import time
import urllib.parse

ACCEPT = ", ".join(["application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json"])


def connection(url, timeout):
    parts = urllib.parse.urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.hostname, parts.port, timeout=timeout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("repository")
    ap.add_argument("reference")
    ap.add_argument("--ns")
    ap.add_argument("--authorization")
    ap.add_argument("--parallel", type=int, default=3)
    ap.add_argument("--wait", action="store_true")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()

    headers = {"Authorization": args.authorization} if args.authorization else {}
    query = f"?ns={args.ns}" if args.ns else ""
    result = {"ok": False, "seconds": None, "bytes": 0, "manifest": None, "first_byte": None, "blobs": {},
              "error": None}
    lock = threading.Lock()

    if args.wait:
        print("ready", flush=True)
        sys.stdin.readline()
    started = time.monotonic()

    def blob(digest):
        conn = connection(args.url, args.timeout)
        t0 = time.monotonic()
        entry = {"status": None, "bytes": 0, "ok": False, "seconds": None, "head": None}
        try:
            conn.request("GET", f"/v2/{args.repository}/blobs/{digest}{query}", headers=headers)
            r = conn.getresponse()
            entry["status"] = r.status
            entry["head"] = round(time.monotonic() - t0, 4)
            with lock:
                if result["first_byte"] is None:
                    result["first_byte"] = round(time.monotonic() - started, 4)
            h = hashlib.sha256()
            while True:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                h.update(chunk)
                entry["bytes"] += len(chunk)
            entry["ok"] = r.status == 200 and "sha256:" + h.hexdigest() == digest
        except (OSError, http.client.HTTPException) as e:
            entry["error"] = f"{type(e).__name__}: {e}"
        finally:
            conn.close()
        entry["seconds"] = round(time.monotonic() - t0, 4)
        with lock:
            result["blobs"][digest] = entry
            result["bytes"] += entry["bytes"]
        return entry["ok"]

    try:
        conn = connection(args.url, args.timeout)
        conn.request("GET", f"/v2/{args.repository}/manifests/{args.reference}{query}",
                     headers={**headers, "Accept": ACCEPT})
        r = conn.getresponse()
        body = r.read()
        conn.close()
        if r.status != 200:
            result["error"] = f"manifest: HTTP {r.status} {body[:300]!r}"
        else:
            result["manifest"] = "sha256:" + hashlib.sha256(body).hexdigest()
            doc = json.loads(body)
            digests = [doc["config"]["digest"], *(layer["digest"] for layer in doc["layers"])]
            with concurrent.futures.ThreadPoolExecutor(max(1, args.parallel)) as pool:
                oks = list(pool.map(blob, digests))
            result["ok"] = all(oks)
            if not result["ok"]:
                result["error"] = "blobs: " + ", ".join(f"{d}: {e['status']} ok={e['ok']} {e.get('error', '')}"
                                                        for d, e in result["blobs"].items() if not e["ok"])
    except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
        result["error"] = f"{type(e).__name__}: {e}"
    result["seconds"] = round(time.monotonic() - started, 4)
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
