"""Which proxy a URL goes through, read from the environment as boto3, requests and urllib
read it (objsdk._core.proxies): the variables' names and case, the proxy URL and its
credentials, NO_PROXY's entries, and the addresses never proxied."""

from __future__ import annotations

import base64
import pickle
from urllib.parse import urlsplit

import pytest
import requests.utils

from objsdk import Client, ConfigError
from objsdk._core.proxies import NO_PROXIES, Proxies, Proxy


def _for(env: dict[str, str], url: str) -> str | None:
    proxy = Proxies.from_environ(env).for_url(url)
    return None if proxy is None else proxy.url


def test_http_and_https_urls_take_their_own_variable() -> None:
    env = {"HTTP_PROXY": "http://plain:3128", "HTTPS_PROXY": "http://secure:8080"}
    assert _for(env, "http://s3.example.com/b/k") == "http://plain:3128"
    assert _for(env, "https://s3.example.com/b/k") == "http://secure:8080"
    assert _for({"HTTP_PROXY": "http://plain:3128"}, "https://s3.example.com/") is None
    assert _for({"ALL_PROXY": "http://all:3128"}, "https://s3.example.com/") is None  # as boto3


def test_the_lower_case_variable_wins_and_set_empty_turns_the_upper_case_one_off() -> None:
    assert (
        _for({"HTTPS_PROXY": "http://u:1", "https_proxy": "http://l:2"}, "https://h/")
        == "http://l:2"
    )
    assert _for({"HTTPS_PROXY": "http://u:1", "https_proxy": ""}, "https://h/") is None
    env = {"HTTP_PROXY": "http://p:1", "NO_PROXY": "h", "no_proxy": "other"}
    assert _for(env, "http://h/") == "http://p:1"


def test_http_proxy_is_ignored_under_cgi_where_a_client_header_would_set_it() -> None:
    """httpoxy: a CGI script gets the request's ``Proxy:`` header as HTTP_PROXY."""
    env = {"REQUEST_METHOD": "GET", "HTTP_PROXY": "http://evil:1"}
    assert _for(env, "http://h/") is None
    assert _for({**env, "http_proxy": "http://mine:2"}, "http://h/") == "http://mine:2"


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("proxy.corp:3128", "http://proxy.corp:3128"),
        ("//proxy.corp:3128", "http://proxy.corp:3128"),
        ("http://proxy.corp", "http://proxy.corp:80"),
        ("https://proxy.corp", "https://proxy.corp:443"),
        ("HTTP://Proxy.Corp:3128/ignored/path", "http://proxy.corp:3128"),
        ("http://[fd00::1]:3128", "http://[fd00::1]:3128"),
    ],
)
def test_a_proxy_url_defaults_to_http_and_the_schemes_port(value: str, url: str) -> None:
    assert _for({"HTTPS_PROXY": value}, "https://s3.amazonaws.com/") == url


def test_credentials_in_the_proxy_url_become_proxy_authorization_as_requests_makes_it() -> None:
    proxy = Proxies.from_environ({"HTTPS_PROXY": "http://me%40corp:p%3Ass%20w@proxy:3128"}).https
    assert proxy is not None
    assert proxy.authorization == "Basic " + base64.b64encode(b"me@corp:p:ss w").decode()
    adapter = requests.adapters.HTTPAdapter()
    assert adapter.proxy_headers("http://me%40corp:p%3Ass%20w@proxy:3128") == {
        "Proxy-Authorization": proxy.authorization
    }
    assert Proxies.from_environ({"HTTP_PROXY": "http://proxy:3128"}).http == Proxy(
        "http", "proxy", 3128, "HTTP_PROXY"
    )


def test_no_repr_shows_the_proxy_password_or_its_header() -> None:
    proxies = Proxies.from_environ({"HTTPS_PROXY": "http://user:hunter2@proxy:3128"})
    assert proxies.https is not None
    for text in (repr(proxies), str(proxies), repr(proxies.https), str(proxies.https)):
        assert "hunter2" not in text
        assert "Basic" not in text
        assert "user" not in text
    assert repr(proxies.https) == "Proxy('http://proxy:3128', from HTTPS_PROXY)"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("socks5://user:hunter2@proxy:1080", "HTTPS_PROXY names a proxy objsdk cannot go through (socks5://proxy)"),
        ("http://user:hunter2@proxy:99999", "its port is not a number"),
        ("http://user:hunter2@:3128", "it names no host"),
    ],
)  # fmt: skip
def test_a_proxy_that_cannot_be_used_is_a_config_error_naming_the_variable_not_the_password(
    value: str, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="HTTPS_PROXY") as caught:
        Proxies.from_environ({"HTTPS_PROXY": value})
    assert words in str(caught.value)
    assert "hunter2" not in str(caught.value)
    # ... raised when the client is built, before any request.
    monkeypatch.setenv("HTTPS_PROXY", value)
    with pytest.raises(ConfigError, match="HTTPS_PROXY"):
        Client("https://s3.example.com", "AKIAEXAMPLE", "secret")


