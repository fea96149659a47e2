"""Pulsar's ``advertisedListeners``: the names a broker is known by on each network.

The setting is a comma-separated list of ``name:scheme://host:port`` entries
(``internal:pulsar://10.0.0.5:6650,external:pulsar+ssl://broker.example.com:6651``).
A name may repeat to give one listener several URLs, at most one per scheme
(``pulsar``, ``pulsar+ssl``, ``http``, ``https``), and one ``host:port`` belongs to
one listener only. A client names the listener it reaches the broker through
(LOOKUP's ``advertised_listener_name``, the HTTP lookup's ``listenerName``) and is
given that listener's URLs.

Parsing follows Pulsar's ``MultipleListenerValidator`` and its messages; quasar is
stricter in one way: an entry with another scheme, or without a host or port, is
refused rather than kept as an address nobody can use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

__all__ = ["AdvertisedListener", "parse_advertised_listeners"]

# Scheme -> the AdvertisedListener field it fills.
_SCHEMES = {
    "pulsar": "broker_service_url",
    "pulsar+ssl": "broker_service_url_tls",
    "http": "http_url",
    "https": "https_url",
}


@dataclass(frozen=True)
class AdvertisedListener:
    """One named listener's URLs (None where it has none of that scheme)."""

    name: str
    broker_service_url: str | None = None
    broker_service_url_tls: str | None = None
    http_url: str | None = None
    https_url: str | None = None


@lru_cache(maxsize=8)
def parse_advertised_listeners(text: str) -> dict[str, AdvertisedListener]:
    """The listeners ``text`` declares, by name, in declaration order (empty for
    an empty setting).

    Raises:
        ValueError: an entry without a listener name, a URL that is not
            ``scheme://host:port`` with one of the four schemes, two URLs of one
            scheme for one listener, or one ``host:port`` given to two listeners.
    """
    urls: dict[str, dict[str, str]] = {}
    owner_of_address: dict[str, str] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        name, sep, url = entry.partition(":")
        name, url = name.strip(), url.strip()
        if not sep or not name:
            raise ValueError(
                "the configure entry `advertisedListeners` is invalid. because "
                f"{entry.strip()} do not contain listener name"
            )
        scheme, address = _split_url(url)
        fields = urls.setdefault(name, {})
        field = _SCHEMES[scheme]
        if field in fields:
            raise ValueError(f"there are redundant configure for listener `{name}`")
        fields[field] = url
        owner = owner_of_address.setdefault(address, name)
        if owner != name:
            raise ValueError(f"must not specify `{address}` to different listener.")
    return {name: AdvertisedListener(name, **fields) for name, fields in urls.items()}


def _split_url(url: str) -> tuple[str, str]:
    """``url``'s scheme (lower case) and ``host:port``.

    Raises:
        ValueError: not ``scheme://host:port`` with a known scheme.
    """
    invalid = f"the value {url} in the `advertisedListeners` configure is invalid"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError(invalid) from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(f"{invalid}: the scheme must be one of {', '.join(_SCHEMES)}")
    if not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ValueError(f"{invalid}: expected {scheme}://host:port")
    return scheme, f"{parts.hostname}:{port}"
