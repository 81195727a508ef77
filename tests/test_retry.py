"""The retry policy's count of broken attempts (``counting_failures``), without a network:
urllib3 and the sendfile PUT report each failed attempt to ``Retry.increment``."""

from __future__ import annotations

import threading

from urllib3.exceptions import NewConnectionError, ProtocolError, ReadTimeoutError
from urllib3.response import HTTPResponse
from urllib3.util.retry import Retry

from objsdk._transport.retry import counting_failures, default_retry, is_idempotent

URL = "http://s3.test/b/k?partNumber=2&uploadId=U"


def _broken() -> ProtocolError:
    return ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))


def test_an_attempt_broken_mid_request_is_counted():
    with counting_failures() as failures:
        default_retry().increment("PUT", URL, error=_broken())
    assert failures.count == 1


def test_a_read_timeout_is_counted():
    with counting_failures() as failures:
        default_retry().increment("PUT", URL, error=ReadTimeoutError(None, URL, "timed out"))  # type: ignore[arg-type]
    assert failures.count == 1


def test_a_failed_connect_is_not_counted():
    error = NewConnectionError(None, "refused")  # type: ignore[arg-type]
    with counting_failures() as failures:
        default_retry().increment("PUT", URL, error=error)
    assert failures.count == 0


def test_an_error_answer_is_not_counted():
    with counting_failures() as failures:
        default_retry().increment("PUT", URL, response=HTTPResponse(status=503))
    assert failures.count == 0


def test_every_retry_of_a_request_is_counted_by_the_policies_it_derives():
    with counting_failures() as failures:
        policy = default_retry()
        for _ in range(2):  # the default allows two read errors
            policy = policy.increment("PUT", URL, error=_broken())
    assert failures.count == 2


def test_attempts_outside_the_block_are_not_counted():
    with counting_failures() as failures:
        pass
    default_retry().increment("PUT", URL, error=_broken())
    assert failures.count == 0


def test_an_inner_block_counts_alone_and_the_outer_resumes_after_it():
    with counting_failures() as outer:
        with counting_failures() as inner:
            default_retry().increment("PUT", URL, error=_broken())
        default_retry().increment("PUT", URL, error=_broken())
    assert (inner.count, outer.count) == (1, 1)


def test_another_threads_attempts_are_not_counted():
    with counting_failures() as failures:
        t = threading.Thread(target=lambda: default_retry().increment("PUT", URL, error=_broken()))
        t.start()
        t.join()
    assert failures.count == 0


def test_a_plain_urllib3_retry_of_the_callers_counts_nothing():
    with counting_failures() as failures:
        Retry(total=3).increment("PUT", URL, error=_broken())
    assert failures.count == 0


def test_on_failure_is_called_at_each_broken_attempt_as_it_is_counted():
    seen: list[int] = []
    with counting_failures(lambda: seen.append(failures.count)) as failures:
        policy = default_retry().increment("PUT", URL, error=_broken())
        assert seen == [1]
        policy.increment("PUT", URL, error=_broken())
    assert seen == [1, 2]


def test_the_classifier_calls_reads_puts_and_deletes_idempotent():
    for method in ("GET", "HEAD", "PUT", "DELETE"):
        assert is_idempotent(method, [])


def test_the_classifier_calls_delete_objects_and_complete_idempotent_and_other_posts_not():
    assert is_idempotent("POST", [("delete", "")])
    assert is_idempotent("POST", [("uploadId", "U")])
    assert not is_idempotent("POST", [("uploads", "")])  # CreateMultipartUpload
    assert not is_idempotent("POST", [])


def test_what_the_caller_declares_overrides_the_classifier():
    assert not is_idempotent("GET", [], declared=False)
    assert is_idempotent("POST", [("uploads", "")], declared=True)
