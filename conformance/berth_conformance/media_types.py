"""Media types of the content the checks push, and the artifact types of their referrers."""

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_ND = "application/vnd.oci.image.layer.nondistributable.v1.tar"
OCI_LAYER_ND_GZ = "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
EMPTY_JSON_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

# artifact types of the referrers the checks push
SBOM, SIGNATURE, BUNDLE, EARLY = ("application/vnd.example.sbom.v1", "application/vnd.example.signature.v1",
                                  "application/vnd.example.bundle.v1", "application/vnd.example.early.v1")
