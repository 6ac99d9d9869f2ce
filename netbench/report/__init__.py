"""HTML reports from ReFrame's JSON run reports, one module per job:

- sessions:   load a run report (and its provenance.json), validated
- provenance: this machine at the end of a session
- sections:   what each section of the page draws, from the cases' records
- analysis:   curve fits the sections draw (Hockney fit, protocol switch, dips)
- plots:      those sections as inline SVG (matplotlib, loaded when drawing)
- page:       the HTML pages (Jinja2): a session, a comparison, the index
- publish:    session folders under reports/, the index and `latest`, and
              publishing after every ReFrame session

The names below are the package's public face: what netbench.cli,
reframe_checks/settings.py and the tests use.  `netbench.report.publish` is
the function; its module is sys.modules["netbench.report.publish"].
"""

from .page import case_rows, comparison_rows, history_for, render_report
from .plots import build_sections
from .publish import SESSION_FILES, publish, publish_after_session, write_report
from .sections import CURVE_PLOTS, LEGACY_UNITS, case_record, curve_plot_data
from .sessions import load_session

__all__ = ["CURVE_PLOTS", "LEGACY_UNITS", "SESSION_FILES", "build_sections", "case_record",
           "case_rows", "comparison_rows", "curve_plot_data", "history_for", "load_session",
           "publish", "publish_after_session", "render_report", "write_report"]
