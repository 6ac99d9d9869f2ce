"""tune_nic's plan: what to change on each selected interface, from the
profile's `nic` settings and what was read from the host (read.yml); and
after it, the settings that did not take (verify.yml), the plan as
NetworkManager properties (networkmanager.yml) and the commands that restore
the recorded baseline (absent.yml).

Pure functions on plain data, so that tests/test_nic_plan.py can check every
branch without a playbook run; the role reaches them as Jinja filters
(FilterModule at the end).  Nothing here touches a host: the commands are
data that present.yml runs.

A plan entry per interface:
  address       the MAC address (udev rules and .link files match on it)
  expected      the profile's settings the interface can take, as ethtool
                prints them (features, coalesce, rings; mtu as a number)
  baseline      the live value of each expected setting, for revert
  unsupported   one readable line per setting the interface cannot take
  commands      argv lists that bring the live settings to the expected ones
  commands_all  argv lists that set every expected setting (for udev, which
                sees an interface come up at the driver defaults)
"""

import numbers

# RFC 791: every IPv4 link must carry 68 bytes (the kernel's ETH_MIN_MTU);
# 65535 is the kernel's ETH_MAX_MTU and the IPv4 total-length limit
MTU_MIN = 68
MTU_MAX = 65535

ON_OFF = ("on", "off")
# ethtool option per section, in the order the commands run
ETHTOOL_OPTION = {"features": "-K", "coalesce": "-C", "rings": "-G"}
# ethtool -c and -g print "n/a" for a parameter the driver does not have
NOT_AVAILABLE = "n/a"


class NicPlanError(ValueError):
    """Bad input: the message is one line that names the field."""


# -- the input ---------------------------------------------------------------

def interface_names(value, field="tune_nic_interfaces"):
    """A list of names from a list or a comma-separated string: on the
    command line -e tune_nic_interfaces=eth0,eth1 arrives as a string."""
    if value is None:
        return []
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, numbers.Number):
        # -e tune_nic_interfaces=0 (an interface named 0) arrives as a number
        items = [value]
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise NicPlanError(f"{field}: expected a list or a comma-separated string, "
                           f"got {type(value).__name__} {value!r}")
    return [name for name in (str(item).strip() for item in items) if name]


def _mapping_or_empty(value, field):
    """A section left empty in YAML (`features:`) is None: nothing to set."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise NicPlanError(f"{field}: expected a mapping of setting to value, "
                           f"got {type(value).__name__} {value!r}")
    return value


def _is_whole_number(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    # isascii: str.isdigit also accepts digits int() refuses, such as "²"
    return isinstance(value, str) and value.isascii() and value.isdigit()


def _unquoted_boolean_hint(field, value):
    # YAML 1.1 reads a bare on/off/yes/no as a boolean, which ethtool would
    # get as True/False: the profile must quote it
    return NicPlanError(f"{field}: {value!r} is a YAML boolean; quote it (\"on\" or \"off\")")


def checked_mtu(value, field="nic.mtu"):
    """The MTU as a number within what Linux accepts on any link."""
    if isinstance(value, bool):
        raise NicPlanError(f"{field}: {value!r} is not a number of bytes")
    if not _is_whole_number(value):
        raise NicPlanError(f"{field}: {value!r} is not a whole number of bytes")
    mtu = int(value)
    if not MTU_MIN <= mtu <= MTU_MAX:
        raise NicPlanError(f"{field}: {mtu} is outside {MTU_MIN}..{MTU_MAX}")
    return mtu


def _check_feature(field, value):
    if isinstance(value, bool):
        raise _unquoted_boolean_hint(field, value)
    if value not in ON_OFF:
        raise NicPlanError(f"{field}: {value!r} is not \"on\" or \"off\"")


def _check_coalesce(field, value):
    if isinstance(value, bool):
        raise _unquoted_boolean_hint(field, value)
    if value == "max":
        raise NicPlanError(f"{field}: \"max\" is for rings only (the driver's pre-set maximum)")
    if value not in ON_OFF and not _is_whole_number(value):
        raise NicPlanError(f"{field}: {value!r} is not a whole number, \"on\" or \"off\"")


def _check_ring(field, value):
    if value != "max" and not (_is_whole_number(value) and int(value) > 0):
        raise NicPlanError(f"{field}: {value!r} is not a positive whole number or \"max\"")


VALUE_CHECK = {"features": _check_feature, "coalesce": _check_coalesce, "rings": _check_ring}


def checked_section(nic, section):
    """The profile's settings of one ethtool section, each value checked."""
    wanted = _mapping_or_empty(nic.get(section), f"nic.{section}")
    for name, value in wanted.items():
        if not isinstance(name, str):
            raise NicPlanError(f"nic.{section}: setting name {name!r} is not a string")
        VALUE_CHECK[section](f"nic.{section}.{name}", value)
    return wanted


