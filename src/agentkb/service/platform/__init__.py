"""The platform the other services stand on: who a request acts for and what it may do (`access`), logins and
API keys (`auth`, `login_throttle`), the process's shutdown (`lifecycle`), readiness (`health`), the
database's availability and read-your-writes (`database`), metrics,
the sealing of stored secrets (`secrets`), and the one lifecycle of every event stream (`streams`)."""

from agentkb.service.platform.access import Principal, entered
from agentkb.service.platform.auth import AuthService, LoginToken, is_loopback
from agentkb.service.platform.database import (
    READ_YOUR_WRITES_HEADER,
    RETRY_AFTER_S,
    database_unavailable,
    reading_your_writes,
)
from agentkb.service.platform.health import HealthService
from agentkb.service.platform.lifecycle import Shutdown, Stopped, until
from agentkb.service.platform.login_throttle import LoginThrottle
from agentkb.service.platform.metrics import MetricsService
from agentkb.service.platform.secrets import SecretReport, rotate_secrets, seal_plaintext_secrets
from agentkb.service.platform.streams import HEADERS, MEDIA_TYPE, RUN_STOPPED, Encoder, data, relay

__all__ = [
    "HEADERS",
    "READ_YOUR_WRITES_HEADER",
    "RETRY_AFTER_S",
    "database_unavailable",
    "reading_your_writes",
    "MEDIA_TYPE",
    "RUN_STOPPED",
    "Encoder",
    "data",
    "relay",
    "AuthService",
    "HealthService",
    "LoginThrottle",
    "LoginToken",
    "MetricsService",
    "Principal",
    "SecretReport",
    "Shutdown",
    "Stopped",
    "entered",
    "is_loopback",
    "rotate_secrets",
    "seal_plaintext_secrets",
    "until",
]
