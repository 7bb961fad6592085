"""A server address as users write it (`OLLAMA_HOST`, `--host`, a profile's base_url) turned
into the URL the HTTP client needs, or one line saying what is wrong with it: the same
forms the ollama CLI accepts, checked here before any request fails on them."""

from __future__ import annotations

import re

from localgpt_cli.errors import setting_error

DEFAULT_HOST = "http://127.0.0.1:11434"
HOST_HINT = "Use host, host:port, [IPv6]:port or http(s)://host:port."
_HOSTNAME = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?")


def normalize_host(value: str, name: str = "OLLAMA_HOST") -> str:
    """Accept every form Ollama accepts (`host`, `host:port`, `:port`, URLs) -> a URL.

    `0.0.0.0` and `::` are listening addresses, not places to connect to: map them to
    loopback, as the ollama CLI does. Anything that is not a host name or an IP address
    with a port in 1-65535 is one line naming `name` (the variable, flag or file it came
    from; `setting_error` picks the exit code) here, before the HTTP client fails on it.
    """
    raw = value.strip()
    if not raw:
        return DEFAULT_HOST
    scheme = "http"
    rest = raw
    if "://" in raw:
        scheme, rest = raw.split("://", 1)
        if scheme not in ("http", "https"):
            raise setting_error(name, f"{name} {value!r} has scheme {scheme!r}.",
                                hint="Use http://host:port or https://host:port.")
    path = ""
    if "/" in rest:
        rest, path = rest.split("/", 1)
        path = "/" + path.rstrip("/") if path.strip("/") else ""
    default_port = "443" if scheme == "https" else "11434"
    if rest.startswith("["):  # [::1]:port
        end = rest.find("]")
        after = rest[end + 1 :] if end != -1 else ""
        if end == -1 or (after and not after.startswith(":")):
            raise setting_error(name, f"{name} {value!r} is not a valid address.", hint=HOST_HINT)
        host, port = rest[1:end], after[1:]
        _check_ipv6(host, value, name)
    elif rest.count(":") > 1:  # bare IPv6 without brackets
        host, port = rest, ""
        _check_ipv6(host, value, name)
    elif ":" in rest:
        host, port = rest.split(":", 1)
    else:
        host, port = rest, ""
    if host and ":" not in host and not _HOSTNAME.fullmatch(host):
        raise setting_error(name, f"{name} {value!r} has an invalid host {host!r}.", hint=HOST_HINT)
    host = host or "127.0.0.1"
    port = port or default_port
    if host == "0.0.0.0":
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise setting_error(name, f"{name} {value!r} has an invalid port {port!r} (ports are 1 "
                            "to 65535).", hint=HOST_HINT)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}{path}"


def _check_ipv6(host: str, value: str, name: str) -> None:
    import ipaddress

    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        raise setting_error(name, f"{name} {value!r} is not a valid IPv6 address.",
                            hint=HOST_HINT) from None
