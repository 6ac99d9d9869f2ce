"""The plots' axes read as a person writes them: message sizes in binary
units (1 KiB, 1 MiB), times and rates with their units, plain text in the
SVG and never matplotlib's math text (`$\\mathdefault{10^{5}}$`), whatever
matplotlib's version formats log axes with by default.  The page is also
opened in headless Chromium and its labels read back from the DOM."""

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from conftest import require
from helpers.browser import chromium, run_chromium
from helpers.reports import minimal_report, session_from
from netbench import report
from netbench.report import plots

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

SVG = "{http://www.w3.org/2000/svg}"
TICK = re.compile(r"([xy])tick_\d+$")
SIZE = re.compile(r"^\d+ (B|KiB|MiB|GiB)$")
#: a figure and, where the axis has one, its unit: no exponent, no math
QUANTITY = re.compile(r"^-?[\d,]+(\.\d+)?( (ns|µs|ms|s|[kMGT]bit/s|[kMGT]B/s))?$")


def tick_labels(svg):
    """{"x": [labels], "y": [labels]} of every axis of an SVG figure."""
    found = {"x": [], "y": []}
    for group in ET.fromstring(svg).iter(SVG + "g"):
        axis = TICK.match(group.get("id", ""))
        if axis:
            found[axis.group(1)] += ["".join(t.itertext()).strip()
                                     for t in group.iter(SVG + "text")]
    return found


def figures_of(page):
    return re.findall(r"<svg.*?</svg>", page, re.S)


def no_math(labels):
    return [label for label in labels if "$" in label or "mathdefault" in label]


def test_the_report_s_log_axes_read_as_sizes_and_units(tmp_path):
    page = report.render_report([session_from(minimal_report(), tmp_path)])
    assert "mathdefault" not in page
    svgs = figures_of(page)
    assert len(svgs) >= 2
    for svg in svgs:
        labels = tick_labels(svg)
        assert labels["x"] and labels["y"], labels
        assert no_math(labels["x"] + labels["y"]) == []
        assert all(SIZE.match(x) for x in labels["x"]), labels["x"]
        assert all(QUANTITY.match(y) for y in labels["y"]), labels["y"]
    every_x = {x for svg in svgs for x in tick_labels(svg)["x"]}
    every_y = " ".join(y for svg in svgs for y in tick_labels(svg)["y"])
    assert {"1 B", "1 KiB", "1 MiB"} <= every_x, every_x
    assert "µs" in every_y and "bit/s" in every_y, every_y


def test_a_tick_reads_in_the_scale_of_its_size():
    assert plots.quantity_label(0.5, "us") == "500 ns"
    assert plots.quantity_label(10.0, "us") == "10 µs"
    assert plots.quantity_label(2000.0, "us") == "2 ms"
    assert plots.quantity_label(100000.0, "Mbit/s") == "100 Gbit/s"
    assert plots.quantity_label(250.0, "MB/s") == "250 MB/s"
    assert plots.quantity_label(0.001, "%") == "0.001"
    assert plots.quantity_label(1e6, "x") == "1,000,000"


def test_every_kind_of_plot_labels_its_axes_in_plain_text():
    """Linear axes, a narrow log range (minor ticks labelled), the
    scaling, container and heat-map figures: no math text, no exponent."""
    sizes = [float(1 << k) for k in range(0, 24, 2)]
    narrow = [("a", sizes, [3.0 + k / 100 for k in range(len(sizes))], 0, "mpich")]
    loss = [("a", sizes, [-5.0 + k for k in range(len(sizes))], 0, "mpich")]
    container = ET.tostring(ET.fromstring(plots.container_plot(
        [("mpich", "native", sizes, {"usec": [1e-1 * (k + 1) for k in range(len(sizes))],
                                     "Mbps": [1e5 * (k + 1) for k in range(len(sizes))]})],
        "container")), encoding="unicode")
    svgs = [plots.curve_plot(narrow, "message size", "time (us)", "narrow"),
            plots.curve_plot(loss, "message size", "loss (%)", "linear", logy=False),
            plots.scaling_plot([("mpich ring", [2, 4, 8], [900.0, 450.0, 2e6])], "scaling"),
            container,
            plots.heat_maps(["n1", "n2"], [("bandwidth", "Mbit/s",
                                            np.array([[np.nan, 2e6], [3e6, np.nan]]), True)])]
    for svg in svgs:
        labels = tick_labels(svg)
        assert labels["y"], svg[:200]
        assert no_math(labels["x"] + labels["y"]) == []
        assert not [t for t in labels["x"] + labels["y"] if re.search(r"\de[+-]?\d", t)], labels
    narrow_y = tick_labels(svgs[0])["y"]
    assert [y for y in narrow_y if y], "a log axis within one decade labels no tick"


#: appended to a copy of the page (the page itself runs no script): the
#: text the browser holds in every axis' tick labels
LABEL_PROBE = """<pre id="label-probe"></pre><script>
const labels = {x: [], y: []};
for (const axis of ["x", "y"]) {
  for (const el of document.querySelectorAll(`svg g[id^="${axis}tick_"] text`)) {
    labels[axis].push(el.textContent.trim());
  }
}
document.getElementById("label-probe").textContent = JSON.stringify(labels);
</script>"""


def test_the_browser_reads_the_axis_labels(tmp_path):
    require(chromium() is not None, "Debian's chromium is not installed")
    page = report.render_report([session_from(minimal_report(), tmp_path)])
    probe = tmp_path / "labels.html"
    probe.write_text(page.replace("</body>", LABEL_PROBE + "</body>"))
    dom = run_chromium(probe.as_uri(), tmp_path / "profile", "--dump-dom")
    found = re.search(r'<pre id="label-probe">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stderr[-2000:]
    labels = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert labels["x"] and labels["y"], labels
    assert no_math(labels["x"] + labels["y"]) == []
    assert all(SIZE.match(x) for x in labels["x"]), labels["x"]
    assert {"1 KiB", "1 MiB"} <= set(labels["x"]), labels["x"]
    assert all(QUANTITY.match(y) for y in labels["y"]), labels["y"]
    assert any(y.endswith(" µs") for y in labels["y"]), labels["y"]
    assert any(y.endswith("bit/s") for y in labels["y"]), labels["y"]
