"""tune_nic's plan (playbooks/roles/tune_nic/filter_plugins/netbench_nic.py)
as plain functions: what would change on each interface for each profile,
without a playbook run or a host.

The plans the role's Jinja template made before are kept in
tests/data/nic_plan/plan_golden.json; the Python plan must be the same.
"""

import copy
import importlib.util
import json

import pytest
import yaml

from netbench import paths

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

ROLE = paths.REPO / "playbooks/roles/tune_nic"
PROFILES = sorted((paths.REPO / "playbooks/profiles").glob("*.yml"))
GOLDEN = json.loads((paths.REPO / "tests/data/nic_plan/plan_golden.json").read_text())
READINGS = GOLDEN["readings"]


def _load_filters():
    # a role's filter_plugins folder is no package: load the file by path,
    # the way Ansible's plugin loader does
    spec = importlib.util.spec_from_file_location("netbench_nic", ROLE / "filter_plugins/netbench_nic.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nic = _load_filters()


def reading(name, **changes):
    """A copy of one recorded `live` reading, with some values changed."""
    live = copy.deepcopy(READINGS[name])
    live.update(changes)
    return live


def profile_settings(path, flavour):
    """tune_profile's merge: the flavour over the common settings."""
    data = yaml.safe_load(path.read_text())

    def combine(base, over):
        merged = dict(base)
        for key, value in (over or {}).items():
            both_mappings = isinstance(merged.get(key), dict) and isinstance(value, dict)
            merged[key] = combine(merged[key], value) if both_mappings else value
        return merged

    return combine(data.get("settings") or {}, data["flavours"][flavour])


# -- the same plans as the Jinja template ----------------------------------------

@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[c["name"] for c in GOLDEN["cases"]])
def test_plan_is_the_templates(case):
    live = {ifname: READINGS[name] for ifname, name in case["live"].items()}
    plan = nic.nic_plan(case["selected"], live, case["settings"])
    # json.dumps keeps the key order: the fact files and the rule list
    # settings in this order
    assert json.dumps(plan) == json.dumps(case["plan"])


# -- every profile ---------------------------------------------------------------

PROFILE_FLAVOURS = [(p, f) for p in PROFILES for f in yaml.safe_load(p.read_text())["flavours"]]


@pytest.mark.parametrize("path,flavour", PROFILE_FLAVOURS,
                         ids=[f"{p.stem}-{f}" for p, f in PROFILE_FLAVOURS])
def test_every_profile_plans_a_physical_nic(path, flavour):
    settings = profile_settings(path, flavour)
    wanted = settings.get("nic") or {}
    plan = nic.nic_plan(["eth0"], {"eth0": READINGS["e1000e"]}, settings)["eth0"]
    if "mtu" in wanted:
        assert plan["expected"]["mtu"] == wanted["mtu"]
        assert plan["baseline"]["mtu"] == 1500
    else:
        assert "mtu" not in plan["expected"] and not plan["commands"]
    # every setting is either expected or reported, never silently dropped
    for section in ("features", "coalesce", "rings"):
        for name in wanted.get(section) or {}:
            reported = any(f" {name} " in line for line in plan["unsupported"])
            assert (name in plan["expected"][section]) != reported, (section, name)
    # rings "max" means the driver's pre-set maximum
    for name, value in (wanted.get("rings") or {}).items():
        if value == "max":
            assert plan["expected"]["rings"][name] == READINGS["e1000e"]["rings_max"][name]


@pytest.mark.parametrize("path,flavour", PROFILE_FLAVOURS,
                         ids=[f"{p.stem}-{f}" for p, f in PROFILE_FLAVOURS])
def test_every_profile_on_a_veth_reports_coalescing_and_rings(path, flavour):
    settings = profile_settings(path, flavour)
    wanted = settings.get("nic") or {}
    plan = nic.nic_plan("veth1", {"veth1": READINGS["veth"]}, settings)["veth1"]
    for section in ("coalesce", "rings"):
        if wanted.get(section):
            assert (f"veth1: {section} {', '.join(wanted[section])} unsupported "
                    "(netlink error: Operation not supported)") in plan["unsupported"]
        assert plan["expected"][section] == {}


# -- interface lists ---------------------------------------------------------------

