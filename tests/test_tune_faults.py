"""`netbench tune` under faults (issue 35): bad input refused in one line
before anything is applied, and hosts it cannot read back reported in one
line with the record and page written.  Real ansible throughout: the hosts
it cannot reach are on loopback, a port nothing listens on.

The faults after the tuning is applied, on a virtual cluster's nodes, are
in tests/test_tune_faults_live.py."""

import json

import pytest

from netbench import cli
from netbench.tuning import loop, record

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

UNREACHABLE = """all:
  hosts:
    nohost:
      ansible_host: 127.0.0.1
      ansible_port: 1
"""


def run_cli(tmp_path, capsys, *args, reports=None):
    """`netbench tune` on the unreachable inventory: (exit code, stdout, stderr)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(UNREACHABLE)
    reports = reports or tmp_path / "reports"
    code = cli.main(["tune", "-i", str(inventory), "--reports-dir", str(reports), *args])
    out, err = capsys.readouterr()
    return code, out, err


def write_profile(folder, name, text):
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yml").write_text(text)
    return folder


@pytest.mark.parametrize("text, field", [
    ("settings:\n  - sysctl\nflavours:\n  throughput: {}\n", "settings"),
    ("settings:\n  nic: [9000]\nflavours:\n  throughput: {}\n", "settings.nic"),
    ("settings:\n  nic:\n    mtu: jumbo\nflavours:\n  throughput: {}\n", "settings.nic.mtu"),
    ("settings:\n  sysctls: {}\nflavours:\n  throughput: {}\n", "settings.sysctls"),
    ("settings: {}\nflavours:\n  throughput:\n    sysctl: [a]\n", "flavours.throughput.sysctl"),
    ("settings: {}\n", "flavours"),
])
def test_a_profile_the_roles_cannot_read_is_one_line_naming_file_and_field(
        tmp_path, capsys, text, field):
    profiles = write_profile(tmp_path / "profiles", "bad", text)
    code, out, err = run_cli(tmp_path, capsys, "--profile", "bad", "--profile-dir", str(profiles))
    assert code == 2
    assert err.strip().startswith(f"netbench: {profiles / 'bad.yml'}: {field}: "), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == "" and not (tmp_path / "reports").exists()     # nothing read, nothing written


def test_a_broken_profile_beside_the_chosen_one_is_refused_before_anything_runs(
        tmp_path, capsys):
    # every read-back reads the sysctls of every profile in the folder
    profiles = write_profile(tmp_path / "profiles", "good",
                             "settings: {}\nflavours:\n  throughput: {}\n")
    write_profile(profiles, "broken", "settings: [1]\nflavours: {}\n")
    code, out, err = run_cli(tmp_path, capsys, "--profile", "good", "--profile-dir",
                             str(profiles))
    assert code == 2 and err.strip() == \
        f"netbench: {profiles / 'broken.yml'}: settings: expected a mapping or null, got list [1]"
    assert out == "" and not (tmp_path / "reports").exists()


@pytest.mark.parametrize("under", ["", "sub"])
def test_a_reports_dir_naming_a_file_is_one_line_before_anything_runs(tmp_path, capsys, under):
    taken = tmp_path / "taken"
    taken.write_text("someone's file\n")
    reports = taken / under if under else taken
    code, out, err = run_cli(tmp_path, capsys, "--profile", "ethernet_1g", reports=reports)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith(f"netbench: {reports}: --reports-dir: "), err
    assert out == "" and taken.read_text() == "someone's file\n"


def test_hosts_it_cannot_read_back_are_one_line_and_the_record_and_page_are_written(
        tmp_path, capsys):
    code, out, err = run_cli(tmp_path, capsys, "--profile", "ethernet_1g")
    assert code == 2, out + err
    assert "Traceback" not in out + err and err == ""
    failed = [line for line in out.splitlines() if line.startswith("netbench tune: failed: ")]
    assert failed and failed[0] == failed[-1]
    assert failed[0].startswith("netbench tune: failed: cannot read the hosts' settings back "
                                "(nohost): nohost: ")
    assert "Connection refused" in failed[0]
    # ansible's own multi-line text is not echoed
    assert "UNREACHABLE" not in out and "{" not in out
    (folder,) = (tmp_path / "reports").iterdir()
    rec = record.load(folder)
    assert rec["failure"]["message"] == failed[0].removeprefix("netbench tune: failed: ")
    assert "revert" not in rec
    assert "cannot read the hosts" in (folder / "index.html").read_text()
    assert not (folder / "tuning-state.json").exists()      # nothing was applied


@pytest.mark.parametrize("failing", ["record", "page"])
def test_a_record_or_page_that_cannot_be_written_costs_neither_the_other(
        tmp_path, capsys, monkeypatch, failing):
    """loop.write_outputs after the revert: a full disk writing one says so
    in one line and the other is still written (the live faults test
    fails both at once)."""
    from netbench.tuning import page
    run_cli(tmp_path, capsys, "--profile", "ethernet_1g")
    (folder,) = (tmp_path / "reports").iterdir()
    rec, again = record.load(folder), tmp_path / "again"
    again.mkdir()

    def full_disk(*_args, **_kw):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr({"record": record, "page": page}[failing], "write", full_disk)
    said = []
    written = loop.write_outputs(rec, again, said.append)
    lost, kept = {"record": (record.FILE, "index.html"),
                  "page": ("index.html", record.FILE)}[failing]
    assert written == [kept] and (again / kept).is_file() and not (again / lost).exists()
    assert said == [f"netbench tune: {lost} not written: OSError: [Errno 28] No space left "
                    f"on device"]


def test_any_exception_is_recorded_in_one_line_with_its_type():
    assert loop.failure_entry(TypeError("'<' not supported\nbetween")) == {
        "stage": "failed", "message": "TypeError: '<' not supported between"}
    assert loop.failure_entry(loop.TuneError("tune.yml failed")) == {
        "stage": "failed", "message": "tune.yml failed"}
    assert loop.failure_entry(OSError(28, "No space left on device"))["message"] == \
        "OSError: [Errno 28] No space left on device"
    assert loop.failure_entry(KeyboardInterrupt()) == {"stage": "interrupted",
                                                       "message": "SIGINT received"}
    assert loop.failure_entry(KeyboardInterrupt("SIGTERM"))["message"] == "SIGTERM received"
    assert json.dumps(loop.failure_entry(ValueError("\x1b]0;x\x07")))  # escaped, one line
    assert "\x1b" not in loop.failure_entry(ValueError("\x1b]0;x\x07"))["message"]
