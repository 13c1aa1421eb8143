"""Amazon Bedrock's runtime API, requests signed with AWS Signature Version 4 (botocore's signer).

MindsDB's parameters (its boto3 client): `model_name` (the model id), `aws_access_key_id`,
`aws_secret_access_key`, `aws_session_token`, `aws_region_name` (or `aws_region`); agentkb also reads
`base_url` / `endpoint_url` (default `https://bedrock-runtime.<region>.amazonaws.com`). When the
configuration gives no credentials, `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` from
the environment are used, only for AWS's own endpoint; the region may come from `AWS_REGION` /
`AWS_DEFAULT_REGION`. No other part of AWS's credential chain is read (never the instance metadata service).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from agentkb.errors import BadRequest
from agentkb.kb.apis.names import BEDROCK, environment, http_url, required, text

SERVICE = "bedrock"
_REGION = re.compile(r"^[a-z]{2}(?:-[a-z0-9]+)+-\d+$")


@dataclass(frozen=True, slots=True)
class AWSKeys:
    access_key: str
    secret_key: str = ""
    session_token: str | None = None


def sign(
    method: str, url: str, headers: Mapping[str, str], body: bytes, keys: AWSKeys, region: str, service: str
) -> dict[str, str]:
    """`headers` with SigV4's added (`X-Amz-Date`, `X-Amz-Security-Token` with a session token,
    `Authorization`) for this exact request: `url` as it will be sent (path already percent-encoded), `body`
    its bytes. botocore is imported on first use (a second of start-up otherwise)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    credentials = Credentials(keys.access_key, keys.secret_key, keys.session_token)
    SigV4Auth(credentials, service, region).add_auth(request)
    return {str(k): str(v) for k, v in request.headers.items()}


@dataclass(frozen=True, slots=True)
class BedrockAPI:
    base_url: str
    region: str
    keys: AWSKeys

    def url(self, model: str, action: str) -> str:
        """`action` (`invoke`, `converse`) of model `model` (its id percent-encoded: `:` is `%3A`)."""
        return f"{self.base_url}/model/{quote(model, safe='')}/{action}"

    def headers(self, url: str, body: bytes) -> dict[str, str]:
        """A JSON POST's headers to `url`, signed."""
        plain = {"Content-Type": "application/json", "Accept": "application/json"}
        return sign("POST", url, plain, body, self.keys, self.region, SERVICE)


def region(config: Mapping[str, Any]) -> str | None:
    return text(config, "aws_region_name", "aws_region", "region_name") or environment(
        "AWS_REGION", "AWS_DEFAULT_REGION"
    )


def default_url(region_name: str) -> str:
    return f"https://bedrock-runtime.{region_name}.amazonaws.com"


def api(config: Mapping[str, Any], field: str) -> BedrockAPI:
    name = region(config)
    if name is None:
        raise required(field, "aws_region_name", BEDROCK, "e.g. us-east-1, or AWS_REGION")
    if not _REGION.match(name):
        raise BadRequest(
            f"'{field}.aws_region_name' {name!r} is not an AWS region (e.g. us-east-1)",
            title=f"Invalid {field.replace('_', ' ')}",
        )
    given = text(config, "base_url", "endpoint_url")
    base_url = (
        http_url(given, field, "base_url" if "base_url" in config else "endpoint_url") if given else None
    )
    access_key = text(config, "aws_access_key_id")
    if access_key is not None:
        secret = text(config, "aws_secret_access_key")
        if secret is None:
            raise required(field, "aws_secret_access_key", BEDROCK, "with aws_access_key_id")
        keys = AWSKeys(access_key, secret, text(config, "aws_session_token"))
    else:
        env_key = environment("AWS_ACCESS_KEY_ID") if base_url is None else None
        env_secret = environment("AWS_SECRET_ACCESS_KEY")
        if env_key is None or env_secret is None:
            raise required(
                field,
                "aws_access_key_id",
                BEDROCK,
                "and aws_secret_access_key, or AWS_ACCESS_KEY_ID for AWS's endpoint",
            )
        keys = AWSKeys(env_key, env_secret, environment("AWS_SESSION_TOKEN"))
    return BedrockAPI(base_url or default_url(name), name, keys)