def checked_nic_settings(settings):
    """The profile's `nic` section, checked before any plan is made: a bad
    profile fails with the field named, never as a wrong ethtool command."""
    settings = _mapping_or_empty(settings, "tune_profile_settings")
    nic = _mapping_or_empty(settings.get("nic"), "nic")
    unknown = sorted(set(nic) - {"mtu", *ETHTOOL_OPTION})
    if unknown:
        raise NicPlanError(f"nic: unknown setting {', '.join(map(str, unknown))} "
                           f"(known: mtu, {', '.join(ETHTOOL_OPTION)})")
    checked = {section: checked_section(nic, section) for section in ETHTOOL_OPTION}
    if nic.get("mtu") is not None:
        checked["mtu"] = checked_mtu(nic["mtu"])
    return checked


# -- one interface -------------------------------------------------------------

def _number_or_zero(text):
    """What Jinja's int filter made of ethtool's text ("n/a" is 0): the
    plan compares the same way the templates it replaced did."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


def _empty_sections():
    # mtu, when planned, is added after these: the order the templates had
    return {section: {} for section in ETHTOOL_OPTION}


class InterfacePlan:
    """The plan of one interface, built setting by setting."""

    def __init__(self, ifname, live):
        self.ifname = ifname
        self.live = live
        self.expected = _empty_sections()
        self.baseline = _empty_sections()
        self.unsupported = []
        self.commands = []

    def cannot(self, reason):
        self.unsupported.append(f"{self.ifname}: {reason}")

    def plan_mtu(self, mtu):
        max_mtu = self.live.get("max_mtu") or 0
        # max_mtu 0: the kernel does not say (an old driver); let ip try
        if max_mtu and mtu > _number_or_zero(max_mtu):
            self.cannot(f"mtu {mtu} exceeds the driver maximum {max_mtu}")
            return
        self.expected["mtu"] = mtu
        self.baseline["mtu"] = self.live["mtu"]
        if _number_or_zero(self.live["mtu"]) != mtu:
            self.commands.append(["ip", "link", "set", "dev", self.ifname, "mtu", str(mtu)])

    def plan_features(self, wanted):
        live_features = self.live.get("features") or {}
        changes = []
        for name, value in wanted.items():
            if name not in live_features:
                self.cannot(f"offload {name} unknown to the driver")
            elif name in (self.live.get("fixed") or []) and live_features[name] != value:
                self.cannot(f"offload {name} is fixed {live_features[name]} by the driver")
            else:
                self._expect("features", name, value, live_features[name], changes)
        self._add_ethtool_command("features", changes)

    def plan_counters(self, section, wanted):
        """Coalescing or rings: numbers (or on/off) ethtool -c / -g print."""
        if not wanted:
            return
        live_values = self.live.get(section)
        if live_values is None:
            # ethtool -c / -g failed on this driver: its error says why
            self.cannot(f"{section} {', '.join(wanted)} unsupported "
                        f"({self.live.get(section + '_error', '')})")
            return
        changes = []
        for name, value in wanted.items():
            target = self._ring_maximum(name) if value == "max" else str(value)
            current = live_values.get(name, NOT_AVAILABLE)
            if NOT_AVAILABLE in (current, target):
                self.cannot(f"{section} {name} unsupported by the driver")
            elif section == "rings" and self._exceeds_ring_maximum(name, target):
                self.cannot(f"ring {name} {target} exceeds the driver maximum "
                            f"{self.live['rings_max'].get(name, NOT_AVAILABLE)}")
            else:
                self._expect(section, name, target, current, changes)
        self._add_ethtool_command(section, changes)

    def _ring_maximum(self, name):
        return (self.live.get("rings_max") or {}).get(name, NOT_AVAILABLE)

    def _exceeds_ring_maximum(self, name, target):
        return _number_or_zero(target) > _number_or_zero(self._ring_maximum(name))

    def _expect(self, section, name, target, current, changes):
        self.expected[section][name] = target
        self.baseline[section][name] = current
        if current != target:
            changes.extend([name, target])

    def _add_ethtool_command(self, section, changes):
        if changes:
            self.commands.append(["ethtool", ETHTOOL_OPTION[section], self.ifname] + changes)

    def commands_for_every_setting(self):
        """Every expected setting, changed or not: an interface that
        appears at boot (udev) starts from the driver defaults."""
        argvs = []
        if "mtu" in self.expected:
            argvs.append(["ip", "link", "set", "dev", self.ifname, "mtu", str(self.expected["mtu"])])
        for section, option in ETHTOOL_OPTION.items():
            if self.expected[section]:
                pairs = [item for pair in self.expected[section].items() for item in pair]
                argvs.append(["ethtool", option, self.ifname] + pairs)
        return argvs

    def as_dict(self):
        return {"address": self.live.get("address", ""), "expected": self.expected,
                "baseline": self.baseline, "unsupported": self.unsupported,
                "commands": self.commands, "commands_all": self.commands_for_every_setting()}


def interface_plan(ifname, live, nic):
    """The plan of one interface; `nic` is checked_nic_settings' output."""
    plan = InterfacePlan(ifname, live)
    if "mtu" in nic:
        plan.plan_mtu(nic["mtu"])
    plan.plan_features(nic["features"])
    plan.plan_counters("coalesce", nic["coalesce"])
    plan.plan_counters("rings", nic["rings"])
    return plan.as_dict()


