"""The multipart engine's retry rules, on a MockTransport (no server)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from urllib3.exceptions import ProtocolError

import objsdk
from objsdk._core.checksums import crc32c, encode_crc32c
from objsdk._core.parts import Part
from objsdk._io.shared_level import SharedLevel
from objsdk._transfer.multipart import CompletedPart, MultipartSession
from objsdk._transfer.multipart_calls import create_multipart_upload
from objsdk._transfer.progress import ProgressTracker
from objsdk._transport.mock import MockResponse, MockTransport, Request
from objsdk._transport.retry import default_retry

DATA = b"hello world"
CRC = encode_crc32c(crc32c(DATA))
COMPLETE_OK = (
    b"<CompleteMultipartUploadResult><ETag>&quot;e-1&quot;</ETag></CompleteMultipartUploadResult>"
)


def error(code: str) -> bytes:
    return f"<Error><Code>{code}</Code><Message>m</Message></Error>".encode()


def _new_session(
    handler: Callable[[Request], MockResponse],
    *,
    parallel: int | None,
    on_cut: Callable[[], None] | None = None,
) -> MultipartSession:
    return MultipartSession(
        # The client's default number of retries: the engine's calls are retried by the
        # transport's request pipeline.
        MockTransport(handler, retry=default_retry()),
        "b",
        "k",
        headers={},
        content_type=None,
        metadata={},
        parallel=parallel,
        part_size=5 << 20,
        progress=ProgressTracker(None, None),
        on_cut=on_cut,
    )


def session(
    answers: list[MockResponse],
    head: MockResponse | None = None,
    *,
    recorded: tuple[int, ...] = (1,),
) -> MultipartSession:
    def handler(request: Request) -> MockResponse:
        if request.method == "HEAD":
            # By default the service keeps no checksum: Complete's answer names none,
            # and neither does the HEAD that asks for it.
            return head or MockResponse(200, {"Content-Length": "0", "ETag": '"e-1"'})
        return answers.pop(0)

    s = _new_session(handler, parallel=1)
    s.upload_id = "U1"
    for n in recorded:
        part = Part(n - 1, 0, len(DATA))
        s.record(part, (CompletedPart(n, f'"p{n}"'), crc32c(DATA)))
    return s


def posts(s: MultipartSession) -> list[Request]:
    return [r for r in s.transport.requests if r.method == "POST"]  # type: ignore[attr-defined]


def test_complete_answered_200_with_internal_error_is_retried(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    s = session([MockResponse(200, {}, error("InternalError")), MockResponse(200, {}, COMPLETE_OK)])
    info = s.complete(expected_parts=1, size=len(DATA))
    assert info.etag == '"e-1"'
    assert len(posts(s)) == 2
    assert posts(s)[0].body == posts(s)[1].body  # same upload id, same part list


def test_complete_that_finds_its_upload_gone_but_the_object_stored_succeeds():
    # An earlier attempt completed it and its reply was lost.
    head = MockResponse(200, {"Content-Length": str(len(DATA)), "x-amz-checksum-crc32c": CRC})
    s = session([MockResponse(404, {}, error("NoSuchUpload"))], head)
    info = s.complete(expected_parts=1, size=len(DATA))
    assert info.checksums["crc32c"] == CRC


def test_complete_that_finds_its_upload_gone_and_another_object_there_fails():
    head = MockResponse(200, {"Content-Length": "3", "x-amz-checksum-crc32c": "AAAAAA=="})
    s = session([MockResponse(404, {}, error("NoSuchUpload"))], head)
    with pytest.raises(objsdk.S3Error, match="NoSuchUpload"):
        s.complete(expected_parts=1, size=len(DATA))


def test_complete_is_sent_with_the_full_object_crc32c():
    s = session([MockResponse(200, {}, COMPLETE_OK)])
    s.complete(expected_parts=1, size=len(DATA))
    assert posts(s)[0].headers["x-amz-checksum-crc32c"] == CRC
    assert posts(s)[0].headers["x-amz-checksum-type"] == "FULL_OBJECT"


def test_complete_claims_no_checksum_the_service_does_not_report():
    s = session([MockResponse(200, {}, COMPLETE_OK)])
    info = s.complete(expected_parts=1, size=len(DATA))
    assert info.checksums == {}
    assert [r.method for r in s.transport.requests] == ["POST", "HEAD"]  # type: ignore[attr-defined]


def test_complete_whose_answer_names_the_crc32c_sent_asks_nothing_more():
    answer = COMPLETE_OK.replace(
        b"</ETag>", b"</ETag><ChecksumCRC32C>" + CRC.encode() + b"</ChecksumCRC32C>"
    )
    s = session([MockResponse(200, {}, answer)])
    info = s.complete(expected_parts=1, size=len(DATA))
    assert info.checksums == {"crc32c": CRC}
    assert [r.method for r in s.transport.requests] == ["POST"]  # type: ignore[attr-defined]


def test_complete_claims_the_crc32c_a_later_head_of_the_same_object_reports():
    head = MockResponse(
        200, {"Content-Length": "11", "ETag": '"e-1"', "x-amz-checksum-crc32c": CRC}
    )
    s = session([MockResponse(200, {}, COMPLETE_OK)], head)
    info = s.complete(expected_parts=1, size=len(DATA))
    assert info.checksums == {"crc32c": CRC}


@pytest.mark.parametrize("where", ["answer", "head"])
def test_complete_of_an_object_stored_with_another_crc32c_deletes_it_and_fails(where):
    other = encode_crc32c(crc32c(b"hello worle"))
    if where == "answer":
        answer = COMPLETE_OK.replace(
            b"</ETag>", b"</ETag><ChecksumCRC32C>" + other.encode() + b"</ChecksumCRC32C>"
        )
        head = None
    else:
        answer = COMPLETE_OK
        head = MockResponse(
            200, {"Content-Length": "11", "ETag": '"e-1"', "x-amz-checksum-crc32c": other}
        )
    s = session([MockResponse(200, {}, answer), MockResponse(204, {})], head)
    with pytest.raises(objsdk.IntegrityError, match="it was deleted") as info:
        s.complete(expected_parts=1, size=len(DATA))
    assert (info.value.bucket, info.value.key) == ("b", "k")
    assert [r.method for r in s.transport.requests][-1] == "DELETE"  # type: ignore[attr-defined]


def test_complete_does_not_judge_an_object_replaced_before_its_head():
    head = MockResponse(
        200, {"Content-Length": "3", "ETag": '"other"', "x-amz-checksum-crc32c": "AAAAAA=="}
    )
    s = session([MockResponse(200, {}, COMPLETE_OK)], head)
    info = s.complete(expected_parts=1, size=len(DATA))
    assert info.checksums == {}
    assert "DELETE" not in [r.method for r in s.transport.requests]  # type: ignore[attr-defined]


CREATED = b"<InitiateMultipartUploadResult><UploadId>U9</UploadId></InitiateMultipartUploadResult>"
UPLOADS = (
    b"<ListMultipartUploadsResult><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>"
)
# The server's clock, as the listing's Date tells it: unrelated to the client's.
SERVER_NOW = "Sun, 01 Jan 2034 12:00:10 GMT"
ME = ("arn:aws:iam::111122223333:user/me", "me")


def uploads_of_k(*uploads: tuple[str, str, tuple[str, str]]) -> bytes:
    """A ListMultipartUploads answer: (upload id, Initiated, (Initiator ID, DisplayName))."""
    body = "".join(
        f"<Upload><Key>k</Key><UploadId>{upload_id}</UploadId>"
        f"<Initiator><ID>{who}</ID><DisplayName>{name}</DisplayName></Initiator>"
        f"<Initiated>{initiated}</Initiated></Upload>"
        for upload_id, initiated, (who, name) in uploads
    )
    return (
        "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
        f"{body}</ListMultipartUploadsResult>"
    ).encode()


def create_after_a_lost_reply(listing: bytes, date: str | None = SERVER_NOW) -> MockTransport:
    """A transport whose first Create reached the server and answered 503, whose second
    returns U9, and whose ListMultipartUploads answers ``listing`` with that ``Date``."""
    answers = {
        "POST": [MockResponse(503, {}, error("SlowDown")), MockResponse(200, {}, CREATED)],
        "GET": [MockResponse(200, {"Date": date} if date else {}, listing)],
        "DELETE": [MockResponse(204)],
    }
    return MockTransport(lambda request: answers[request.method].pop(0), retry=default_retry())


def aborted(transport: MockTransport) -> list[str]:
    """The upload ids the requests sent to ``transport`` aborted."""
    return [r.url.rpartition("uploadId=")[2] for r in transport.requests if r.method == "DELETE"]


def test_create_is_retried_on_a_503_answer(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    answers = [
        MockResponse(503, {}, error("SlowDown")),
        MockResponse(200, {}, CREATED),
        MockResponse(200, {}, UPLOADS),
    ]
    transport = MockTransport(lambda request: answers.pop(0), retry=default_retry())
    assert create_multipart_upload(transport, "b", "k") == "U9"
    assert [r.method for r in transport.requests] == ["POST", "POST", "GET"]


def test_a_create_retried_after_a_lost_reply_aborts_the_upload_it_left(monkeypatch):
    # The first attempt reached the server (upload U1), its answer came back as a 503.
    monkeypatch.setattr("time.sleep", lambda s: None)
    transport = create_after_a_lost_reply(
        uploads_of_k(("U1", "2034-01-01T12:00:09.400Z", ME), ("U9", "2034-01-01T12:00:09.700Z", ME))
    )
    assert create_multipart_upload(transport, "b", "k") == "U9"
    assert aborted(transport) == ["U1"]


@pytest.mark.parametrize("year", [2001, 2099], ids=["server-behind", "server-ahead"])
def test_the_lost_upload_is_judged_by_the_servers_date_not_the_local_clock(monkeypatch, year):
    # The server's clock is decades from the client's: only the listing's Date counts.
    monkeypatch.setattr("time.sleep", lambda s: None)
    transport = create_after_a_lost_reply(
        uploads_of_k(("U1", f"{year}-01-01T12:00:09Z", ME), ("U9", f"{year}-01-01T12:00:10Z", ME)),
        date=f"Mon, 01 Jan {year} 12:00:10 GMT",
    )
    assert create_multipart_upload(transport, "b", "k") == "U9"
    assert aborted(transport) == ["U1"]


def test_an_upload_of_the_key_started_before_the_first_attempt_is_another_writers(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    transport = create_after_a_lost_reply(
        uploads_of_k(
            ("OTHER", "2034-01-01T12:00:07.000Z", ME),  # 3 s before the first attempt
            ("U1", "2034-01-01T12:00:09.500Z", ME),
            ("U9", "2034-01-01T12:00:09.800Z", ME),
        )
    )
    assert create_multipart_upload(transport, "b", "k") == "U9"
    assert aborted(transport) == ["U1"]


def test_an_upload_of_the_key_by_another_initiator_is_never_aborted(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    someone = ("arn:aws:iam::111122223333:user/someone", "someone")
    transport = create_after_a_lost_reply(
        uploads_of_k(
            ("THEIRS", "2034-01-01T12:00:09.600Z", someone),
            ("U9", "2034-01-01T12:00:09.800Z", ME),
        )
    )
    assert create_multipart_upload(transport, "b", "k") == "U9"
    assert aborted(transport) == []


def test_when_more_than_one_upload_could_be_the_lost_one_none_is_aborted_and_all_are_logged(
    monkeypatch, caplog
):
    monkeypatch.setattr("time.sleep", lambda s: None)
    transport = create_after_a_lost_reply(
        uploads_of_k(
            ("U1", "2034-01-01T12:00:09.500Z", ME),
            ("U2", "2034-01-01T12:00:09.600Z", ME),
            ("U9", "2034-01-01T12:00:09.800Z", ME),
        )
    )
    with caplog.at_level("WARNING", logger="objsdk"):
        assert create_multipart_upload(transport, "b", "k") == "U9"
    assert aborted(transport) == []
    (record,) = [r for r in caplog.records if "none is aborted" in r.getMessage()]
    assert record.name == "objsdk"
    assert "U1" in record.getMessage()
    assert "U2" in record.getMessage()
    assert "U9" not in record.getMessage()


def test_without_the_servers_date_no_upload_is_aborted(monkeypatch, caplog):
    monkeypatch.setattr("time.sleep", lambda s: None)
    transport = create_after_a_lost_reply(
        uploads_of_k(("U1", "2034-01-01T12:00:09.5Z", ME), ("U9", "2034-01-01T12:00:09.8Z", ME)),
        date=None,
    )
    with caplog.at_level("WARNING", logger="objsdk"):
        assert create_multipart_upload(transport, "b", "k") == "U9"
    assert aborted(transport) == []
    assert any("U1" in r.getMessage() for r in caplog.records)


def test_create_is_not_retried_on_a_client_error():
    transport = MockTransport(
        lambda request: MockResponse(403, {}, error("AccessDenied")), retry=default_retry()
    )
    with pytest.raises(objsdk.AccessDenied):
        create_multipart_upload(transport, "b", "k")
    assert [r.method for r in transport.requests if r.method == "POST"] == ["POST"]


def test_a_refused_create_is_not_taken_for_a_lost_reply():
    # A 403 is the server's answer: no upload was created, so none is looked for.
    transport = MockTransport(
        lambda request: MockResponse(403, {}, error("AccessDenied")), retry=default_retry()
    )
    with pytest.raises(objsdk.AccessDenied):
        create_multipart_upload(transport, "b", "k")
    assert [(r.method, r.operation) for r in transport.requests] == [
        ("POST", "create_multipart_upload")
    ]


def test_a_refusal_after_a_lost_reply_still_looks_for_the_upload_left(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    answers = {
        "POST": [
            MockResponse(503, {}, error("SlowDown")),
            MockResponse(403, {}, error("AccessDenied")),
        ],
        "GET": [
            MockResponse(
                200, {"Date": SERVER_NOW}, uploads_of_k(("U1", "2034-01-01T12:00:09.5Z", ME))
            )
        ],
        "DELETE": [MockResponse(204)],
    }
    transport = MockTransport(lambda request: answers[request.method].pop(0), retry=default_retry())
    with pytest.raises(objsdk.AccessDenied):
        create_multipart_upload(transport, "b", "k")
    assert aborted(transport) == ["U1"]


def _session_with_parts(numbers: list[int], at: list[int] | None = None) -> MultipartSession:
    """Parts of one byte each, numbered ``numbers``, at offsets ``at`` (default: the
    part's index, so consecutive numbers hold consecutive bytes)."""
    s = session([MockResponse(200, {}, COMPLETE_OK)], recorded=())
    for n, offset in zip(numbers, at if at is not None else [n - 1 for n in numbers], strict=True):
        s.record(Part(n - 1, offset, offset + 1), (CompletedPart(n, f'"{n}"'), 0))
    return s


def test_complete_sends_parts_numbered_1_to_n():
    session = _session_with_parts([1, 2])
    session.complete(expected_parts=2, size=2)
    (request,) = posts(session)
    assert request.operation == "complete_multipart_upload"
    assert b"<PartNumber>1</PartNumber>" in request.body
    assert b"<PartNumber>2</PartNumber>" in request.body


def test_complete_refuses_parts_that_leave_a_gap_in_the_object():
    with pytest.raises(objsdk.ProtocolError, match="do not make up"):
        _session_with_parts([1, 3]).complete(expected_parts=None, size=2)


def test_complete_refuses_parts_that_overlap():
    with pytest.raises(objsdk.ProtocolError, match="do not make up"):
        _session_with_parts([1, 2], at=[0, 0]).complete(expected_parts=None, size=2)


def test_complete_refuses_parts_whose_numbers_are_not_in_the_order_of_their_bytes():
    with pytest.raises(objsdk.ProtocolError, match="do not make up"):
        _session_with_parts([1, 2], at=[1, 0]).complete(expected_parts=None, size=2)


def test_complete_accepts_part_numbers_with_gaps_when_the_parts_cover_the_object():
    session = _session_with_parts([1, 2, 10_000], at=[0, 1, 2])
    session.complete(expected_parts=None, size=3)
    (request,) = posts(session)
    assert b"<PartNumber>10000</PartNumber>" in request.body


def test_complete_refuses_fewer_parts_than_planned():
    with pytest.raises(objsdk.ProtocolError, match="do not make up"):
        _session_with_parts([1]).complete(expected_parts=2, size=1)


def _cut_session(
    broken_parts: set[int], parallel: int | None = 2
) -> tuple[MultipartSession, list[int]]:
    """A session whose transport reports a broken attempt (as urllib3 and the sendfile
    PUT do, to the retry policy) while sending the parts numbered ``broken_parts``;
    returns it with the list ``on_cut`` appends to."""

    def handler(request: Request) -> MockResponse:
        if request.method == "POST":
            return MockResponse(200, {}, CREATED)
        number = int(request.url.split("partNumber=")[1].split("&")[0])
        if number in broken_parts:
            error = ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))
            default_retry().increment("PUT", request.url, error=error)
            assert cuts, "on_cut is called before the part is sent again"
        return MockResponse(200, {"ETag": f'"p{number}"'})

    cuts: list[int] = []
    s = _new_session(handler, parallel=parallel, on_cut=lambda: cuts.append(1))
    s.start()
    return s, cuts


