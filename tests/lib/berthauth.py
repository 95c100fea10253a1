"""Authentication and TLS material for the tests: Basic and Bearer headers, htpasswd files, keys,
a CA and certificates, and JWTs. Keys and certificates are made with the openssl CLI; JWTs are put
together here (base64url + `openssl dgst -sha256 -sign`), so tests can also forge the malformed ones.

Standard library only (plus the openssl and htpasswd commands); part of `import berthtest as bt`
(see berthtest.py).
"""

import base64
import hashlib
import hmac
import json
import os
import random
import subprocess

__all__ = ["basic_auth", "bearer", "openssl", "write_htpasswd", "gen_rsa_key", "gen_ec_key", "public_key",
           "make_ca", "make_cert", "b64url", "b64url_decode", "sign_sha256", "make_jwt", "jwt_claims", "public_jwk",
           "service_account_claims"]


def basic_auth(user, password):
    """{"Authorization": "Basic ..."}."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def openssl(*args, input=None):
    """Run the openssl CLI; returns stdout bytes, raises with stderr on failure."""
    r = subprocess.run(["openssl", *args], input=input, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {r.stderr.decode(errors='replace')}")
    return r.stdout


def write_htpasswd(path, users):
    """users: {name: password}; bcrypt entries as `htpasswd -B` writes them (cost 5, for speed)."""
    with open(path, "w") as f:
        for name, password in users.items():
            r = subprocess.run(["htpasswd", "-nbB", "-C", "5", name, password], capture_output=True, text=True,
                               timeout=60)
            if r.returncode != 0:
                raise RuntimeError(f"htpasswd: {r.stderr}")
            f.write(r.stdout.strip() + "\n")
    return path


def gen_rsa_key(path, bits=2048):
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", f"rsa_keygen_bits:{bits}", "-out", path)
    return path


def gen_ec_key(path):
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    return path


def public_key(private_path, public_path):
    openssl("pkey", "-in", private_path, "-pubout", "-out", public_path)
    return public_path


def make_ca(directory, name="berth-test-ca"):
    """A self-signed CA: returns (cert_path, key_path)."""
    key, cert = os.path.join(directory, f"{name}.key"), os.path.join(directory, f"{name}.crt")
    gen_ec_key(key)
    openssl("req", "-x509", "-new", "-key", key, "-sha256", "-days", "2", "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-out", cert)
    return cert, key


def make_cert(directory, name, ca_cert, ca_key, cn=None, san="IP:127.0.0.1,DNS:localhost", client=False,
              serial=None, rsa=False):
    """A leaf certificate signed by the CA: returns (cert_path, key_path)."""
    key, csr, cert = (os.path.join(directory, f"{name}.{ext}") for ext in ("key", "csr", "crt"))
    (gen_rsa_key if rsa else gen_ec_key)(key)
    openssl("req", "-new", "-key", key, "-subj", f"/CN={cn or name}", "-out", csr)
    ext = os.path.join(directory, f"{name}.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n")
        f.write(f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}\n")
        if san and not client:
            f.write(f"subjectAltName={san}\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-days", "2", "-sha256",
            "-set_serial", str(serial if serial is not None else random.getrandbits(62)), "-extfile", ext,
            "-out", cert)
    return cert, key


def b64url(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _der_ecdsa_to_raw(der):
    """DER ECDSA-Sig-Value (SEQUENCE { INTEGER r, INTEGER s }) -> r||s, 32 bytes each."""
    def read_len(buf, i):
        n = buf[i]
        if n < 0x80:
            return n, i + 1
        count = n & 0x7F
        return int.from_bytes(buf[i + 1:i + 1 + count], "big"), i + 1 + count
    if der[0] != 0x30:
        raise ValueError("not a DER sequence")
    _, i = read_len(der, 1)
    out = b""
    for _ in range(2):
        if der[i] != 0x02:
            raise ValueError("not a DER integer")
        n, i = read_len(der, i + 1)
        value = int.from_bytes(der[i:i + n], "big")
        i += n
        out += value.to_bytes(32, "big")
    return out


def sign_sha256(key_path, data, alg):
    """Signature of data with a PEM private key, as JWS wants it (ES256: raw r||s)."""
    sig = openssl("dgst", "-sha256", "-sign", key_path, input=data)
    return _der_ecdsa_to_raw(sig) if alg == "ES256" else sig


def make_jwt(claims, key_path=None, alg="RS256", header=None, signature=None):
    """header.claims.signature. With key_path the signature is made by openssl (RS256/ES256);
    HS256 takes the raw key bytes as key (key_path is then a bytes secret); "none" or an explicit
    signature (bytes) skips signing."""
    head = {"alg": alg, "typ": "JWT"}
    head.update(header or {})
    signing_input = b64url(json.dumps(head, separators=(",", ":"))) + "." + \
        b64url(json.dumps(claims, separators=(",", ":")))
    if signature is None:
        if alg == "none":
            signature = b""
        elif alg == "HS256":
            signature = hmac.new(key_path, signing_input.encode(), hashlib.sha256).digest()
        else:
            signature = sign_sha256(key_path, signing_input.encode(), alg)
    return signing_input + "." + b64url(signature)


def jwt_claims(token):
    """The (unverified) claims of a JWT."""
    return json.loads(b64url_decode(token.split(".")[1]))


def public_jwk(private_path, kid):
    """The public JWK of a PEM private key (RSA, or EC P-256), as an issuer's JWKS lists it."""
    text = openssl("pkey", "-in", private_path, "-noout", "-text").decode()
    if "modulus:" in text:
        modulus = openssl("rsa", "-in", private_path, "-noout", "-modulus").decode().strip().split("=", 1)[1]
        n = bytes.fromhex(modulus)
        return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64url(n), "e": b64url(b"\x01\x00\x01")}
    der = openssl("pkey", "-in", private_path, "-pubout", "-outform", "DER")
    point = der[-65:]  # SubjectPublicKeyInfo ends with the uncompressed point 04||x||y
    if point[0] != 4:
        raise ValueError("not an uncompressed P-256 point")
    return {"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
            "x": b64url(point[1:33]), "y": b64url(point[33:])}


def service_account_claims(namespace, name, issuer, audience="berth", lifetime=600, now=None):
    """A projected service account token's claims, laid out as the API server writes them
    (k8s.io/kubernetes pkg/serviceaccount/claims.go: privateClaims under "kubernetes.io")."""
    import time
    now = int(now if now is not None else time.time())
    return {"aud": [audience], "exp": now + lifetime, "iat": now, "nbf": now, "iss": issuer,
            "sub": f"system:serviceaccount:{namespace}:{name}",
            "kubernetes.io": {"namespace": namespace,
                              "pod": {"name": f"{name}-5d8f7", "uid": "4b3e1c6a-0d2f-4b7e-9a51-6f0c2d9e8a11"},
                              "serviceaccount": {"name": name, "uid": "9c0a7f3e-2b1d-4e8c-a6f5-1d2e3f4a5b6c"}}}