def nic_plan(selected, live, settings):
    """The plan of every selected interface.

    selected  interface names (select.yml's tune_nic_selected)
    live      per interface, what read.yml read (netbench_nic_live.py)
    settings  the resolved profile (tune_profile_settings); only `nic` is used
    """
    nic = checked_nic_settings(settings)
    live = _mapping_or_empty(live, "tune_nic_live")
    missing = [name for name in interface_names(selected, "tune_nic_selected") if name not in live]
    if missing:
        raise NicPlanError(f"tune_nic_live: no live settings read for {', '.join(missing)}")
    return {name: interface_plan(name, live[name], nic)
            for name in interface_names(selected, "tune_nic_selected")}


# -- after the plan: verify, persist, revert -------------------------------------

def _section_or_empty(live, section):
    # ethtool -c / -g failed: None, nothing readable
    return live.get(section) or {}


def mismatches(plan, live):
    """Readable lines for every expected setting the live one is not
    (verify.yml, after the commands ran)."""
    wrong = []
    for ifname, entry in plan.items():
        now = live[ifname]
        expected = entry["expected"]
        if "mtu" in expected and _number_or_zero(now["mtu"]) != _number_or_zero(expected["mtu"]):
            wrong.append(f"{ifname} mtu {now['mtu']} (wanted {expected['mtu']})")
        for section in ETHTOOL_OPTION:
            live_values = _section_or_empty(now, section)
            for name, value in expected[section].items():
                if live_values.get(name, "") != value:
                    wrong.append(f"{ifname} {name} {live_values.get(name, '?')} (wanted {value})")
    return wrong


def nm_properties(expected, property_names):
    """One interface's expected settings as NetworkManager connection
    properties (vars/main.yml's tune_nic_nm_properties names them): the
    ethtool.* features take on/off, coalesce-adaptive-* take 1/0."""
    properties = {}
    if "mtu" in expected:
        properties["802-3-ethernet.mtu"] = str(expected["mtu"])
    for section in ETHTOOL_OPTION:
        for name, value in expected[section].items():
            if name not in property_names[section]:
                continue  # NetworkManager has no property for it: live only
            prop = property_names[section][name]
            if "adaptive" in prop:
                value = {"on": "1", "off": "0"}.get(value, value)
            properties[prop] = str(value)
    return properties


def _restore_args(recorded, live_values):
    """name, value pairs of the recorded values the live ones differ from;
    a setting no longer readable is left alone."""
    return [item for name, value in (recorded or {}).items()
            if live_values.get(name, value) != value for item in (name, value)]


def revert_commands(baseline, live):
    """Per recorded interface still present, the commands that bring it back
    to its baseline (absent.yml; nothing for what already is)."""
    commands = {}
    for ifname, recorded in baseline.items():
        if ifname not in live:
            continue  # gone: absent.yml reports it
        now = live[ifname]
        argvs = []
        if "mtu" in recorded and _number_or_zero(now["mtu"]) != _number_or_zero(recorded["mtu"]):
            argvs.append(["ip", "link", "set", "dev", ifname, "mtu", str(recorded["mtu"])])
        for section, option in ETHTOOL_OPTION.items():
            if section != "features" and now.get(section) is None:
                continue  # ethtool cannot read it now: it cannot set it either
            args = _restore_args(recorded.get(section), _section_or_empty(now, section))
            if args:
                argvs.append(["ethtool", option, ifname] + args)
        commands[ifname] = argvs
    return commands


# -- Ansible -------------------------------------------------------------------

def _as_filter(function):
    """Bad input becomes Ansible's filter error: one line, the task fails."""
    def run(*args, **kwargs):
        from ansible.errors import AnsibleFilterError  # only Ansible's runs need it
        try:
            return function(*args, **kwargs)
        except NicPlanError as error:
            raise AnsibleFilterError(f"tune_nic: {error}") from None
    run.__name__ = function.__name__
    run.__doc__ = function.__doc__
    return run


class FilterModule:
    """tune_nic's filters, each named after the function it runs."""

    def filters(self):
        return {"netbench_nic_names": _as_filter(interface_names),
                "netbench_nic_plan": _as_filter(nic_plan),
                "netbench_nic_mismatches": _as_filter(mismatches),
                "netbench_nic_nm_properties": _as_filter(nm_properties),
                "netbench_nic_revert": _as_filter(revert_commands)}
