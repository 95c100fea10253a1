"""berth's OCI distribution-spec conformance suite (see conformance/README.md).

cli          arguments, selection of the checks, exit status (main)
runner       runs the checks, one line each, then the totals
checklist    requirement levels and the @check / @fixture registry
expect       Failure, Skipped and what a check asserts about a response
client       HTTP requests and responses, API paths, Location and Link headers
media_types  the media types and artifact types the content uses
content      digests and generated blobs, configs, manifests and indexes
datasets     content shaped like the official suite's data sets (also the sparse set)
suite        one run: its repositories, fixtures, state between checks, request helpers
fixtures     fixtures and pushes that checks of several categories share
blob_uploads each upload method of the official suite's blob API tests, and its verification
data_steps   a data set's push, list, pull, referrers and delete steps
checks/      the checks, a module per category, imported in the order they run
"""
