"""Every tune_* role declares in meta/argument_specs.yml what it consumes:
its own variables and what tune_profile and the other roles set for it.
Ansible checks those at the role's start; this keeps the lists complete."""

import re

import pytest
import yaml

from netbench import paths

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

ROLES = sorted((paths.REPO / "playbooks/roles").glob("tune_*"))
# what tune_profile sets, and the results the concern roles leave for tune_record
FROM_OTHER_ROLES = re.compile(r"\b(tune_profile_(?:state|settings|drivers|name|flavour|facts_dir)"
                              r"|tune_nic_selected|tune_nic_driver_of"
                              r"|tune_(?:sysctl|nic|modules|cpu|ucx)_result|tune_modules_reboot_required)\b")


def declared(role):
    specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())
    return set(specs["argument_specs"]["main"]["options"])


def used_from_other_roles(role):
    """Variables of other roles that this role's tasks and templates read."""
    own = role.name + "_"
    text = "\n".join(p.read_text() for folder in ("tasks", "templates")
                     for p in sorted((role / folder).glob("*")) if p.is_file())
    # a role's own results (tune_nic_result in tune_nic) are set, not consumed
    return {name for name in FROM_OTHER_ROLES.findall(text) if not name.startswith(own)}


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_declares_what_other_roles_give_it(role):
    missing = used_from_other_roles(role) - declared(role)
    assert not missing, f"{role.name}/meta/argument_specs.yml lacks {sorted(missing)}"


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_declares_its_defaults(role):
    defaults = role / "defaults/main.yml"
    names = set(yaml.safe_load(defaults.read_text()) or {}) if defaults.exists() else set()
    assert names <= declared(role), f"{role.name}: undeclared defaults {sorted(names - declared(role))}"
