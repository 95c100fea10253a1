"""sparse (opt-in, --sparse): the official suite's sparse data set.

The official suite's OCI_DATA_SPARSE data set (off by default there too): manifests whose
blobs or child manifests are deliberately never pushed. The spec lets a registry refuse them
with MANIFEST_BLOB_UNKNOWN (manifests.sparse-accepted-or-refused checks that in every run);
--sparse says the registry is configured to accept them (berth: "sparse_manifests"). The sets
themselves are built in datasets.
"""

from ..checklist import EXT, check
from ..data_steps import run_data_set
from ..datasets import sparse_image_set, sparse_index_set


@check("sparse", "image", EXT, "an image whose layer blob was never pushed is accepted, served and deleted; the "
       "missing blob stays 404 (official suite, OCI_DATA_SPARSE)")
def sparse_image(s):
    run_data_set(s, sparse_image_set())


@check("sparse", "index", EXT, "an index with a child manifest never pushed is accepted, served and deleted; the "
       "missing child stays 404 (official suite, OCI_DATA_SPARSE)")
def sparse_index(s):
    run_data_set(s, sparse_index_set())
