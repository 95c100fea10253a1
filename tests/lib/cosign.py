"""Cosign / containers-image signature artifacts for tests, byte-for-byte as those tools write them.

Needs python3-cryptography (Debian 38.x: run with /usr/bin/python3). No berth imports.
Sources read (see /tmp/sig-findings.md): sigstore/cosign v3.1.2+ (pkg/oci/static, pkg/oci/remote/write.go,
cmd/cosign/cli/sign/sign.go), containers/image v5.36 (docker/docker_image_dest.go,
signature/internal/sigstore_payload.go), sigstore-go pkg/sign, go-containerregistry pkg/v1.

  generate_key(kind)                     kind in p256 p384 p521 rsa ed25519 -> (private_key, public_pem)
  public_key_hint(key)                   base64(sha256(SPKI DER)): the bundle's verificationMaterial.publicKey.hint
  simple_signing_payload(ref, digest, optional=None)   cosign's payload ("optional":null unless -a given)
  containers_image_payload(ref, digest, creator, timestamp)   what skopeo/podman --sign-by-sigstore write
  sign(key, data, scheme="cosign")       raw signature. scheme "cosign" = cosign >= 2.6 key files: ECDSA with the
                                         curve's hash (P-256 SHA-256, P-384 SHA-384, P-521 SHA-512), DER;
                                         RSA PKCS#1 v1.5 SHA-256; Ed25519 -> Ed25519ph (SHA-512 prehash).
                                         scheme "legacy" = cosign < 2.6 and containers/image: SHA-256 for every
                                         ECDSA curve, RSA PKCS#1 v1.5 SHA-256, pure Ed25519.
  verify(key_or_pem, data, sig, scheme)  raises InvalidSignature / ValueError; the same schemes
  sig_tag(digest)                        "sha256-<hex>.sig"
  signature_manifest(entries, writer="cosign", docker_media_types=False)   the image under the .sig tag.
        entries: [(payload, raw_signature) or (payload, raw_signature, {extra layer annotations})], one layer
        each, in order. cosign appending to an existing .sig = the same call with the longer list.
        writer="containers-image" gives c/image's layout (other config JSON, descriptor key order).
  referrers_signature_manifest(subject_digest, subject_size, subject_media_type, entries)
        cosign --new-bundle-format=false --registry-referrers-mode=oci-1-1
  pae(payload_type, payload)             DSSE pre-authentication encoding
  in_toto_statement(digest, annotations=None, variant="v3.0.6", spaced=False)   what cosign sign signs now
  sigstore_bundle(key, statement, scheme="cosign", spaced=False)   bundle v0.3 JSON, key-signed DSSE
  bundle_manifest(subject_digest, subject_size, subject_media_type, key=None, bundle=None, created=None, ...)
        cosign (>= 2.6 with --new-bundle-format, default in v3) referrer manifest holding the bundle
All *_manifest functions return (manifest_bytes, config_bytes, blobs) with blobs = {digest: bytes} holding the
config and every layer. spaced=True mimics protojson's per-binary random ", " so verifiers must parse JSON.
"""

import base64
import datetime
import hashlib
import json

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

SIMPLESIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIG_ANNOTATION = "dev.cosignproject.cosign/signature"
CERT_ANNOTATION = "dev.sigstore.cosign/certificate"
CHAIN_ANNOTATION = "dev.sigstore.cosign/chain"
BUNDLE_ANNOTATION = "dev.sigstore.cosign/bundle"
RFC3161_ANNOTATION = "dev.sigstore.cosign/rfc3161timestamp"
SIG_ARTIFACT_TYPE = "application/vnd.dev.cosign.artifact.sig.v1+json"
BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
INTOTO = "application/vnd.in-toto+json"
SIGN_PREDICATE = "https://sigstore.dev/cosign/sign/v1"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
ZERO_TIME = "0001-01-01T00:00:00Z"


def sha256_digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _b64(data):
    return base64.b64encode(data).decode()


