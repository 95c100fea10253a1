"""A tiny CRI ImageService client: PullImage (and ImageStatus, RemoveImage) over a container
runtime's gRPC socket, with the AuthConfig the kubelet would pass, so tests can pull through
containerd's CRI plugin (see start_containerd_cri in containerd.sh) the way a node does.

Needs python3-grpcio and python3-grpc-tools (Debian's; under a pyenv or venv python run the
tests with /usr/bin/python3). The stubs are generated from cri_api.proto, beside this file, on
first use, with `python3 -m grpc_tools.protoc` into a temp dir removed at exit; importing this
module does nothing but define things, and works without grpc installed (available() says
whether calls can work).

    import cri
    ref = cri.pull_image(sock, "berth.example:5000/alice/private:1",
                         username="alice", password="pw")   # -> "sha256:..."
    except cri.CRIError as e: e.code ("UNKNOWN", "NOT_FOUND", ...), e.details

Command line (for shell tests):
    python3 cri.py SOCKET pull IMAGE [--username U --password P --server-address S]
    python3 cri.py SOCKET status IMAGE | remove IMAGE
"""

import atexit
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading

PROTO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cri_api.proto")

_lock = threading.Lock()
_stubs = None  # (pb2 module, pb2_grpc module) once generated


class CRIError(Exception):
    """A CRI call failed: code is the gRPC status code's name ("UNKNOWN", "NOT_FOUND",
    "DEADLINE_EXCEEDED", "UNAVAILABLE", ...), details the runtime's message."""

    def __init__(self, method, target, code, details):
        super().__init__(f"{method} {target}: {code}: {details}")
        self.method = method
        self.code = code
        self.details = details


def available():
    """Whether grpcio and grpc_tools can be imported by this interpreter."""
    return all(importlib.util.find_spec(m) is not None for m in ("grpc", "grpc_tools"))


def _load():
    """Generates cri_api_pb2*.py once per process and imports them."""
    global _stubs
    with _lock:
        if _stubs is not None:
            return _stubs
        if not available():
            raise RuntimeError(f"{sys.executable} cannot import grpc and grpc_tools "
                               "(install python3-grpcio python3-grpc-tools; use /usr/bin/python3)")
        out = tempfile.mkdtemp(prefix="berth-cri-stubs-")
        atexit.register(shutil.rmtree, out, True)
        proto_dir, proto_name = os.path.split(PROTO)
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto_dir}",
               f"--python_out={out}", f"--grpc_python_out={out}", proto_name]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"protoc failed ({r.returncode}): {r.stderr.strip()}")
        # The _grpc module imports its _pb2 sibling by plain name.
        sys.path.insert(0, out)
        try:
            pb2 = importlib.import_module("cri_api_pb2")
            pb2_grpc = importlib.import_module("cri_api_pb2_grpc")
        finally:
            sys.path.remove(out)
        _stubs = (pb2, pb2_grpc)
        return _stubs


def _call(socket_path, method, request, target, timeout):
    import grpc
    _, pb2_grpc = _load()
    addr = socket_path if socket_path.startswith("unix:") else "unix://" + socket_path
    with grpc.insecure_channel(addr) as channel:
        stub = pb2_grpc.ImageServiceStub(channel)
        try:
            return getattr(stub, method)(request, timeout=timeout)
        except grpc.RpcError as e:
            raise CRIError(method, target, e.code().name, e.details()) from None


def auth_config(username=None, password=None, server_address=None, auth=None, identity_token=None,
                registry_token=None):
    """The AuthConfig message for these fields, or None when all are None (the kubelet sends
    no auth at all when it has no credentials for the image)."""
    fields = dict(username=username, password=password, server_address=server_address, auth=auth,
                  identity_token=identity_token, registry_token=registry_token)
    if all(v is None for v in fields.values()):
        return None
    pb2, _ = _load()
    return pb2.AuthConfig(**{k: v for k, v in fields.items() if v is not None})


def pull_image(socket_path, image, username=None, password=None, server_address=None, timeout=60,
               auth=None, identity_token=None, registry_token=None):
    """ImageService.PullImage(image) on the runtime at socket_path; returns the image_ref (for
    containerd the image id, "sha256:..."). An AuthConfig is sent when any credential argument is
    given (server_address="" is sent as given: empty, which is what the kubelet sends). Raises
    CRIError with the gRPC status on failure."""
    pb2, _ = _load()
    req = pb2.PullImageRequest(image=pb2.ImageSpec(image=image))
    a = auth_config(username, password, server_address, auth, identity_token, registry_token)
    if a is not None:
        req.auth.CopyFrom(a)
    return _call(socket_path, "PullImage", req, image, timeout).image_ref


def image_status(socket_path, image, timeout=30):
    """ImageStatus: a dict(id, repo_tags, repo_digests, size), or None if the image is absent."""
    pb2, _ = _load()
    resp = _call(socket_path, "ImageStatus",
                 pb2.ImageStatusRequest(image=pb2.ImageSpec(image=image)), image, timeout)
    if not resp.HasField("image"):
        return None
    i = resp.image
    return dict(id=i.id, repo_tags=list(i.repo_tags), repo_digests=list(i.repo_digests), size=i.size)


def remove_image(socket_path, image, timeout=30):
    """RemoveImage (idempotent: removing an absent image succeeds)."""
    pb2, _ = _load()
    _call(socket_path, "RemoveImage", pb2.RemoveImageRequest(image=pb2.ImageSpec(image=image)), image,
          timeout)


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(description="CRI ImageService client")
    p.add_argument("socket")
    p.add_argument("op", choices=["pull", "status", "remove"])
    p.add_argument("image")
    p.add_argument("--username")
    p.add_argument("--password")
    p.add_argument("--server-address")
    p.add_argument("--auth")
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args(argv)
    try:
        if a.op == "pull":
            print(pull_image(a.socket, a.image, a.username, a.password, a.server_address, a.timeout,
                             auth=a.auth))
        elif a.op == "status":
            print(image_status(a.socket, a.image, a.timeout))
        else:
            remove_image(a.socket, a.image, a.timeout)
    except CRIError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