@pytest.mark.parametrize("given,names", [
    ("eth0", ["eth0"]),
    ("eth0,eth1", ["eth0", "eth1"]),
    (" eth0 , ,eth1,", ["eth0", "eth1"]),
    (["eth0", " eth1 "], ["eth0", "eth1"]),
    (0, ["0"]),
    ("", []),
    ([], []),
    (None, []),
])
def test_interface_names_from_a_string_or_a_list(given, names):
    assert nic.interface_names(given) == names


def test_interface_names_refuse_a_mapping_naming_the_field():
    with pytest.raises(nic.NicPlanError, match=r"^tune_nic_drivers: expected a list or a comma-separated"):
        nic.interface_names({"eth0": 1}, "tune_nic_drivers")


def test_selected_as_a_string_plans_the_same_as_a_list():
    live = {"eth0": READINGS["e1000e"], "veth1": READINGS["veth"]}
    settings = profile_settings(paths.REPO / "playbooks/profiles/ethernet_1g.yml", "throughput")
    assert nic.nic_plan("eth0,veth1", live, settings) == nic.nic_plan(["eth0", "veth1"], live, settings)


# -- ethtool features the driver lacks -----------------------------------------------

def test_unknown_and_fixed_offloads_are_reported_not_planned():
    settings = {"nic": {"features": {"no-such-offload": "on", "large-receive-offload": "on",
                                     "generic-receive-offload": "off"}}}
    plan = nic.nic_plan(["eth0"], {"eth0": READINGS["e1000e"]}, settings)["eth0"]
    assert plan["unsupported"] == ["eth0: offload no-such-offload unknown to the driver",
                                   "eth0: offload large-receive-offload is fixed off by the driver"]
    assert plan["expected"]["features"] == {"generic-receive-offload": "off"}
    assert plan["commands"] == [["ethtool", "-K", "eth0", "generic-receive-offload", "off"]]


def test_a_driver_without_ring_maximum_cannot_take_max():
    live = reading("ipoib")  # tx ring "n/a"
    plan = nic.nic_plan(["ib0"], {"ib0": live}, {"nic": {"rings": {"rx": "max", "tx": "max"}}})["ib0"]
    assert plan["expected"]["rings"] == {"rx": "8192"}
    assert plan["unsupported"] == ["ib0: rings tx unsupported by the driver"]


def test_a_ring_above_the_maximum_is_reported():
    plan = nic.nic_plan(["eth0"], {"eth0": READINGS["e1000e"]}, {"nic": {"rings": {"rx": 8192}}})["eth0"]
    assert plan["unsupported"] == ["eth0: ring rx 8192 exceeds the driver maximum 4096"]
    assert plan["commands"] == []


def test_no_coalescing_support_names_ethtools_error():
    plan = nic.nic_plan(["veth1"], {"veth1": READINGS["veth"]},
                        {"nic": {"coalesce": {"adaptive-rx": "on", "rx-usecs": 10}}})["veth1"]
    assert plan["unsupported"] == ["veth1: coalesce adaptive-rx, rx-usecs unsupported "
                                   "(netlink error: Operation not supported)"]
    assert plan["commands_all"] == []


def test_settings_already_live_need_no_command_but_stay_in_the_boot_rule():
    settings = profile_settings(paths.REPO / "playbooks/profiles/ethernet_1g.yml", "throughput")
    plan = nic.nic_plan(["eth0"], {"eth0": READINGS["e1000e_tuned"]}, settings)["eth0"]
    assert plan["commands"] == []
    assert plan["commands_all"][0] == ["ip", "link", "set", "dev", "eth0", "mtu", "9000"]
    assert [argv[1] for argv in plan["commands_all"][1:]] == ["-K", "-C", "-G"]


# -- MTU bounds ---------------------------------------------------------------------------

@pytest.mark.parametrize("max_mtu,mtu,planned", [
    (9000, 9000, True),    # at the driver maximum
    (9000, 9001, False),   # above it
    (0, 9000, True),       # the kernel gives no maximum: ip decides
    (65535, 68, True),     # the smallest IPv4 link
])
def test_mtu_against_the_driver_maximum(max_mtu, mtu, planned):
    plan = nic.nic_plan(["eth0"], {"eth0": reading("e1000e", max_mtu=max_mtu)},
                        {"nic": {"mtu": mtu}})["eth0"]
    assert ("mtu" in plan["expected"]) == planned
    if not planned:
        assert plan["unsupported"] == [f"eth0: mtu {mtu} exceeds the driver maximum {max_mtu}"]