def go_json(obj):
    """encoding/json.Marshal: compact, UTF-8, HTML-escaped. Dict order is the caller's (Go struct order);
    pass Go maps through sorted() first."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    for a, b in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(a, b)
    return s.encode()


def proto_json(obj, spaced=False):
    """protojson.Marshal: compact; spaced=True is the detrand variant with ", " after commas."""
    return json.dumps(obj, separators=(", " if spaced else ",", ":"), ensure_ascii=False).encode()


def _smap(m):
    return {k: m[k] for k in sorted(m)}


# ------------------------------------------------------------------ keys and signatures

def generate_key(kind):
    if kind in ("p256", "p384", "p521"):
        priv = ec.generate_private_key({"p256": ec.SECP256R1(), "p384": ec.SECP384R1(), "p521": ec.SECP521R1()}[kind])
    elif kind == "rsa":
        priv = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif kind == "ed25519":
        priv = ed25519.Ed25519PrivateKey.generate()
    else:
        raise ValueError("unknown key kind %r" % kind)
    pem = priv.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return priv, pem


def _public(key):
    if isinstance(key, (bytes, str)):
        return serialization.load_pem_public_key(key.encode() if isinstance(key, str) else key)
    return key.public_key() if hasattr(key, "public_key") else key


def public_key_hint(key):
    der = _public(key).public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


def _ec_hash(curve, scheme):
    if scheme == "legacy":
        return hashes.SHA256()
    return {"secp256r1": hashes.SHA256(), "secp384r1": hashes.SHA384(), "secp521r1": hashes.SHA512()}[curve.name]


# Ed25519ph (RFC 8032 5.1, empty context) is not in pyca/cryptography: a small reference implementation.
_P = 2 ** 255 - 19
_L = 2 ** 252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_PH_DOM = b"SigEd25519 no Ed25519 collisions\x01\x00"


def _xrecover(y, sign):
    xx = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    x = pow(xx, (_P + 3) // 8, _P)
    if (x * x - xx) % _P:
        x = x * pow(2, (_P - 1) // 4, _P) % _P
    if (x * x - xx) % _P or (x == 0 and sign):
        raise ValueError("bad ed25519 point")
    return _P - x if (x & 1) != sign else x


def _add(p, q):
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c, d = 2 * p[3] * q[3] * _D % _P, 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s, p):
    q = (0, 1, 1, 0)
    while s:
        if s & 1:
            q = _add(q, p)
        p, s = _add(p, p), s >> 1
    return q


def _enc(p):
    zi = pow(p[2], _P - 2, _P)
    x, y = p[0] * zi % _P, p[1] * zi % _P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def _dec(b):
    n = int.from_bytes(b, "little")
    y = n & ((1 << 255) - 1)
    if y >= _P:
        raise ValueError("bad ed25519 point")
    x = _xrecover(y, n >> 255)
    return (x, y, 1, x * y % _P)


_GY = 4 * pow(5, _P - 2, _P) % _P
_B = (_xrecover(_GY, 0), _GY, 1, _xrecover(_GY, 0) * _GY % _P)


def _hint(*parts):
    return int.from_bytes(hashlib.sha512(b"".join(parts)).digest(), "little") % _L


def ed25519_sign_raw(seed, msg, dom=b""):
    """RFC 8032 Ed25519 (dom=b"") or Ed25519ph (dom=_PH_DOM, msg=SHA-512 of the message)."""
    h = hashlib.sha512(seed).digest()
    a = (int.from_bytes(h[:32], "little") & ((1 << 254) - 8)) | (1 << 254)
    pub = _enc(_mul(a, _B))
    r = _hint(dom, h[32:], msg)
    big_r = _enc(_mul(r, _B))
    return big_r + ((r + _hint(dom, big_r, pub, msg) * a) % _L).to_bytes(32, "little")


def ed25519_verify_raw(pub, msg, sig, dom=b""):
    if len(sig) != 64 or int.from_bytes(sig[32:], "little") >= _L:
        raise InvalidSignature()
    s, k = int.from_bytes(sig[32:], "little"), _hint(dom, sig[:32], pub, msg)
    if _enc(_mul(s, _B)) != _enc(_add(_dec(sig[:32]), _mul(k, _dec(pub)))):
        raise InvalidSignature()


def _seed(priv):
    return priv.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                              serialization.NoEncryption())


def sign(private_key, data, scheme="cosign"):
    if isinstance(private_key, ec.EllipticCurvePrivateKey):
        return private_key.sign(data, ec.ECDSA(_ec_hash(private_key.curve, scheme)))  # ASN.1 DER
    if isinstance(private_key, rsa.RSAPrivateKey):
        return private_key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    if isinstance(private_key, ed25519.Ed25519PrivateKey):
        if scheme == "legacy":
            return private_key.sign(data)
        return ed25519_sign_raw(_seed(private_key), hashlib.sha512(data).digest(), _PH_DOM)
    raise TypeError("unsupported key %r" % type(private_key))


def verify(public_key, data, signature, scheme="cosign"):
    pub = _public(public_key)
    if isinstance(pub, ec.EllipticCurvePublicKey):
        pub.verify(signature, data, ec.ECDSA(_ec_hash(pub.curve, scheme)))
    elif isinstance(pub, rsa.RSAPublicKey):
        pub.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
    elif isinstance(pub, ed25519.Ed25519PublicKey):
        if scheme == "legacy":
            pub.verify(signature, data)
        else:
            raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            ed25519_verify_raw(raw, hashlib.sha512(data).digest(), signature, _PH_DOM)
    else:
        raise TypeError("unsupported key %r" % type(pub))


# ------------------------------------------------------------------ simple signing (.sig tag)

def simple_signing_payload(docker_reference, manifest_digest, optional=None):
    """sigstore/sigstore payload.Cosign: cosign puts the repository (no tag) in docker-reference."""
    return go_json({"critical": {"identity": {"docker-reference": docker_reference},
                                 "image": {"docker-manifest-digest": manifest_digest},
                                 "type": "cosign container image signature"},
                    "optional": None if optional is None else _smap(optional)})


def containers_image_payload(docker_reference, manifest_digest, creator="containers/image 5.36.1",
                             timestamp=1700000000):
    """c/image: docker-reference is the destination reference as named (with its tag)."""
    return simple_signing_payload(docker_reference, manifest_digest, {"creator": creator, "timestamp": timestamp})


def sig_tag(manifest_digest):
    algo, hexpart = manifest_digest.split(":", 1)
    return "%s-%s.sig" % (algo, hexpart)


def _layers(entries):
    out = []
    for e in entries:
        payload, sig = e[0], e[1]
        ann = dict(e[2]) if len(e) > 2 else {}
        ann[SIG_ANNOTATION] = sig if isinstance(sig, str) else _b64(sig)
        out.append((payload, _smap(ann)))
    return out


def _desc(media_type, data, annotations=None, writer="cosign", **extra):
    if writer == "cosign":   # go-containerregistry v1.Descriptor order
        d = {"mediaType": media_type, "size": len(data), "digest": sha256_digest(data)}
    else:                    # image-spec v1.Descriptor order
        d = {"mediaType": media_type, "digest": sha256_digest(data), "size": len(data)}
    if annotations:
        d["annotations"] = annotations
    d.update(extra)
    return d


def _cosign_sig_image(entries, docker_media_types=False):
    layers = _layers(entries)
    config = go_json({"architecture": "", "created": ZERO_TIME,
                      "history": [{"created": ZERO_TIME} for _ in layers], "os": "",
                      "rootfs": {"type": "layers", "diff_ids": [sha256_digest(p) for p, _ in layers]},
                      "config": {}})
    manifest = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST if docker_media_types else OCI_MANIFEST,
                "config": _desc(DOCKER_CONFIG if docker_media_types else OCI_CONFIG, config),
                "layers": [_desc(SIMPLESIGNING, p, a) for p, a in layers]}
    blobs = {sha256_digest(config): config}
    blobs.update({sha256_digest(p): p for p, _ in layers})
    return manifest, config, blobs


def signature_manifest(entries, writer="cosign", docker_media_types=False):
    if writer == "cosign":
        manifest, config, blobs = _cosign_sig_image(entries, docker_media_types)
        return go_json(manifest), config, blobs
    layers = _layers(entries)
    config = go_json({"architecture": "", "os": "", "config": {},
                      "rootfs": {"type": "layers", "diff_ids": [sha256_digest(p) for p, _ in layers]}})
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": _desc(OCI_CONFIG, config, writer=writer),
                "layers": [_desc(SIMPLESIGNING, p, a, writer=writer) for p, a in layers]}
    blobs = {sha256_digest(config): config}
    blobs.update({sha256_digest(p): p for p, _ in layers})
    return go_json(manifest), config, blobs


def _subject(digest, size, media_type):
    return {"mediaType": media_type, "size": size, "digest": digest}


def referrers_signature_manifest(subject_digest, subject_size, subject_media_type, entries):
    """WriteSignaturesExperimentalOCI: the .sig image, config mediaType replaced (blob unchanged), plus subject."""
    manifest, config, blobs = _cosign_sig_image(entries)
    manifest["config"]["mediaType"] = SIG_ARTIFACT_TYPE
    manifest["subject"] = _subject(subject_digest, subject_size, subject_media_type)
    manifest["artifactType"] = SIG_ARTIFACT_TYPE
    return go_json(manifest), config, blobs


# ------------------------------------------------------------------ sigstore bundle v0.3 (referrers)

def pae(payload_type, payload):
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def in_toto_statement(manifest_digest, annotations=None, variant="v3.0.6", spaced=False):
    """variant "v2.6" (v2.6.0-v3.0.3), "v3.0.4" (+subject annotations), "v3.0.6" (+empty predicate, current)."""
    algo, hexpart = manifest_digest.split(":", 1)
    subject = {"digest": {algo: hexpart}}
    if variant != "v2.6":
        subject["annotations"] = _smap(annotations or {})
    st = {"_type": "https://in-toto.io/Statement/v1", "subject": [subject], "predicateType": SIGN_PREDICATE}
    if variant == "v3.0.6":
        st["predicate"] = {}
    return proto_json(st, spaced)


def sigstore_bundle(private_key, statement, scheme="cosign", spaced=False, payload_type=INTOTO):
    sig = sign(private_key, pae(payload_type, statement), scheme)
    return proto_json({"mediaType": BUNDLE_V03,
                       "verificationMaterial": {"publicKey": {"hint": public_key_hint(private_key)}},
                       "dsseEnvelope": {"payload": _b64(statement), "payloadType": payload_type,
                                        "signatures": [{"sig": _b64(sig)}]}}, spaced)


def bundle_manifest(subject_digest, subject_size, subject_media_type, private_key=None, bundle=None,
                    created=None, annotations=None, variant="v3.0.6", scheme="cosign", spaced=False,
                    predicate_type=SIGN_PREDICATE):
    """WriteAttestationNewBundleFormat/WriteReferrer. Give private_key (bundle built over the subject digest,
    `annotations` = cosign sign -a pairs) or ready bundle bytes."""
    if bundle is None:
        bundle = sigstore_bundle(private_key, in_toto_statement(subject_digest, annotations, variant, spaced),
                                 scheme, spaced)
    if created is None:
        created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    config = b"{}"
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": _desc(OCI_EMPTY, config, artifactType=BUNDLE_V03),
                "layers": [_desc(BUNDLE_V03, bundle)],
                "annotations": _smap({"org.opencontainers.image.created": created,
                                      "dev.sigstore.bundle.content": "dsse-envelope",
                                      "dev.sigstore.bundle.predicateType": predicate_type}),
                "subject": _subject(subject_digest, subject_size, subject_media_type),
                "artifactType": BUNDLE_V03}
    return go_json(manifest), config, {sha256_digest(config): config, sha256_digest(bundle): bundle}


# ------------------------------------------------------------------ self-test

def _check_blobs(manifest, blobs):
    m = json.loads(manifest)
    for d in [m["config"]] + m["layers"]:
        assert blobs[d["digest"]] and len(blobs[d["digest"]]) == d["size"], d
    return m


def _selftest():
    seed = bytes.fromhex("833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42")
    rfc = ed25519_sign_raw(seed, hashlib.sha512(b"abc").digest(), _PH_DOM)
    assert rfc.hex().startswith("98a70222f0b8121aa9d30f813d683f809e462b469c7ff87639499bb94e6dae41"), "RFC 8032 7.3"
    edk = ed25519.Ed25519PrivateKey.generate()
    assert ed25519_sign_raw(_seed(edk), b"x" * 77) == edk.sign(b"x" * 77), "pure Ed25519 core vs cryptography"
    img = "sha256:" + "ab" * 32
    payload = simple_signing_payload("localhost:5000/a/b", img)
    assert payload == (b'{"critical":{"identity":{"docker-reference":"localhost:5000/a/b"},"image":'
                       b'{"docker-manifest-digest":"' + img.encode() + b'"},"type":"cosign container image '
                       b'signature"},"optional":null}'), payload
    assert sig_tag(img) == "sha256-" + "ab" * 32 + ".sig"
    for kind in ("p256", "p384", "p521", "rsa", "ed25519"):
        priv, pem = generate_key(kind)
        for scheme in ("cosign", "legacy"):
            sig = sign(priv, payload, scheme)
            verify(pem, payload, sig, scheme)
            try:
                verify(pem, payload + b" ", sig, scheme)
                raise AssertionError("tampered payload verified")
            except InvalidSignature:
                pass
        cip = containers_image_payload("localhost:5000/a/b:v1", img)
        entries = [(payload, sign(priv, payload)), (cip, sign(priv, cip, "legacy"), {CERT_ANNOTATION: "x"})]
        for writer in ("cosign", "containers-image"):
            manifest, config, blobs = signature_manifest(entries, writer)
            m = _check_blobs(manifest, blobs)
            assert [x["mediaType"] for x in m["layers"]] == [SIMPLESIGNING] * 2
            assert json.loads(config)["rootfs"]["diff_ids"] == [x["digest"] for x in m["layers"]]
            for layer, scheme in zip(m["layers"], ("cosign", "legacy")):
                verify(pem, blobs[layer["digest"]], base64.b64decode(layer["annotations"][SIG_ANNOTATION]), scheme)
        manifest, config, blobs = referrers_signature_manifest(img, 1234, OCI_MANIFEST, entries[:1])
        m = _check_blobs(manifest, blobs)
        assert m["artifactType"] == m["config"]["mediaType"] == SIG_ARTIFACT_TYPE and m["subject"]["digest"] == img
        for spaced in (False, True):
            manifest, config, blobs = bundle_manifest(img, 1234, OCI_MANIFEST, priv, annotations={"k": "v"},
                                                      spaced=spaced)
            m = _check_blobs(manifest, blobs)
            assert m["artifactType"] == BUNDLE_V03 and m["subject"]["size"] == 1234 and config == b"{}"
            b = json.loads(blobs[m["layers"][0]["digest"]])
            assert b["verificationMaterial"]["publicKey"]["hint"] == public_key_hint(pem)
            env = b["dsseEnvelope"]
            statement = base64.b64decode(env["payload"])
            verify(pem, pae(env["payloadType"], statement), base64.b64decode(env["signatures"][0]["sig"]))
            st = json.loads(statement)
            assert st["subject"][0]["digest"] == {"sha256": img[7:]} and st["predicateType"] == SIGN_PREDICATE
    print("cosign.py self-test: ok")


if __name__ == "__main__":
    _selftest()
