"""Which checksum headers one service is sent: the client's checksum dialect.

S3 takes ``x-amz-checksum-<algorithm>`` (with ``x-amz-checksum-algorithm`` and
``x-amz-checksum-type`` on multipart uploads) to store a checksum it checks, and
``x-amz-checksum-mode: ENABLED`` to return the stored one on HEAD and GET ("Checking
object integrity", S3 user guide). Some S3-compatible services (Backblaze B2, older
gateways) refuse those headers with 400 "Unsupported header". boto3's two settings say
what to send: ``request_checksum_calculation`` and ``response_checksum_validation``,
each ``"when_supported"`` (the default) or ``"when_required"`` (none: no operation
objsdk sends requires one).

The transport applies the dialect to every request it signs (:meth:`outgoing`), so the
callers above add checksum headers freely and no request carries one the dialect
forbids. With neither setting given, a 400 that names an ``x-amz-checksum`` header is
answered by sending that request once more without them (:meth:`retry_without`), and
the client remembers it for its life (per direction: a service that refuses
``x-amz-checksum-mode`` may still store checksums). Callers that must know whether
checksums are sent (CompleteMultipartUpload lists each part's) ask :attr:`sends`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from objsdk import errors
from objsdk._core.secret_headers import SecretHeaders
from objsdk._transport import forks

__all__ = ["CHECKSUM_WHEN", "ChecksumDialect", "is_request_checksum_header"]

CHECKSUM_WHEN = ("when_supported", "when_required")

# The checksum headers of a request that asks the service to check and store one.
_REQUEST_PREFIX = "x-amz-checksum-"
_REQUEST_EXTRA = frozenset({"x-amz-sdk-checksum-algorithm"})
# The header that asks for the stored checksum back (HeadObject/GetObject ChecksumMode).
_MODE = "x-amz-checksum-mode"


# Codes of an answer that refuses a header (never BadDigest or
# XAmzContentChecksumMismatch: those say the bytes were wrong).
_REFUSAL_CODES = frozenset(
    {"InvalidArgument", "InvalidRequest", "BadRequest", "NotImplemented", "UnsupportedHeader"}
)


def is_request_checksum_header(name: str) -> bool:
    """Whether ``name`` asks the service to check or store a checksum."""
    low = name.lower()
    return (low.startswith(_REQUEST_PREFIX) and low != _MODE) or low in _REQUEST_EXTRA


def _is_mode_header(name: str) -> bool:
    return name.lower() == _MODE


class ChecksumDialect:
    """The checksum settings of one client, and what it learned of its service.

    ``request_checksum_calculation`` / ``response_checksum_validation``: ``None`` (not
    set: send them, and learn from a refusal), ``"when_supported"`` (send them, and
    report a refusal), or ``"when_required"`` (never send them). Thread-safe.
    """

    def __init__(
        self,
        request_checksum_calculation: str | None = None,
        response_checksum_validation: str | None = None,
    ) -> None:
        for name, value in (
            ("request_checksum_calculation", request_checksum_calculation),
            ("response_checksum_validation", response_checksum_validation),
        ):
            if value is not None and value not in CHECKSUM_WHEN:
                raise errors.InvalidArgument(
                    f"{name} must be one of {', '.join(CHECKSUM_WHEN)} or None, got {value!r}"
                )
        self.request_checksum_calculation = request_checksum_calculation
        self.response_checksum_validation = response_checksum_validation
        self._lock = threading.Lock()
        self._refused_request = False
        self._refused_mode = False
        forks.register(self)

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # a parent thread may have held it at the fork

    def __repr__(self) -> str:
        return (
            f"ChecksumDialect(request_checksum_calculation={self.request_checksum_calculation!r}, "
            f"response_checksum_validation={self.response_checksum_validation!r}, "
            f"sends={self.sends}, asks={self.asks})"
        )

    @property
    def sends(self) -> bool:
        """Whether requests carry checksums for the service to check and store."""
        return self.request_checksum_calculation != "when_required" and not self._refused_request

    @property
    def asks(self) -> bool:
        """Whether HEAD and GET ask for the stored checksums (``x-amz-checksum-mode``)."""
        return self.response_checksum_validation != "when_required" and not self._refused_mode

    def outgoing(self, headers: Mapping[str, str]) -> dict[str, str]:
        """``headers`` without the checksum headers this dialect does not send."""
        sends, asks = self.sends, self.asks
        return {
            name: value
            for name, value in headers.items()
            if (sends or not is_request_checksum_header(name))
            and (asks or not _is_mode_header(name))
        }

    def retry_without(
        self, error: errors.S3Error, sent: Mapping[str, str], method: str
    ) -> dict[str, str] | None:
        """After ``error`` answered a request that carried the headers ``sent``: the
        headers to send it once more with, without the checksum headers refused, or
        None for no such retry.

        Only with the setting of the direction concerned not given, and only for a 400
        (or 501) refusal whose message names an ``x-amz-checksum`` header and no
        mismatch. The refusal is remembered for the client's life. A HEAD answer has no
        body to name a header: a 400 to a HEAD that asked for checksums is tried again
        without ``x-amz-checksum-mode``, remembered only once that attempt succeeds
        (:meth:`confirm_head_refusal`)."""
        if error.status not in (400, 501):
            return None
        carried_request = self.request_checksum_calculation is None and any(
            is_request_checksum_header(n) for n in sent
        )
        carried_mode = self.response_checksum_validation is None and any(
            _is_mode_header(n) for n in sent
        )
        # The headers sent, signature and token included: SecretHeaders, whose repr hides
        # them, as the caller's local.
        if method == "HEAD":
            return (
                SecretHeaders((n, v) for n, v in sent.items() if not _is_mode_header(n))
                if carried_mode
                else None
            )
        if not (carried_request or carried_mode) or error.code not in _REFUSAL_CODES:
            return None
        text = error.message.lower()
        # A checksum that does not match is the data's fault, never the dialect's.
        if "x-amz-checksum" not in text or "match" in text:
            return None
        names_mode = _MODE in text
        names_other = "x-amz-checksum" in text.replace(_MODE, "")
        refuses_mode = carried_mode and (names_mode or not names_other)
        refuses_request = carried_request and (names_other or not names_mode)
        if not (refuses_mode or refuses_request):
            return None
        with self._lock:
            self._refused_mode |= refuses_mode
            self._refused_request |= refuses_request
        return SecretHeaders(self.outgoing(sent))

    def confirm_head_refusal(self) -> None:
        """A HEAD refused with 400 succeeded once sent without ``x-amz-checksum-mode``:
        remember that the service refuses it."""
        with self._lock:
            self._refused_mode = True