@pytest.mark.parametrize("mtu,message", [
    (67, "nic.mtu: 67 is outside 68..65535"),
    (65536, "nic.mtu: 65536 is outside 68..65535"),
    ("jumbo", "nic.mtu: 'jumbo' is not a whole number of bytes"),
    (-1, "nic.mtu: -1 is not a whole number of bytes"),
    (9000.5, "nic.mtu: 9000.5 is not a whole number of bytes"),
    (True, "nic.mtu: True is not a number of bytes"),
    ("9000²", "nic.mtu: '9000²' is not a whole number of bytes"),
])
def test_mtu_out_of_bounds_is_refused(mtu, message):
    with pytest.raises(nic.NicPlanError) as raised:
        nic.nic_plan(["eth0"], {"eth0": READINGS["e1000e"]}, {"nic": {"mtu": mtu}})
    assert str(raised.value) == message


# -- bad input: one line naming the field ----------------------------------------------------

@pytest.mark.parametrize("settings,field", [
    ({"nic": {"features": {"generic-receive-offload": True}}}, "nic.features.generic-receive-offload"),
    ({"nic": {"features": {"generic-receive-offload": "enabled"}}}, "nic.features.generic-receive-offload"),
    ({"nic": {"features": ["generic-receive-offload"]}}, "nic.features"),
    ({"nic": {"coalesce": {"adaptive-rx": False}}}, "nic.coalesce.adaptive-rx"),
    ({"nic": {"coalesce": {"rx-usecs": "max"}}}, "nic.coalesce.rx-usecs"),
    ({"nic": {"coalesce": {"rx-usecs": "fast"}}}, "nic.coalesce.rx-usecs"),
    ({"nic": {"rings": {"rx": 0}}}, "nic.rings.rx"),
    ({"nic": {"rings": {"rx": "biggest"}}}, "nic.rings.rx"),
    ({"nic": {"ring": {"rx": "max"}}}, "nic: unknown setting ring"),
    ({"nic": "mtu 9000"}, "nic:"),
    ("ethernet_1g", "tune_profile_settings:"),
])
def test_bad_settings_fail_with_one_line_naming_the_field(settings, field):
    with pytest.raises(nic.NicPlanError) as raised:
        nic.nic_plan(["eth0"], {"eth0": READINGS["e1000e"]}, settings)
    message = str(raised.value)
    assert message.startswith(field) and "\n" not in message


def test_an_unquoted_on_says_to_quote_it():
    with pytest.raises(nic.NicPlanError, match=r'quote it \("on" or "off"\)'):
        nic.checked_nic_settings({"nic": {"coalesce": {"adaptive-rx": True}}})


def test_an_interface_never_read_is_named():
    with pytest.raises(nic.NicPlanError, match=r"^tune_nic_live: no live settings read for eth1$"):
        nic.nic_plan(["eth0", "eth1"], {"eth0": READINGS["e1000e"]}, {"nic": {"mtu": 9000}})


def test_ansible_gets_a_filter_error():
    # how a task sees bad input: AnsibleFilterError, prefixed with the role
    from ansible.errors import AnsibleFilterError

    plan = nic.FilterModule().filters()["netbench_nic_plan"]
    with pytest.raises(AnsibleFilterError, match=r"^tune_nic: nic.mtu: 12 is outside 68..65535"):
        plan(["eth0"], {"eth0": READINGS["e1000e"]}, {"nic": {"mtu": 12}})


# -- verify, NetworkManager, revert: the same as their templates --------------------------

SIBLINGS = json.loads((paths.REPO / "tests/data/nic_plan/verify_revert_golden.json").read_text())
PLANS = {case["name"]: case["plan"] for case in GOLDEN["cases"]}
NM_PROPERTIES = yaml.safe_load((ROLE / "vars/main.yml").read_text())["tune_nic_nm_properties"]


