"""The error tree as a specification: every error a caller can catch is defined in
``objsdk/errors.py`` and drawn in its docstring (and in docs/errors.md) as it is, the
old import locations still give the same classes, and one helper builds S3 errors."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import re
from pathlib import Path

import pytest

import objsdk
from objsdk import errors

ROOT = Path(__file__).resolve().parent.parent


def _tree(text: str) -> list[tuple[int, str]]:
    """(depth, class name) for each line of the tree that starts at ``ObjsdkError``."""
    start = text.index("ObjsdkError\n")
    indent = start - (text.rfind("\n", 0, start) + 1)
    lines = text[start:].splitlines()
    tree = [(0, "ObjsdkError")]
    for line in lines[1:]:
        found = re.match(r"^([ │]*)[├└]── (\w+)", line[indent:])
        if found is None:
            break
        tree.append((len(found[1]) // 4 + 1, found[2]))
    return tree


def _public_modules() -> list[str]:
    return [
        m.name
        for m in pkgutil.walk_packages(objsdk.__path__, "objsdk.")
        if not any(part.startswith("_") for part in m.name.split("."))
    ]


def test_the_docstring_tree_is_the_class_tree():
    tree = _tree(errors.__doc__ or "")
    parents: list[str] = []
    for depth, name in tree[1:]:
        del parents[depth - 1 :]
        parent = parents[-1] if parents else "ObjsdkError"
        assert getattr(errors, parent) in getattr(errors, name).__bases__, name
        parents.append(name)
    drawn = {name for _, name in tree}
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.ObjsdkError)
    }
    assert drawn == defined


def test_docs_errors_md_draws_the_same_tree_as_the_docstring():
    doc = (ROOT / "docs" / "errors.md").read_text()
    block = doc[
        doc.index("```\nObjsdkError") + 4 : doc.index("```", doc.index("```\nObjsdkError") + 4)
    ]
    docstring = errors.__doc__ or ""
    drawn = docstring[docstring.index("    ObjsdkError") :]
    drawn = "\n".join(line[4:] for line in drawn.split("\n\n")[0].splitlines())
    assert block.strip() == drawn.strip()


def test_every_objsdk_error_a_public_module_exports_is_defined_in_errors_py():
    elsewhere = []
    for name in _public_modules():
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for exported in getattr(module, "__all__", []):
            value = getattr(module, exported)
            is_error = isinstance(value, type) and issubclass(value, errors.ObjsdkError)
            if is_error and value.__module__ != "objsdk.errors":
                elsewhere.append(f"{name}.{exported}")
    assert elsewhere == []


def test_errors_py_exports_every_error_it_defines():
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.ObjsdkError)
    }
    assert defined <= set(errors.__all__)


def test_the_old_homes_of_the_moved_errors_give_the_same_classes():
    from objsdk import datasets, testing
    from objsdk._core import config, s3xml
    from objsdk.datasets import errors as dataset_errors
    from objsdk.testing import toxiproxy

    assert config.ConfigError is errors.ConfigError
    assert datasets.ShardError is dataset_errors.ShardError is errors.ShardError
    assert testing.ToxiproxyError is toxiproxy.ToxiproxyError is errors.ToxiproxyError
    assert s3xml.XMLParseError is errors.XMLParseError
    assert issubclass(errors.ConfigError, errors.InvalidArgument)
    assert issubclass(errors.XMLParseError, errors.ProtocolError)


@pytest.mark.parametrize(
    "error",
    [
        errors.ConfigError("no endpoint"),
        errors.ShardError("truncated", shard="b/s.tar", member="a.jpg", offset=512),
        errors.ToxiproxyError("refused", status=409),
        errors.XMLParseError("malformed XML response (3 bytes)", operation="list"),
    ],
    ids=type,
)
def test_a_moved_error_keeps_its_message_and_attributes_through_a_pickle(error):
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error)
    assert str(clone) == str(error)
    assert clone.__dict__ == error.__dict__


# -- s3_error: the one way to build an S3 error --------------------------------------------


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("NoSuchKey", errors.NoSuchKey),
        ("NoSuchBucket", errors.NoSuchBucket),
        ("SignatureDoesNotMatch", errors.AccessDenied),
        ("SlowDownWrite", errors.SlowDown),
        ("TooManyRequests", errors.SlowDown),
        ("BucketAlreadyOwnedByYou", errors.BucketAlreadyExists),
        ("XMinioInvalidObjectName", errors.InvalidObjectName),
        ("InvalidObjectState", errors.InvalidObjectState),
        ("ObjectNotInActiveTierError", errors.InvalidObjectState),
        ("NoSuchUpload", errors.S3Error),
    ],
)
def test_an_s3_error_is_of_the_class_its_code_names(code, cls):
    err = errors.s3_error(400, code, "text", bucket="b", key="k")
    assert type(err) is cls
    assert err.code == code


@pytest.mark.parametrize(
    ("status", "key", "cls", "code"),
    [
        (404, "k", errors.NoSuchKey, "NoSuchKey"),
        (404, None, errors.NoSuchBucket, "NoSuchBucket"),
        (403, "k", errors.AccessDenied, "AccessDenied"),
        (412, "k", errors.PreconditionFailed, "PreconditionFailed"),
        (416, "k", errors.InvalidRange, "InvalidRange"),
        (503, None, errors.SlowDown, "SlowDown"),
        (429, "k", errors.SlowDown, "TooManyRequests"),
        (500, "k", errors.S3Error, "HTTP500"),
    ],
)
def test_an_s3_error_without_a_code_takes_the_one_its_status_stands_for(status, key, cls, code):
    err = errors.s3_error(status, bucket="b", key=key)
    assert (type(err), err.code, err.status) == (cls, code, status)


def test_an_s3_error_carries_every_attribute_and_says_them_in_its_message():
    err = errors.s3_error(
        404,
        "NoSuchKey",
        "The specified key does not exist.",
        bucket="b",
        key="k",
        request_id="R1",
        operation="get_object",
    )
    assert (err.status, err.code, err.message, err.request_id) == (
        404,
        "NoSuchKey",
        "The specified key does not exist.",
        "R1",
    )
    assert (err.bucket, err.key, err.operation) == ("b", "k", "get_object")
    assert str(err) == (
        "get_object: NoSuchKey (HTTP 404) (bucket 'b', key 'k'): "
        "The specified key does not exist. [request id R1]"
    )


def test_the_cli_s_missing_bucket_is_the_error_a_hand_built_one_was():
    built = errors.s3_error(404, "NoSuchBucket", "The specified bucket does not exist", bucket="b")
    by_hand = errors.NoSuchBucket(
        404, "NoSuchBucket", "The specified bucket does not exist", bucket="b"
    )
    assert type(built) is type(by_hand)
    assert str(built) == str(by_hand)
    assert built.__dict__ == by_hand.__dict__
