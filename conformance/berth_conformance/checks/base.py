"""base: the API version check."""

from ..checklist import MUST, check
from ..expect import expect_status


@check("base", "api-version", MUST, "GET /v2/ returns 200")
def base_api_version(s):
    expect_status(s.get("/v2/"), 200)
