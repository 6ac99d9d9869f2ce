"""The path a case's library said it used, as the report shows it: the
headline table's cell and the sentence of a path verdict
(netbench.judgement.path).  Renders only: the verdicts are the record's."""

from ..textsafe import printable

#: how each verdict code of netbench.judgement.path reads; {on_expected},
#: {on_expected_of} and {on_device} name the devices where the case
#: expected one
SENTENCES = {
    "asked_other": "asked {asked}, the library used {used} (launch {launch} of {launches}: "
                   "{evidence})",
    "silent_fallback": "silent fallback: asked {asked}{on_expected_of} an RDMA interconnect "
                       "class, the library used {used}{on_device}, {fallback} (launch {launch} "
                       "of {launches}: {evidence})",
    "shm_across_nodes": "asked {asked} between nodes, the library used shared memory: the "
                        "bytes did not cross the interconnect (launch {launch} of {launches}: "
                        "{evidence})",
    "wrong_device": "wrong device: asked {asked}{on_expected}, the library used {used}"
                    "{on_device} (launch {launch} of {launches}: {evidence})",
    "path_unknown": "could not tell which path the library used: asked {asked}, its words "
                    "named none netbench knows (launch {launch} of {launches})",
}

#: what a fallback transport is, said of the one used
FALLBACK_KINDS = {"ofi-sockets": "libfabric's sockets provider, no RDMA",
                  "ofi-udp": "libfabric's udp provider, no RDMA"}


def sentence(entry):
    """The sentence of a path verdict (PathVerdict.to_json()); "" for one
    that passed.  Text from the library's output is escaped."""
    template = SENTENCES.get(entry.get("code") or "")
    if not template:
        return ""
    words = {k: printable(str(entry.get(k, ""))) for k in
             ("asked", "used", "launch", "launches", "evidence")}
    expected = printable(str(entry.get("expected_device") or ""))
    device = printable(str(entry.get("device") or ""))
    words["on_expected"] = f" on {expected}" if expected else ""
    words["on_expected_of"] = f" on {expected} of" if expected else " on"
    words["on_device"] = f" on {device}" if expected and device else ""
    words["fallback"] = FALLBACK_KINDS.get(entry.get("used"), "a TCP stack")
    return template.format(**words)


def cell(path):
    """`ucx-tcp (ucx ucx-tcp, eth0)`: the headline table's path cell."""
    if not path:
        return ""
    detail = ", ".join(printable(str(path[k])) for k in ("provider", "device") if path.get(k))
    used = printable(str(path.get("transport", "")))
    return f"{used} ({detail})" if detail else used