@pytest.mark.parametrize("case", SIBLINGS["mismatch"], ids=[c["name"] for c in SIBLINGS["mismatch"]])
def test_mismatches_are_the_templates(case):
    assert nic.mismatches(PLANS[case["plan"]], case["live"]) == case["wrong"]


@pytest.mark.parametrize("case", SIBLINGS["nm"], ids=[c["name"] for c in SIBLINGS["nm"]])
def test_nm_properties_are_the_templates(case):
    expected = PLANS[case["plan"]][case["ifname"]]["expected"]
    assert json.dumps(nic.nm_properties(expected, NM_PROPERTIES)) == json.dumps(case["properties"])


@pytest.mark.parametrize("case", SIBLINGS["revert"], ids=[c["name"] for c in SIBLINGS["revert"]])
def test_revert_commands_are_the_templates(case):
    assert json.dumps(nic.revert_commands(case["baseline"], case["live"])) == json.dumps(case["commands"])


def test_before_the_commands_run_verify_sees_them_missing_and_revert_has_nothing_to_do():
    settings = profile_settings(paths.REPO / "playbooks/profiles/ethernet_1g.yml", "latency")
    before = {"eth0": READINGS["e1000e"]}
    plan = nic.nic_plan(["eth0"], before, settings)
    assert nic.mismatches(plan, before)  # not applied yet
    baseline = {"eth0": plan["eth0"]["baseline"]}
    assert nic.revert_commands(baseline, before) == {"eth0": []}


def test_nm_properties_skip_settings_networkmanager_lacks():
    expected = {"features": {"rx-checksumming": "on"}, "coalesce": {"adaptive-tx": "off"},
                "rings": {}, "mtu": 9000}
    assert nic.nm_properties(expected, NM_PROPERTIES) == {
        "802-3-ethernet.mtu": "9000", "ethtool.coalesce-adaptive-tx": "0"}


# -- reading an interface: the same as live.json.j2 ------------------------------------------

LIVE_GOLDEN = json.loads((paths.REPO / "tests/data/nic_plan/live_golden.json").read_text())["cases"]


def _load_reader():
    spec = importlib.util.spec_from_file_location("netbench_nic_live",
                                                  ROLE / "filter_plugins/netbench_nic_live.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reader = _load_reader()


@pytest.mark.parametrize("case", LIVE_GOLDEN, ids=[c["name"] for c in LIVE_GOLDEN])
def test_reading_is_the_templates(case):
    live = reader.live_settings(case["ip"], case["k"], case["c"], case["g"])
    assert json.dumps(live) == json.dumps(case["live"])


def test_rings_read_maximum_and_current_apart():
    text = ("Ring parameters for eth0:\nPre-set maximums:\nRX:\t\t4096\nRX Mini:\tn/a\nTX:\t\t4096\n"
            "Current hardware settings:\nRX:\t\t256\nRX Mini:\tn/a\nTX:\t\t512\n")
    assert reader.rings(text) == ({"rx": "256", "tx": "512"}, {"rx": "4096", "tx": "4096"})


def test_adaptive_coalescing_comes_from_its_shared_line():
    values = reader.coalescing("Coalesce parameters for eth0:\nAdaptive RX: on  TX: off\nrx-usecs: 3\n")
    assert values == {"rx-usecs": "3", "adaptive-rx": "on", "adaptive-tx": "off"}


def test_unreadable_ip_output_names_the_command():
    with pytest.raises(reader.NicReadError, match=r"^ip -j -d link show: output is not a JSON list"):
        reader.live_settings({"rc": 0, "stdout": "Device \"eth9\" does not exist.", "stderr": ""},
                             *[{"rc": 0, "stdout": "[{}]", "stderr": ""}] * 3)


def test_a_reading_plans_end_to_end():
    case = next(c for c in LIVE_GOLDEN if c["name"] == "e1000e-like")
    live = reader.live_settings(case["ip"], case["k"], case["c"], case["g"])
    settings = profile_settings(paths.REPO / "playbooks/profiles/ethernet_1g.yml", "throughput")
    plan = nic.nic_plan(["eth0"], {"eth0": live}, settings)["eth0"]
    assert plan["expected"]["rings"] == {"rx": "4096", "tx": "4096"}
    assert ["ethtool", "-G", "eth0", "rx", "4096", "tx", "4096"] in plan["commands"]
