"""The values some command-line options take, parsed: a listening address (``--export``, ``--serve``) and a
duration (``--range``). Each bad value is one line in the error it raises (cli turns it into exit 2)."""

from __future__ import annotations

import ipaddress

LOCALHOST = "127.0.0.1"  # where --export and --serve listen unless told another host


class AddressError(ValueError):
    pass


def parse_address(text: str, flag: str = "--export") -> tuple[str, int]:
    """``[HOST:]PORT`` -> (host, port); HOST defaults to 127.0.0.1; ``[::1]:9400`` for IPv6."""
    text = text.strip()
    if not text:
        raise AddressError(f"{flag}: empty address; give [HOST:]PORT, e.g. 127.0.0.1:9400")
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = LOCALHOST, text
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise AddressError(f"{flag} {text}: {host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise AddressError(f"{flag} {text}: write an IPv6 address in brackets, e.g. [::1]:9400")
    if not host:
        raise AddressError(f"{flag} {text}: no host before ':'; give HOST:PORT, or PORT alone for {LOCALHOST}")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise AddressError(f"{flag} {text}: the port must be a number from 1 to 65535")
    return host, int(port)


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, flag: str) -> float:
    """``90s``, ``30m``, ``1h``, ``24h``, ``7d``, ``2w`` (Prometheus' units) -> seconds; ValueError with one line."""
    number, unit = text.strip()[:-1], text.strip()[-1:]
    try:
        seconds = float(number) * DURATION_UNITS[unit]
    except (KeyError, ValueError):
        raise ValueError(f"{flag} {text}: give a number and a unit, s m h d or w (e.g. 1h, 24h, 7d)") from None
    if not 0 < seconds <= 400 * 86400:
        raise ValueError(f"{flag} {text}: give a duration above 0 and up to 400d")
    return seconds


MONITOR_FLAGS = {"--gpu", "--rate", "--no-color", "-v", "--verbose", "--tour"}  # plain gputop's own (the live monitor)


def opens_live_monitor(argv: list[str]) -> bool:
    """``argv`` is the live monitor's (plain ``gputop``, maybe ``--gpu N --rate HZ``): NVML can be opened at once."""
    return all(w.split("=", 1)[0] in MONITOR_FLAGS for w in argv if w.startswith("-"))