def _three_parts() -> list[tuple[Part, memoryview]]:
    return [(Part(i, i * 4, i * 4 + 4), memoryview(bytearray(4))) for i in range(3)]


def test_a_part_whose_connection_breaks_calls_on_cut_before_it_is_sent_again():
    s, cuts = _cut_session({2})
    s.send_all(iter(_three_parts()), lambda body: None)
    s.pool.close()  # type: ignore[union-attr]
    assert cuts == [1]


def test_parts_sent_without_a_broken_connection_do_not_call_on_cut():
    s, cuts = _cut_session(set())
    s.send_all(iter(_three_parts()), lambda body: None)
    s.pool.close()  # type: ignore[union-attr]
    assert cuts == []


def test_adaptive_parts_tell_the_level_when_each_starts_and_ends(monkeypatch):
    events: list[str] = []
    monkeypatch.setattr(SharedLevel, "part_started", lambda self: events.append("start"))
    monkeypatch.setattr(SharedLevel, "part_ended", lambda self: events.append("end"))
    s, _ = _cut_session(set(), parallel=None)
    s.send_all(iter(_three_parts()), lambda body: None)
    s.pool.close()  # type: ignore[union-attr]
    assert events.count("start") == events.count("end") == 3


def test_a_create_interrupted_while_its_answer_is_on_the_way_aborts_the_upload_it_left():
    # Ctrl-C or SIGTERM once the server has created the upload (U1), before the client
    # read its id: nothing else would ever abort it.
    listing = uploads_of_k(
        ("OTHER", "2034-01-01T12:00:07.000Z", ME),  # another writer's, 3 s earlier
        ("U1", "2034-01-01T12:00:09.500Z", ME),
    )

    def handler(request: Request) -> MockResponse:
        if request.method == "POST":
            raise KeyboardInterrupt
        if request.method == "GET":
            return MockResponse(200, {"Date": SERVER_NOW}, listing)
        return MockResponse(204)

    transport = MockTransport(handler, retry=default_retry())
    with pytest.raises(KeyboardInterrupt):
        create_multipart_upload(transport, "b", "k")
    (abort,) = [r for r in transport.requests if r.method == "DELETE"]
    assert "uploadId=U1" in abort.url


def test_an_upload_interrupted_right_after_its_create_is_aborted(tmp_path, monkeypatch):
    # Interrupted once Create has answered, before the part workers exist.
    def handler(request: Request) -> MockResponse:
        if request.method == "POST":
            return MockResponse(200, {}, CREATED)
        return MockResponse(204)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("objsdk._transfer.multipart.PartPool", interrupted)
    path = tmp_path / "f"
    path.write_bytes(b"x" * (6 << 20))
    transport = MockTransport(handler, retry=default_retry())
    client = objsdk.Client("http://s3.test", "A", "S", transport=transport)
    with pytest.raises(KeyboardInterrupt):
        client.upload("b", "k", path, part_size=5 << 20, multipart_threshold=5 << 20)
    assert [r.method for r in transport.requests] == ["POST", "DELETE"]
    assert "uploadId=U9" in transport.requests[-1].url