@pytest.mark.parametrize(
    ("no_proxy", "url", "bypassed"),
    [
        ("*", "https://anything.example/", True),
        ("example.com", "https://example.com/", True),
        ("example.com", "https://s3.example.com/", True),
        (".example.com", "https://s3.example.com/", True),
        ("*.example.com", "https://s3.example.com/", True),
        ("example.com", "https://badexample.com/", False),
        ("EXAMPLE.com", "https://s3.Example.COM/", True),
        ("example.com:9000", "https://s3.example.com:9000/", True),
        ("example.com:9000", "https://s3.example.com/", False),
        ("127.0.0.1", "http://127.0.0.1:9000/", True),
        ("127.0.0.1", "http://127.0.0.2:9000/", False),
        ("10.0.0.0/8", "http://10.1.2.3/", True),
        ("10.0.0.0/8", "http://11.1.2.3/", False),
        ("fd00::/8", "http://[fd12::1]:9000/", True),
        ("::1", "http://[::1]:9000/", True),
        ("[::1]:9000", "http://[::1]:9000/", True),
        ("[::1]:9000", "http://[::1]:9001/", False),
        ("10.0.0.0/8", "http://ten.example/", False),
        (" a.example , ,b.example ", "http://b.example/", True),
        ("", "http://b.example/", False),
    ],
)
def test_no_proxy_entries_name_hosts_with_their_subdomains_addresses_and_networks(
    no_proxy: str, url: str, bypassed: bool
) -> None:
    env = {"HTTP_PROXY": "http://p:1", "HTTPS_PROXY": "http://p:1", "NO_PROXY": no_proxy}
    assert (_for(env, url) is None) is bypassed


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/api/token",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://169.254.170.2/v2/credentials/x",
        "http://169.254.170.23/v1/credentials",
        "http://[fd00:ec2::23]/v1/credentials",
    ],
)
def test_the_instance_metadata_and_container_credentials_addresses_are_never_proxied(
    url: str,
) -> None:
    assert _for({"HTTP_PROXY": "http://p:1", "http_proxy": "http://p:1"}, url) is None


def test_without_a_proxy_variable_nothing_is_proxied() -> None:
    assert not Proxies.from_environ({"NO_PROXY": "x"})
    assert not NO_PROXIES
    assert Proxies.from_environ({"HTTP_PROXY": "http://p:1"})
    assert NO_PROXIES.for_url("https://s3.amazonaws.com/") is None


@pytest.fixture
def clean_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("env", "url"),
    [
        ({"HTTPS_PROXY": "http://p:3128"}, "https://s3.us-east-1.amazonaws.com/b/k"),
        ({"HTTP_PROXY": "http://p:3128"}, "http://minio.local:9000/b/k"),
        ({"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "amazonaws.com"}, "https://s3.amazonaws.com/"),
        ({"HTTPS_PROXY": "http://p:3128", "NO_PROXY": ".amazonaws.com"}, "https://b.s3.amazonaws.com/"),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "10.0.0.0/8"}, "http://10.2.3.4:9000/"),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "10.0.0.0/8"}, "http://192.168.1.1:9000/"),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "127.0.0.1"}, "http://127.0.0.1:9000/"),
        ({"HTTP_PROXY": "http://p:3128", "no_proxy": "*"}, "http://minio.local/"),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "minio.local:9000"}, "http://minio.local:9000/"),
        ({"HTTP_PROXY": "http://p:3128", "NO_PROXY": "minio.local:9000"}, "http://minio.local:9001/"),
        ({"https_proxy": "http://l:1", "HTTPS_PROXY": "http://u:2"}, "https://s3.amazonaws.com/"),
    ],
)  # fmt: skip
def test_the_choice_is_requests_choice_from_the_same_environment(
    env: dict[str, str], url: str, clean_proxy_env: pytest.MonkeyPatch
) -> None:
    """Side by side with requests (get_environ_proxies, then select_proxy: what a
    requests Session sends through), where requests' rules are a proxy's rules."""
    for name, value in env.items():
        clean_proxy_env.setenv(name, value)
    theirs = requests.utils.select_proxy(url, requests.utils.get_environ_proxies(url))
    ours = Proxies.from_environ(env).for_url(url)
    assert (ours is None) == (theirs is None)
    if ours is not None and theirs is not None:
        parts = urlsplit(theirs)
        assert (ours.host, ours.port) == (parts.hostname, parts.port or 80)


def test_a_client_takes_the_proxies_of_the_process_it_is_built_or_unpickled_in(
    clean_proxy_env: pytest.MonkeyPatch,
) -> None:
    """Read when the client is built, as boto3 reads them; a pickle carries none (nor
    their credentials): the worker that unpickles it reads its own environment."""
    clean_proxy_env.setenv("HTTPS_PROXY", "http://user:hunter2@proxy.corp:3128")
    client = Client("https://s3.example.com", "AKIAEXAMPLE", "secret", pickle_credentials=True)
    with client:
        assert client.transport.proxies.https.url == "http://proxy.corp:3128"  # type: ignore[attr-defined]
        data = pickle.dumps(client)
    assert b"hunter2" not in data
    assert b"proxy.corp" not in data
    clean_proxy_env.setenv("HTTPS_PROXY", "http://worker-proxy:8080")
    with pickle.loads(data) as copy:
        assert copy.transport.proxies.https.url == "http://worker-proxy:8080"
    clean_proxy_env.delenv("HTTPS_PROXY")
    with pickle.loads(data) as copy:
        assert copy.transport.proxies is None
