"""tune_nic's reading of one interface: the output of read.yml's commands
(`ip -j -d link show`, `ethtool --json -k`, `ethtool -c`, `ethtool -g`) as
the `live` data netbench_nic.py plans against.  Pure functions on the
commands' registered results (rc, stdout, stderr).

ethtool 6.1 has no JSON for -c and -g: their text is parsed.  A driver
without coalescing or ring support makes ethtool fail ("Operation not
supported"): kept as the error text, which the plan reports.
"""

import json
import re

NOT_AVAILABLE = "n/a"
# `ethtool -c` lines such as "rx-usecs: 3" (adaptive settings share a line)
COALESCE_LINE = re.compile(r"(?m)^([a-z-]+): (\S+)$")
# `ethtool -g` prints the pre-set maximums, then the current settings
RINGS_CURRENT_HEADING = "Current hardware settings:"


class NicReadError(ValueError):
    """A command's output is not what ethtool or ip print."""


def _first_json_entry(result, command):
    try:
        entries = json.loads(result["stdout"])
        return entries[0]
    except (ValueError, LookupError, TypeError):
        raise NicReadError(f"{command}: output is not a JSON list: {str(result.get('stdout'))[:80]!r}") from None


def _one_line_error(result):
    """ethtool's complaint as one line (some versions print it on stdout)."""
    text = (result.get("stderr") or result.get("stdout") or "").strip()
    return re.sub(r"\s+", " ", text)


def _first_group(pattern, text):
    found = re.search(pattern, text)
    return found.group(1) if found else NOT_AVAILABLE


def offloads(result):
    """Feature name to on/off, and the names the driver fixed."""
    features, fixed = {}, []
    # the entry also holds "ifname": only mappings are features
    for name, state in _first_json_entry(result, "ethtool --json -k").items():
        if isinstance(state, dict):
            features[name] = "on" if state.get("active") else "off"
            if state.get("fixed"):
                fixed.append(name)
    return features, fixed


def coalescing(text):
    """Every `name: value` line, and the adaptive ones from their shared
    line "Adaptive RX: on  TX: off"."""
    values = dict(COALESCE_LINE.findall(text))
    values["adaptive-rx"] = _first_group(r"Adaptive RX: (\S+)", text)
    values["adaptive-tx"] = _first_group(r"TX: (\S+)", text)
    return values


def rings(text):
    """The current rx/tx ring sizes and the driver's pre-set maximums."""
    blocks = text.split(RINGS_CURRENT_HEADING)
    maximums, current = blocks[0], blocks[-1]
    size_of = {key: r"(?m)^" + key.upper() + r":\s+(\S+)$" for key in ("rx", "tx")}
    return ({key: _first_group(pattern, current) for key, pattern in size_of.items()},
            {key: _first_group(pattern, maximums) for key, pattern in size_of.items()})


def live_settings(link_result, offloads_result, coalesce_result, rings_result):
    """One interface's live settings from read.yml's four registered results."""
    link = _first_json_entry(link_result, "ip -j -d link show")
    features, fixed = offloads(offloads_result)
    live = {"mtu": link["mtu"], "max_mtu": link.get("max_mtu", 0), "address": link.get("address", ""),
            "features": features, "fixed": fixed,
            "coalesce": None, "coalesce_error": "", "rings": None, "rings_max": None, "rings_error": ""}
    if coalesce_result["rc"] == 0:
        live["coalesce"] = coalescing(coalesce_result["stdout"])
    else:
        live["coalesce_error"] = _one_line_error(coalesce_result)
    if rings_result["rc"] == 0:
        live["rings"], live["rings_max"] = rings(rings_result["stdout"])
    else:
        live["rings_error"] = _one_line_error(rings_result)
    return live


def _as_filter(function):
    """Unreadable output becomes Ansible's filter error: one line."""
    def run(*args, **kwargs):
        from ansible.errors import AnsibleFilterError  # only Ansible's runs need it
        try:
            return function(*args, **kwargs)
        except NicReadError as error:
            raise AnsibleFilterError(f"tune_nic: {error}") from None
    run.__name__ = function.__name__
    run.__doc__ = function.__doc__
    return run


class FilterModule:
    """tune_nic's reading filter: netbench_nic_live."""

    def filters(self):
        return {"netbench_nic_live": _as_filter(live_settings)}
