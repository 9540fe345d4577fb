#!/usr/bin/env python3
"""The oracle of the MSK IAM differential test (tests/tests/aws_msk_iam.rs): AWS's own signer
library, aws-msk-iam-sasl-signer-python (and the botocore it signs with), on fixed credentials,
region and a frozen clock.

Reads one JSON object per line on stdin:
  {"region", "access_key", "secret_key", "token" (or null), "time": unix seconds,
   "sts_body", "sts_host"}
and prints one JSON object per line:
  {"msk_token": the signer's token (base64url, unpadded),
   "sts_headers": {"Authorization", "X-Amz-Date", "X-Amz-Security-Token"?} botocore's SigV4
                  headers for a form POST of sts_body to https://sts_host/ (service sts)}
"""

import datetime
import json
import sys
from unittest import mock

import botocore.auth
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import CredentialProvider, Credentials

from aws_msk_iam_sasl_signer import MSKAuthTokenProvider


class Fixed(CredentialProvider):
    METHOD = "fixed"

    def __init__(self, credentials):
        super().__init__()
        self.credentials = credentials

    def load(self):
        return self.credentials


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        credentials = Credentials(case["access_key"], case["secret_key"], case.get("token"))
        frozen = datetime.datetime.fromtimestamp(case["time"], datetime.timezone.utc).replace(tzinfo=None)
        with mock.patch.object(botocore.auth, "get_current_datetime", return_value=frozen):
            token, _expiry_ms = MSKAuthTokenProvider.generate_auth_token_from_credentials_provider(
                case["region"], Fixed(credentials)
            )
            request = AWSRequest(
                method="POST",
                url=f"https://{case['sts_host']}/",
                data=case["sts_body"],
                headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
            )
            SigV4Auth(credentials, "sts", case["region"]).add_auth(request)
        headers = {name: request.headers[name] for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token") if name in request.headers}
        print(json.dumps({"msk_token": token, "sts_headers": headers}), flush=True)


if __name__ == "__main__":
    main()
